"""A clock daemon disciplining each test bed node's clock (docs/testbed.md
"Clocks as deployed"): a real chronyd, or the model of systemd-timesyncd's
servo that drives the kernel PLL (timesync_client.py).

One unshimmed chronyd in the server node serves the test bed's true time
(the kernel clock every namespace shares; `-x`: it never touches it, `local
stratum 1`). Each disciplined node runs a chronyd client under the
discipline shim (libchronolink_discipline_shim.so, LD_PRELOAD): its clock
reads, adjtimex and packet timestamps go to the node's clock state file, so
it steers that node's clock as it would a server's, over the test bed's
network, and the state file records every change for the truth. The clients
run without CAP_SYS_TIME (setpriv), so that a call the shim did not catch
fails instead of moving the machine's clock.

chronyd's configuration is a LAN client's: `server ... iburst xleave
minpoll 2 maxpoll 4` (updates every 4-16 s); `makestep 0.001 3`
(the start's offset stepped away, as a node that booted would have it).
The timesyncd model polls every 2^minpoll s and tells the kernel PLL each
offset as timesyncd does (ADJ_OFFSET with STA_PLL; a step beyond 0.4 s).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_SHIM = os.path.join(REPO, "build", "tools", "libchronolink_discipline_shim.so")
TIMESYNC_CLIENT = os.path.join(REPO, "tools", "testbed", "timesync_client.py")
CLIENTS = ("chronyd", "timesyncd")


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return float("inf")


class DisciplineError(RuntimeError):
    pass


def _tail(path: str, n: int = 400) -> str:
    try:
        with open(path, "rb") as f:
            return f.read()[-n:].decode(errors="replace").strip()
    except OSError:
        return ""


class ClockDiscipline:
    """A daemon (`client`: chronyd, or the timesyncd model) steering the
    clock state files of `clients` ({node index: state file}) against a
    chronyd server in node `server`."""

    def __init__(self, tb: Any, server: Any, clients: dict[int, str], workdir: str, *, client: str = "chronyd",
                 minpoll: int = 2, maxpoll: int = 4, shim: str = DEFAULT_SHIM, binary: str = "chronyd") -> None:
        if client not in CLIENTS:
            raise ValueError(f"clock daemon {client!r}: one of {', '.join(CLIENTS)}")
        self.client = client
        self.tb = tb
        self.server = tb.node(server)
        self.clients = {int(n): path for n, path in clients.items()}
        self.workdir = os.path.abspath(workdir)
        self.minpoll, self.maxpoll = minpoll, maxpoll
        self.shim = shim
        self.binary = binary
        self.procs: dict[str, subprocess.Popen] = {}
        self._files: list[Any] = []

    def _dir(self, name: str) -> str:
        d = os.path.join(self.workdir, name)
        os.makedirs(os.path.join(d, "log"), exist_ok=True)
        return d

    def _spawn(self, role: str, node: Any, argv: list[str], env: dict | None = None) -> subprocess.Popen:
        log = os.path.join(self.workdir, f"{role}.out")
        f = open(log, "wb")
        self._files.append(f)
        p = self.tb.popen(node, argv, stdout=f, stderr=subprocess.STDOUT, env=env)
        self.procs[role] = p
        return p

    def start(self, ready_timeout: float = 20.0) -> "ClockDiscipline":
        if shutil.which(self.binary) is None:
            raise DisciplineError(f"{self.binary} not found")
        if not os.path.exists(self.shim):
            raise DisciplineError(f"the discipline shim {self.shim} is not built")
        common = "cmdport 0\nbindcmdaddress /\n"
        sdir = self._dir("chronyd-server")
        sconf = os.path.join(sdir, "chrony.conf")
        with open(sconf, "w") as f:
            f.write("# the test bed's NTP server: true time (never touches the clock: -x)\n"
                    "allow all\nlocal stratum 1\n"
                    f"pidfile {sdir}/chronyd.pid\n" + common)
        self._spawn("server", self.server, [self.binary, "-x", "-d", "-u", "root", "-f", sconf])
        for node, state in sorted(self.clients.items()):
            address = "127.0.0.1" if node == self.server.index else self.server.address
            env = dict(os.environ, CHRONOLINK_CLOCK_STATE=state, LD_PRELOAD=self.shim)
            no_sys_time = ["setpriv", "--bounding-set", "-sys_time", "--inh-caps", "-sys_time"]
            if self.client == "timesyncd":
                cdir = self._dir(f"timesyncd-n{node}")
                self._spawn(f"client-n{node}", node, no_sys_time + [
                    "/usr/bin/python3", TIMESYNC_CLIENT, "--server", address, "--poll-s", str(2 ** self.minpoll),
                    "--log", os.path.join(cdir, "log", "polls.jsonl")], env)
                continue
            cdir = self._dir(f"chronyd-n{node}")
            conf = os.path.join(cdir, "chrony.conf")
            with open(conf, "w") as f:
                f.write(f"# node {node}'s clock daemon, steering its clock state file {state}\n"
                        f"server {address} iburst xleave minpoll {self.minpoll} maxpoll {self.maxpoll}\n"
                        "makestep 0.001 3\nport 0\n"
                        f"pidfile {cdir}/chronyd.pid\nlogdir {cdir}/log\nlog tracking measurements\n" + common)
            self._spawn(f"client-n{node}", node, no_sys_time + [self.binary, "-d", "-u", "root", "-f", conf], env)
        deadline = time.monotonic() + ready_timeout
        pending = set(self.clients)
        try:
            while pending:
                for role, p in self.procs.items():
                    if p.poll() is not None:
                        raise DisciplineError(f"chronyd {role} exited with status {p.returncode}: "
                                              f"{_tail(os.path.join(self.workdir, role + '.out'))}")
                for node in list(pending):
                    if self._updated(node):
                        pending.discard(node)
                if pending and time.monotonic() > deadline:
                    raise DisciplineError(f"{self.client} of node(s) {sorted(pending)} did not set the clock in "
                                          f"{ready_timeout:.0f} s")
                time.sleep(0.2)
        except BaseException:
            self.stop()
            raise
        return self

    def _updated(self, node: int) -> bool:
        """Whether node's daemon has set its clock: a chronyd update with a
        frequency and no step left to make; the timesyncd model's first
        action."""
        if self.client == "chronyd":
            # chronyd logs its initial state (source 0.0.0.0) before any
            # update; its first updates step a clock that starts far off
            # (makestep: up to 3, while the offset is over 1 ms), which agents
            # started before them would see as steps, and only once it has
            # two samples does it estimate the frequency (the skew column is
            # 1e6 ppm until then). A node is set when an update has a
            # frequency (skew under 1000 ppm) and an offset under 1 ms: no
            # step can follow, and an agent's fit clock, anchored at
            # REALTIME's rate, is not anchored at the crystal's own
            # (-100 ppm in the demo), which leaves REALTIME by 20 ms in 200 s.
            tracking = os.path.join(self.workdir, f"chronyd-n{node}", "log", "tracking.log")
            try:
                with open(tracking) as f:
                    rows = [line.split() for line in f if line[:1].isdigit()]
            except OSError:
                return False
            return any(len(r) > 6 and r[2] != "0.0.0.0" and _float(r[5]) < 1000 and abs(_float(r[6])) < 1e-3
                       for r in rows)
        try:
            with open(os.path.join(self.workdir, f"timesyncd-n{node}", "log", "polls.jsonl")) as f:
                return any('"action"' in line for line in f)
        except OSError:
            return False

    def stop(self) -> None:
        self.tb.terminate(list(self.procs.values()), timeout=5.0)
        for f in self._files:
            f.close()
        self._files = []

    def __enter__(self) -> "ClockDiscipline":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
