#!/usr/bin/env python3
"""chronyd and ptp4l as side-by-side baseline peers on the chronolink test bed.

All test-bed namespaces share one kernel clock, so the true offset between
any two of them is 0 and every offset a daemon reports is pure error.

chronyd 4.3: `-x` (never touches the system clock), server line with
`minpoll -7 maxpoll -7 xleave noselect` (interleaved mode, ~128 samples/s,
never selected so chronyd's own timescale stays uncorrected), kernel
timestamps (chronyd's default on Linux), `log rawmeasurements statistics
tracking`; one raw sample per row of measurements.log from the server, and
chronyd's own filtered estimate per row of statistics.log (the source's
"Est offset" after chronyd's regression over its recent samples, written
each time a sample is accumulated). `noselect` stays: under `-x` a selected
source still makes chronyd correct its own (cooked) timescale, so both logs
would then report offsets against that corrected timescale, not against the
shared clock, and the correction it carries is not logged in a form that
gives the error against the truth (tracking.log's offsets are the residuals
of each update). With `noselect` the timescale stays the raw shared clock,
statistics.log still gets a row per accumulated sample, and tracking.log
holds only its initial unsynchronised line.

ptp4l (linuxptp 3.1.1): `-S` software timestamps, UDPv4, E2E, unicast
negotiation (`unicast_listen 1` on the master, `unicast_master_table` on the
slave), `free_running 1` on both, Sync at 16/s; per-Sync offset read by
polling the slave's management socket with one long-lived `pmc -u -b 0`
at ~100 Hz. By default it asks `GET TIME_STATUS_NP`, whose `master_offset`
is the same clock->master_offset value that CURRENT_DATA_SET reports as
offsetFromMaster, plus `ingress_time` (the Sync's receive stamp), which
tells distinct Syncs apart exactly; `query="CURRENT_DATA_SET"` polls
offsetFromMaster instead and treats every change of (offset, path delay)
as a new Sync.

On clocks as deployed (docs/testbed.md "Clocks as deployed") each node has
its own clock in a state file. Given `clock_states` ({node: state file}),
every daemon runs under the discipline shim in its wall-only mode
(LD_PRELOAD, CHRONOLINK_CLOCK_STATE_WALL_ONLY=1, without CAP_SYS_TIME): its
CLOCK_REALTIME reads and its packets' software timestamps are its node's
clock, and it can steer nothing. The true offset is then no longer 0 but
the two state files' difference at the sample's instant (PairTruth), read
after the run. chronyd stamps its log rows with the client's whole second
only: a row's instant is placed within its second by its rank among that
second's rows (at minpoll -7 they are 1/128 s apart), and
truth_motion says how far the truth moved within such a second, and so
what a row placed one spacing wrong could cost.
ptp4l's samples carry their Sync's receive stamp, which is exact.

Every daemon gets its own config and run directory under the directory you
give (pid files, sockets, logs all inside it; nothing under /var/run or
/etc) and is started with Testbed.popen, so the test bed's cleanup stops it.

Module use:
    with Testbed("clb", 2, "direct") as tb:
        c = ChronyBaseline(tb, server=1, client=2, workdir="/tmp/run/chrony").start()
        p = PtpBaseline(tb, master=1, slave=2, workdir="/tmp/run/ptp").start()
        time.sleep(30)
        c.stop(); p.stop()
        print(summarize_abs_us(c.offsets_ns()), summarize_abs_us(p.offsets_ns()))

CLI: sudo python3 bench/baselines.py --topology direct --seconds 30
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import math
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from fractions import Fraction
from typing import Any, Sequence

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(_HERE), "tools", "testbed"))
import testbed as _tbmod  # noqa: E402
from clock_trajectory import NodeClockState  # noqa: E402
from testbed import Testbed, TestbedError  # noqa: E402,F401

__all__ = ["ChronyBaseline", "PtpBaseline", "BaselineError", "PairTruth", "percentile", "summarize_abs_us",
           "run_baselines", "parse_chrony_statistics", "proc_cpu_ticks", "cpu_percent"]

REPO = os.path.dirname(_HERE)
DEFAULT_SHIM = os.path.join(REPO, "build", "tools", "libchronolink_discipline_shim.so")
# A daemon on a node's clock may not set the machine's (the shim refuses
# what it sees; this, what it might not).
NO_SYS_TIME = ["setpriv", "--bounding-set", "-sys_time", "--inh-caps", "-sys_time"]


class BaselineError(RuntimeError):
    """A baseline daemon could not be started or produced nothing."""


# --------------------------------------------------------------------------
# statistics (shared with accuracy_bench.py)

def percentile(sorted_vals: Sequence[float], q: float) -> float:
    """q-th percentile (0..100) of an ascending sequence, linear interpolation
    between closest ranks (numpy's default 'linear' method)."""
    n = len(sorted_vals)
    if n == 0:
        return math.nan
    if n == 1:
        return float(sorted_vals[0])
    pos = (n - 1) * (q / 100.0)
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    return float(sorted_vals[lo]) + (float(sorted_vals[hi]) - float(sorted_vals[lo])) * frac


def summarize_abs_us(values_ns: Sequence[float]) -> dict:
    """samples, p50, p99, max and mean of |value|, in microseconds."""
    a = sorted(abs(float(v)) for v in values_ns)
    if not a:
        return {"samples": 0, "p50_us": math.nan, "p99_us": math.nan, "max_us": math.nan,
                "mean_us": math.nan}
    return {"samples": len(a), "p50_us": percentile(a, 50) / 1e3, "p99_us": percentile(a, 99) / 1e3,
            "max_us": a[-1] / 1e3, "mean_us": sum(a) / len(a) / 1e3}


# --------------------------------------------------------------------------
# CPU of a process (shared with accuracy_bench.py)

CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu_ticks(pid: int) -> int | None:
    """utime + stime (clock ticks) of pid from /proc/<pid>/stat."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            s = f.read()
    except OSError:
        return None
    fields = s[s.rfind(b")") + 2:].split()
    # fields[0] is field 3 (state); utime is field 14, stime field 15
    return int(fields[11]) + int(fields[12])


def cpu_percent(ticks0: int | None, ticks1: int | None, wall_s: float) -> float | None:
    """% of one core between two proc_cpu_ticks readings wall_s apart."""
    if ticks0 is None or ticks1 is None or not wall_s > 0:
        return None
    return (ticks1 - ticks0) / CLK_TCK / wall_s * 100.0


# --------------------------------------------------------------------------
# helpers

def _fresh_dir(path: str) -> str:
    path = os.path.abspath(path)
    if os.path.isdir(path):
        shutil.rmtree(path)
    os.makedirs(path, mode=0o700)
    os.chmod(path, 0o700)
    return path


def _tail(path: str, n: int = 600) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read().decode(errors="replace").strip()
    except OSError:
        return ""


def _check_alive(p: subprocess.Popen, what: str, log: str) -> None:
    if p.poll() is not None:
        raise BaselineError(f"{what} exited with status {p.returncode}: {_tail(log) or '(no output)'}")


class PairTruth:
    """The true offset between a server's and a client's CLOCK_REALTIME:
    server minus client at the instant the client's clock reads v. A clock
    is an exact trajectory (at, true_time: clock_trajectory.Trajectory), or
    None for the kernel clock every namespace shares (then the truth is 0)."""

    def __init__(self, server: Any = None, client: Any = None) -> None:
        self.server, self.client = server, client

    def server_minus_client_ns(self, client_reading_ns: int) -> Fraction:
        v = Fraction(client_reading_ns)
        t = self.client.true_time(v) if self.client is not None else v
        return (self.server.at(t) if self.server is not None else t) - v

    def motion_within_second_ns(self, second_start_ns: int) -> float:
        """How far the truth moves over one second of the client's clock."""
        a = self.server_minus_client_ns(second_start_ns)
        return float(abs(self.server_minus_client_ns(second_start_ns + 1_000_000_000) - a))


class _Baseline:
    name = "baseline"
    # the daemons' nodes as (server, client) attribute names, for the truth
    pair = ("server", "client")

    def __init__(self, tb: Testbed, workdir: str, clock_states: dict[int, str] | None = None,
                 shim: str = DEFAULT_SHIM) -> None:
        self.tb = tb
        self.workdir = os.path.abspath(workdir)
        self.clock_states = {int(n): p for n, p in (clock_states or {}).items()}
        self.shim = shim
        self._truth: PairTruth | None = None
        self.procs: list[subprocess.Popen] = []
        # the daemons by role ("server", "client", ...) for CPU accounting;
        # helpers of the bench itself (the pmc poller) are not in here
        self.roles: dict[str, subprocess.Popen] = {}
        self._files: list[Any] = []
        self.started_ns: int | None = None
        self.stopped_ns: int | None = None

    def _check_shim(self) -> None:
        if self.clock_states and not os.path.exists(self.shim):
            raise BaselineError(f"the discipline shim {self.shim} is not built")

    def on_node_clock(self, node: Any, argv: list[str]) -> tuple[list[str], dict | None]:
        """argv and environment that run a daemon on node's own clock (the
        shim, wall-only, no CAP_SYS_TIME); as they are on the kernel's."""
        state = self.clock_states.get(node.index)
        if not state:
            return argv, None
        env = dict(os.environ, LD_PRELOAD=self.shim, CHRONOLINK_CLOCK_STATE=state,
                   CHRONOLINK_CLOCK_STATE_WALL_ONLY="1")
        return NO_SYS_TIME + argv, env

    def _spawn(self, node: Any, argv: list[str], log: str, role: str | None = None) -> subprocess.Popen:
        f = open(log, "wb")
        self._files.append(f)
        argv, env = self.on_node_clock(node, argv)
        p = self.tb.popen(node, argv, stdout=f, stderr=subprocess.STDOUT, env=env)
        self.procs.append(p)
        if role:
            self.roles[role] = p
        return p

    def cpu_ticks(self) -> dict[str, int | None]:
        """utime + stime (ticks) of each daemon now, by role; None once gone."""
        return {role: (proc_cpu_ticks(p.pid) if p.poll() is None else None)
                for role, p in self.roles.items()}

    def truth(self) -> PairTruth:
        """The true offsets this run's daemons measured: the state files as
        the run left them (a discipline writes into them as it goes), read
        once the daemons have stopped; the kernel clock for a node without."""
        if self._truth is None or self.stopped_ns is None:
            server, client = (getattr(self, name).index for name in self.pair)
            clocks = [NodeClockState.load(self.clock_states[n]).realtime() if n in self.clock_states else None
                      for n in (server, client)]
            self._truth = PairTruth(*clocks)
        return self._truth

    def _stop_procs(self) -> None:
        self.tb.terminate(self.procs, timeout=5.0)
        for f in self._files:
            with contextlib.suppress(Exception):
                f.close()
        self._files = []
        if self.stopped_ns is None:
            self.stopped_ns = time.time_ns()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


# --------------------------------------------------------------------------
# chronyd

_CHRONY_ROW = re.compile(
    r"^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d) (\S+)\s+(\S)\s+(\d+) ([01]{3}) ([01]{3}) ([01]{4})\s+"
    r"(-?\d+)\s+(-?\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+([0-9A-Fa-f]+)\s+"
    r"(\S+)\s+(\S)\s+(\S)\s*$")


def _chrony_log_rows(path: str, row: re.Pattern, server: str | None):
    """(groups, UTC seconds) of every row of a chronyd log matching `row`
    (first groups: date, time, address), for `server` if given; nothing
    when the file cannot be read."""
    try:
        f = open(path)
    except OSError:
        return
    with f:
        for line in f:
            m = row.match(line.rstrip("\n"))
            if not m:
                continue
            g = m.groups()
            if server and g[2] != server:
                continue
            ts = _dt.datetime.strptime(f"{g[0]} {g[1]}", "%Y-%m-%d %H:%M:%S").replace(
                tzinfo=_dt.timezone.utc).timestamp()
            yield g, ts


def place_within_seconds(rows: list[dict]) -> list[dict]:
    """Gives each row (in file order, stamped t_s with a whole second of the
    client's clock) t_ns: its instant on that clock, placed by its rank among
    the rows of its second. A full second's n rows sit at the middles of its
    n equal parts; a second with fewer rows than the usual (the median) at
    the run's start or end holds the usual spacing, counted from the
    second's end or start. Within a second chronyd logs in time order, and
    at a fixed poll (minpoll -7: 1/128 s) the error is about one spacing."""
    groups: list[list[dict]] = []
    for r in rows:
        if groups and groups[-1][0]["t_s"] == r["t_s"]:
            groups[-1].append(r)
        else:
            groups.append([r])
    if not groups:
        return rows
    usual = sorted(len(g) for g in groups)[len(groups) // 2]
    for i, g in enumerate(groups):
        n = len(g)
        second_ns = int(round(g[0]["t_s"])) * 1_000_000_000
        spacing, first = 1_000_000_000 // n, 0
        if n < usual and i in (0, len(groups) - 1) and len(groups) > 1:
            spacing = 1_000_000_000 // usual
            first = 1_000_000_000 - n * spacing if i == 0 else 0
        for k, r in enumerate(g):
            r["t_ns"] = second_ns + first + k * spacing + spacing // 2
    return rows


def parse_chrony_measurements(path: str, server: str | None = None) -> list[dict]:
    """Rows of chronyd's measurements.log (rawmeasurements) as dicts.
    offset_ns: server clock minus client clock (chrony's sign: positive
    means the local clock is behind); t_s: the row's second on the
    client's clock (UTC, as logged); t_ns: its instant within that second
    (place_within_seconds)."""
    return place_within_seconds([{
        "t_s": ts, "server": g[2], "leap": g[3], "stratum": int(g[4]),
        "tests123": g[5], "tests567": g[6], "testsABCD": g[7],
        "offset_ns": float(g[11]) * 1e9, "delay_ns": float(g[12]) * 1e9,
        "mode": g[17], "tx_src": g[18], "rx_src": g[19],
        "valid": g[5] == "111" and g[6] == "111",
        "interleaved": g[17].endswith("I"),
    } for g, ts in _chrony_log_rows(path, _CHRONY_ROW, server)])


# statistics.log: date, time, address, std dev'n, est offset, offset sd, diff
# freq, est skew, stress, Ns, Bs, Nr, and (chrony >= 2.2) Asym
_CHRONY_STATS_ROW = re.compile(
    r"^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d) (\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+"
    r"(\S+)\s+(\d+)\s+(\d+)\s+(\d+)(?:\s+(-?[\d.]+))?\s*$")


def parse_chrony_statistics(path: str, server: str | None = None) -> list[dict]:
    """Rows of chronyd's statistics.log as dicts: chronyd's own estimate of
    the source after its regression filter, one row per accumulated sample.
    offset_ns: "Est offset" negated, so that its sign is measurements.log's
    (server minus client): chrony.conf(5) says a positive Est offset means
    the local clock is fast, and on the test bed's exact truth the logged
    value is indeed the negative of the true server-minus-client offset;
    offset_sd_ns: its estimated standard deviation; stddev_ns: the
    samples' scatter about the regression line; t_s: the row's second on
    the client's clock (UTC), t_ns its instant (place_within_seconds)."""
    out = []
    for g, ts in _chrony_log_rows(path, _CHRONY_STATS_ROW, server):
        try:
            nums = [float(x) for x in g[3:9]]
        except ValueError:
            continue  # the header's column names, a torn line
        out.append({
            "t_s": ts, "server": g[2], "stddev_ns": nums[0] * 1e9, "offset_ns": -nums[1] * 1e9,
            "offset_sd_ns": nums[2] * 1e9, "diff_freq_ppm": nums[3] * 1e6, "skew_ppm": nums[4] * 1e6,
            "stress": nums[5], "n_samples": int(g[9]), "best_start": int(g[10]), "runs": int(g[11]),
            "asym": float(g[12]) if g[12] is not None else None,
        })
    return place_within_seconds(out)


def _in_span_1s(t_s: float, since_ns: int | None, until_ns: int | None) -> bool:
    """A row stamped with a whole UTC second is kept if that second overlaps the span."""
    t_ns = int(t_s * 1e9)
    if since_ns is not None and t_ns + 1_000_000_000 <= since_ns:
        return False
    if until_ns is not None and t_ns > until_ns:
        return False
    return True


class ChronyBaseline(_Baseline):
    """chronyd server in one node, chronyd client (noselect, -x) in another."""

    name = "chronyd"

    def __init__(self, tb: Testbed, server: Any, client: Any, workdir: str, *, xleave: bool = True,
                 minpoll: int = -7, maxpoll: int = -7, binary: str = "chronyd", ntp_port: int = 123,
                 clock_states: dict[int, str] | None = None, shim: str = DEFAULT_SHIM) -> None:
        super().__init__(tb, workdir, clock_states, shim)
        self.server = tb.node(server)
        self.client = tb.node(client)
        # not 123 where a clock discipline's own server already listens there
        self.ntp_port = ntp_port
        self.xleave = xleave
        self.minpoll, self.maxpoll = minpoll, maxpoll
        self.binary = binary
        self.sdir = os.path.join(self.workdir, f"chronyd-server-n{self.server.index}")
        self.cdir = os.path.join(self.workdir, f"chronyd-client-n{self.client.index}")
        self.measurements_log = os.path.join(self.cdir, "log", "measurements.log")
        self.statistics_log = os.path.join(self.cdir, "log", "statistics.log")
        self.tracking_log = os.path.join(self.cdir, "log", "tracking.log")

    @property
    def label(self) -> str:
        return "chronyd xleave" if self.xleave else "chronyd basic"

    def _write_configs(self) -> tuple[str, str]:
        _fresh_dir(self.sdir)
        _fresh_dir(self.cdir)
        os.makedirs(os.path.join(self.cdir, "log"), mode=0o700)
        common = ("cmdport 0\n"              # no UDP command port
                  "bindcmdaddress /\n")       # no Unix command socket (default is under /run)
        sconf = os.path.join(self.sdir, "chrony.conf")
        with open(sconf, "w") as f:
            f.write("# chronolink baseline: chronyd server (never touches the clock: -x)\n"
                    f"allow {_tbmod.SUBNET}\n"
                    "local stratum 1\n"        # serve time although unsynchronised
                    f"port {self.ntp_port}\n"
                    f"pidfile {self.sdir}/chronyd.pid\n" + common)
        cconf = os.path.join(self.cdir, "chrony.conf")
        opts = f"minpoll {self.minpoll} maxpoll {self.maxpoll}{' xleave' if self.xleave else ''} noselect"
        with open(cconf, "w") as f:
            f.write("# chronolink baseline: chronyd client, raw per-sample offsets and the\n"
                    "# source's filtered estimate (noselect: see bench/baselines.py)\n"
                    f"server {self.server.address} port {self.ntp_port} {opts}\n"
                    "port 0\n"                 # client only, no NTP server socket
                    f"pidfile {self.cdir}/chronyd.pid\n"
                    f"logdir {self.cdir}/log\n"
                    "log rawmeasurements statistics tracking\n" + common)
        return sconf, cconf

    def start(self, ready_timeout: float = 10.0) -> "ChronyBaseline":
        if shutil.which(self.binary) is None:
            raise BaselineError(f"{self.binary} not found")
        self._check_shim()
        sconf, cconf = self._write_configs()
        slog = os.path.join(self.sdir, "chronyd.out")
        clog = os.path.join(self.cdir, "chronyd.out")
        base = [self.binary, "-x", "-d", "-u", "root"]
        try:
            sp = self._spawn(self.server, base + ["-f", sconf], slog, "server")
            cp = self._spawn(self.client, base + ["-f", cconf], clog, "client")
            self.started_ns = time.time_ns()
            deadline = time.monotonic() + ready_timeout
            while True:
                _check_alive(sp, "chronyd server", slog)
                _check_alive(cp, "chronyd client", clog)
                if parse_chrony_measurements(self.measurements_log, self.server.address):
                    break
                if time.monotonic() > deadline:
                    raise BaselineError(f"chronyd client logged no measurement in {ready_timeout:.0f}s "
                                        f"(server: {_tail(slog, 200)!r}; client: {_tail(clog, 200)!r})")
                time.sleep(0.1)
        except BaseException:
            self._stop_procs()
            raise
        return self

    def stop(self) -> None:
        self._stop_procs()

    def samples(self, *, valid_only: bool = True, interleaved_only: bool = False,
                since_ns: int | None = None, until_ns: int | None = None) -> list[dict]:
        rows = parse_chrony_measurements(self.measurements_log, self.server.address)
        out = []
        for r in rows:
            if valid_only and not r["valid"]:
                continue
            if interleaved_only and not r["interleaved"]:
                continue
            # rows carry whole seconds: keep a row if its second overlaps the span
            if not _in_span_1s(r["t_s"], since_ns, until_ns):
                continue
            out.append(r)
        return out

    def offsets_ns(self, **kw: Any) -> list[float]:
        """Per-sample offsets (ns) from the server, as chronyd measured them."""
        return [r["offset_ns"] for r in self.samples(**kw)]

    def errors_of(self, rows: list[dict]) -> list[float]:
        """Each row's offset (raw or filtered: both server minus client)
        minus the true offset at its instant (ns)."""
        truth = self.truth()
        return [r["offset_ns"] - float(truth.server_minus_client_ns(r["t_ns"])) for r in rows]

    def errors_ns(self, **kw: Any) -> list[float]:
        """Per-sample offset minus the true offset at the sample (ns)."""
        return self.errors_of(self.samples(**kw))

    def truth_motion(self, **kw: Any) -> dict:
        """How far the truth moved within the logged seconds of the span
        (median and most, ns), and what placing a row wrong could cost in
        the worst of them: about one row's spacing, the second's motion ÷
        its rows (placement_ns)."""
        truth = self.truth()
        rows: dict[int, int] = {}
        for r in self.samples(valid_only=False, **kw):
            sec = int(round(r["t_s"]))
            rows[sec] = rows.get(sec, 0) + 1
        moves = sorted((truth.motion_within_second_ns(sec * 1_000_000_000), n) for sec, n in rows.items())
        if not moves:
            return {"median_ns": 0.0, "max_ns": 0.0, "placement_ns": 0.0}
        return {"median_ns": moves[len(moves) // 2][0], "max_ns": moves[-1][0],
                "placement_ns": max(m / n for m, n in moves)}

    def filtered_samples(self, *, since_ns: int | None = None, until_ns: int | None = None) -> list[dict]:
        """chronyd's own estimates of the server (statistics.log), one per
        accumulated sample, whose second overlaps the span."""
        return [r for r in parse_chrony_statistics(self.statistics_log, self.server.address)
                if _in_span_1s(r["t_s"], since_ns, until_ns)]

    def filtered_offsets_ns(self, **kw: Any) -> list[float]:
        """chronyd's filtered estimate of the offset (ns) at each update."""
        return [r["offset_ns"] for r in self.filtered_samples(**kw)]

    def filtered_errors_ns(self, **kw: Any) -> list[float]:
        """chronyd's filtered estimate minus the true offset at its instant."""
        return self.errors_of(self.filtered_samples(**kw))


# --------------------------------------------------------------------------
# ptp4l

# a response is complete once its last field and the newline after it are in
_RESP_RE = {
    "TIME_STATUS_NP": re.compile(
        r"RESPONSE MANAGEMENT TIME_STATUS_NP.*?master_offset\s+(-?\d+)\s+ingress_time\s+(-?\d+)"
        r".*?gmPresent\s+(\w+)\s+gmIdentity\s+\S+\n", re.S),
    "CURRENT_DATA_SET": re.compile(
        r"RESPONSE MANAGEMENT CURRENT_DATA_SET.*?offsetFromMaster\s+(-?[\d.]+)\s+"
        r"meanPathDelay\s+(-?[\d.]+)\n", re.S),
}
_UDS_MAX = 100  # sockaddr_un.sun_path is 108 bytes; keep a margin


class PtpBaseline(_Baseline):
    """ptp4l master in one node, ptp4l slave (free_running) in another, pmc poller."""

    name = "ptp4l"
    label = "ptp4l per-Sync"
    pair = ("master", "slave")

    def __init__(self, tb: Testbed, master: Any, slave: Any, workdir: str, *, log_sync_interval: int = -4,
                 poll_hz: float = 100.0, query: str = "TIME_STATUS_NP", domain: int = 0,
                 binary: str = "ptp4l", pmc_binary: str = "pmc", clock_states: dict[int, str] | None = None,
                 shim: str = DEFAULT_SHIM) -> None:
        super().__init__(tb, workdir, clock_states, shim)
        if self.clock_states and query != "TIME_STATUS_NP":
            raise ValueError("on node clocks only TIME_STATUS_NP gives each Sync's instant")
        self.master = tb.node(master)
        self.slave = tb.node(slave)
        self.log_sync_interval = log_sync_interval
        self.poll_hz = poll_hz
        if query not in ("TIME_STATUS_NP", "CURRENT_DATA_SET"):
            raise ValueError("query must be TIME_STATUS_NP or CURRENT_DATA_SET")
        self.query = query
        self.domain = domain
        self.binary, self.pmc_binary = binary, pmc_binary
        self.mdir = os.path.join(self.workdir, f"ptp4l-master-n{self.master.index}")
        self.sdir = os.path.join(self.workdir, f"ptp4l-slave-n{self.slave.index}")
        self._sockdir: str | None = None
        self._tmp_sockdir = False
        self._pmc: subprocess.Popen | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._samples: list[dict] = []
        self.poll_stats = {"requests": 0, "responses": 0, "timeouts": 0}
        self.poll_error: str | None = None

    def _socket_paths(self) -> dict[str, str]:
        # sockets live in the run dir unless its path is too long for sun_path;
        # then in a private mkdtemp dir under /tmp (still unique per instance)
        d = self.workdir
        if len(os.path.join(d, "ptp4l-slave-nNNN.uds")) > _UDS_MAX:
            d = tempfile.mkdtemp(prefix="clptp-")
            self._tmp_sockdir = True
        self._sockdir = d
        return {"master": os.path.join(d, f"ptp4l-master-n{self.master.index}.uds"),
                "slave": os.path.join(d, f"ptp4l-slave-n{self.slave.index}.uds"),
                "pmc": os.path.join(d, f"pmc-n{self.slave.index}.uds")}

    def _write_configs(self, socks: dict[str, str]) -> tuple[str, str]:
        _fresh_dir(self.mdir)
        _fresh_dir(self.sdir)
        common = (
            "time_stamping           software\n"
            "network_transport       UDPv4\n"
            "delay_mechanism         E2E\n"
            "free_running            1\n"      # never adjust the (shared) system clock
            "inhibit_multicast_service 1\n"    # unicast only, on a direct link too
            f"domainNumber            {self.domain}\n"
            f"logSyncInterval         {self.log_sync_interval}\n"
            f"logMinDelayReqInterval  {self.log_sync_interval}\n"
            "logAnnounceInterval     -2\n"
            "tx_timestamp_timeout    20\n"
            "summary_interval        0\n"
            "use_syslog              0\n"
            "verbose                 1\n")
        mconf = os.path.join(self.mdir, "ptp4l.conf")
        with open(mconf, "w") as f:
            f.write("# chronolink baseline: ptp4l unicast master\n[global]\n" + common +
                    "priority1               1\n"
                    f"uds_address             {socks['master']}\n"
                    f"\n[{self.master.ifname}]\n"
                    "unicast_listen          1\n"
                    "masterOnly              1\n")
        sconf = os.path.join(self.sdir, "ptp4l.conf")
        with open(sconf, "w") as f:
            f.write("# chronolink baseline: ptp4l unicast slave (free running)\n[global]\n" + common +
                    "slaveOnly               1\n"
                    f"uds_address             {socks['slave']}\n"
                    "\n[unicast_master_table]\n"
                    "table_id                1\n"
                    "logQueryInterval        0\n"
                    f"UDPv4                   {self.master.address}\n"
                    f"\n[{self.slave.ifname}]\n"
                    "unicast_master_table    1\n")
        return mconf, sconf

    def start(self, ready_timeout: float = 15.0) -> "PtpBaseline":
        for b in (self.binary, self.pmc_binary):
            if shutil.which(b) is None:
                raise BaselineError(f"{b} not found")
        self._check_shim()
        socks = self._socket_paths()
        mconf, sconf = self._write_configs(socks)
        mlog = os.path.join(self.mdir, "ptp4l.out")
        slog = os.path.join(self.sdir, "ptp4l.out")
        try:
            mp = self._spawn(self.master, [self.binary, "-f", mconf, "-i", self.master.ifname, "-S"], mlog,
                             "master")
            sp = self._spawn(self.slave, [self.binary, "-f", sconf, "-i", self.slave.ifname, "-S"], slog,
                             "slave")
            self.started_ns = time.time_ns()
            deadline = time.monotonic() + 5.0
            while not os.path.exists(socks["slave"]):
                _check_alive(mp, "ptp4l master", mlog)
                _check_alive(sp, "ptp4l slave", slog)
                if time.monotonic() > deadline:
                    raise BaselineError(f"ptp4l slave made no management socket: {_tail(slog, 300)}")
                time.sleep(0.05)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(socks["pmc"])
            self._pmc = self.tb.popen(
                self.slave, [self.pmc_binary, "-u", "-b", "0", "-d", str(self.domain),
                             "-i", socks["pmc"], "-s", socks["slave"]],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            self.procs.append(self._pmc)
            self._thread = threading.Thread(target=self._poll_loop, name="ptp-pmc-poll", daemon=True)
            self._thread.start()
            deadline = time.monotonic() + ready_timeout
            while True:
                _check_alive(mp, "ptp4l master", mlog)
                _check_alive(sp, "ptp4l slave", slog)
                if self.poll_error:
                    raise BaselineError(f"pmc poller: {self.poll_error}")
                with self._lock:
                    if self._samples:
                        break
                if time.monotonic() > deadline:
                    raise BaselineError(f"ptp4l slave reported no Sync offset in {ready_timeout:.0f}s "
                                        f"(slave log: {_tail(slog, 300)!r})")
                time.sleep(0.1)
        except BaseException:
            self.stop()
            raise
        return self

    def _poll_loop(self) -> None:
        p = self._pmc
        assert p is not None and p.stdin is not None and p.stdout is not None
        fd = p.stdout.fileno()
        req = f"GET {self.query}\n".encode()
        rx = _RESP_RE[self.query]
        period = 1.0 / self.poll_hz
        buf = ""
        last_key: Any = None
        next_t = time.monotonic()
        try:
            while not self._stop.is_set():
                # one request in flight at a time: pmc reads stdin with fgets
                # after poll(), so two lines arriving together would leave the
                # second stuck in its stdio buffer
                p.stdin.write(req)
                p.stdin.flush()
                self.poll_stats["requests"] += 1
                got = False
                deadline = time.monotonic() + 0.5
                while not got and time.monotonic() < deadline and not self._stop.is_set():
                    r, _, _ = select.select([fd], [], [], 0.05)
                    if not r:
                        continue
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        raise BaselineError("pmc exited")
                    buf += chunk.decode(errors="replace")
                    while True:
                        m = rx.search(buf)
                        if not m:
                            break
                        buf = buf[m.end():]
                        got = True
                        now = time.time_ns()
                        if self.query == "TIME_STATUS_NP":
                            off, ingress = int(m.group(1)), int(m.group(2))
                            if ingress == 0 or m.group(3) != "true":
                                continue  # no master yet
                            key: Any = ingress
                            sample = {"t_ns": ingress, "offset_ns": off, "polled_ns": now}
                        else:
                            off, delay = float(m.group(1)), float(m.group(2))
                            if off == 0.0 and delay == 0.0:
                                continue
                            key = (off, delay)
                            sample = {"t_ns": now, "offset_ns": off, "delay_ns": delay,
                                      "polled_ns": now}
                        if key != last_key:
                            last_key = key
                            with self._lock:
                                self._samples.append(sample)
                    if len(buf) > 65536:
                        buf = buf[-4096:]
                if got:
                    self.poll_stats["responses"] += 1
                else:
                    self.poll_stats["timeouts"] += 1
                next_t += period
                delay_s = next_t - time.monotonic()
                if delay_s > 0:
                    self._stop.wait(delay_s)
                else:
                    next_t = time.monotonic()
        except (OSError, ValueError, BaselineError) as e:
            if not self._stop.is_set():
                self.poll_error = str(e) or type(e).__name__

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        if self._pmc is not None:
            with contextlib.suppress(Exception):
                self._pmc.stdin.close()
        self._stop_procs()
        if self._pmc is not None:
            with contextlib.suppress(Exception):
                self._pmc.stdout.close()
        if self._tmp_sockdir and self._sockdir:
            shutil.rmtree(self._sockdir, ignore_errors=True)
            self._tmp_sockdir = False

    def samples(self, *, since_ns: int | None = None, until_ns: int | None = None) -> list[dict]:
        with self._lock:
            rows = list(self._samples)
        return [r for r in rows if (since_ns is None or r["t_ns"] >= since_ns)
                and (until_ns is None or r["t_ns"] <= until_ns)]

    def offsets_ns(self, **kw: Any) -> list[float]:
        """offsetFromMaster (ns, slave minus master) of every distinct Sync seen."""
        return [r["offset_ns"] for r in self.samples(**kw)]

    def errors_of(self, rows: list[dict]) -> list[float]:
        """offsetFromMaster minus the true slave-minus-master offset at the
        Sync's receive stamp (the slave's clock; with CURRENT_DATA_SET, on
        the kernel clock only, the poll's instant)."""
        truth = self.truth()
        return [r["offset_ns"] + float(truth.server_minus_client_ns(r["t_ns"])) for r in rows]

    def errors_ns(self, **kw: Any) -> list[float]:
        return self.errors_of(self.samples(**kw))


# --------------------------------------------------------------------------
# self-test (no root, no daemons): the parsing, the configs and the pmc poller

# chronyd 4.3's measurements.log: its header, then rows in the layout of the
# example in chrony.conf(5) ("log measurements"), one per received packet.
_CHRONY_LOG_SAMPLE = (
    "=" * 94 + "\n"
    "   Date (UTC) Time     IP Address   L St 123 567 ABCD  LP RP Score    Offset  Peer del. Peer disp."
    "  Root del. Root disp. Refid     MTxRx\n"
    + "=" * 94 + "\n"
    "2026-11-25 08:00:00 10.77.1.2       N  1 111 111 1111  -7 -7 1.0 -4.966e-06  2.296e-05  1.577e-05"
    "  1.615e-01  7.446e-03 CB00717B 4I K K\n"
    "2026-11-25 08:00:01 10.77.1.2       N  1 111 111 1111  -7 -7 1.0  1.250e-06  2.100e-05  1.577e-05"
    "  1.615e-01  7.446e-03 CB00717B 4B K K\n"
    "2026-11-25 08:00:01 10.77.1.2       N  1 111 101 1111  -7 -7 1.0  9.000e-03  2.100e-05  1.577e-05"
    "  1.615e-01  7.446e-03 CB00717B 4I K K\n"
    "2026-11-25 08:00:02 10.77.9.9       N  1 111 111 1111  -7 -7 1.0  3.000e-06  2.100e-05  1.577e-05"
    "  1.615e-01  7.446e-03 CB00717B 4I K K\n"
    "2026-11-25 08:00:03 10.77.1.2       N  1 111 111 1111  -7 -7 1.0  2.000e-07  2.000e-05  1.577e-05"
    "  1.615e-01  7.446e-03 CB00717B 4I K K\n"
    "2026-11-25 08:00:04 10.77.1.2       N  1 111 111 1111  -7 -7 1.0 -2.0e-07\n")  # torn last line

# chronyd 4.3's statistics.log (captured on the test bed, trimmed): header,
# rows, a row of another source, a torn last line.
_CHRONY_STATS_SAMPLE = (
    "=" * 116 + "\n"
    "   Date (UTC) Time     IP Address    Std dev'n Est offset  Offset sd  Diff freq   Est skew  Stress"
    "  Ns  Bs  Nr  Asym\n"
    + "=" * 116 + "\n"
    "2026-11-26 04:21:10 10.77.0.1        2.446e-08  6.849e-09  7.776e-09 -2.471e-08  9.746e-08 4.6e-02"
    "  33   0  20 -0.38\n"
    "2026-11-26 04:21:10 10.77.0.1        2.392e-08 -8.102e-08  7.463e-09 -2.007e-08  9.110e-08 4.8e-02"
    "  34   0  20 -0.38\n"
    "2026-11-26 04:21:11 10.77.9.9        2.392e-08  5.000e-06  7.463e-09 -2.007e-08  9.110e-08 4.8e-02"
    "  34   0  20  0.00\n"
    "2026-11-26 04:21:12 10.77.0.1        2.381e-08  7.678e-09  7.467e-09 -2.066e-08  8.744e-08 6.5e-03"
    "  35   2  21\n"                       # no Asym column (older chronyd)
    "2026-11-26 04:21:13 10.77.0.1        2.381e-08  7.6\n")  # torn last line

# What pmc 3.1.1 prints for one request (captured from a free-running
# ptp4l), with the fields to fill in.
_PMC_TIME_STATUS = (
    "sending: GET TIME_STATUS_NP\n"
    "\t000000.fffe.000000-0 seq {seq} RESPONSE MANAGEMENT TIME_STATUS_NP \n"
    "\t\tmaster_offset              {offset}\n"
    "\t\tingress_time               {ingress}\n"
    "\t\tcumulativeScaledRateOffset +0.000000000\n"
    "\t\tscaledLastGmPhaseChange    0\n"
    "\t\tgmTimeBaseIndicator        0\n"
    "\t\tlastGmPhaseChange          0x0000'0000000000000000.0000\n"
    "\t\tgmPresent                  {gm}\n"
    "\t\tgmIdentity                 000000.fffe.000000\n")
_PMC_CURRENT_DATA_SET = (
    "sending: GET CURRENT_DATA_SET\n"
    "\t000000.fffe.000000-0 seq {seq} RESPONSE MANAGEMENT CURRENT_DATA_SET \n"
    "\t\tstepsRemoved     1\n"
    "\t\toffsetFromMaster {offset}\n"
    "\t\tmeanPathDelay    {delay}\n")

# A stand-in for `pmc -u -b 0`: answers each request line with the next
# canned response, written in two pieces (the poller must wait for the
# whole response), then stays silent (the poller must time out, not hang).
_FAKE_PMC = """
import json, sys, time
answers = json.loads(sys.argv[1])
for line in sys.stdin:
    if not answers:
        continue
    a = answers.pop(0)
    cut = len(a) - 3  # inside the last field's value
    sys.stdout.write(a[:cut]); sys.stdout.flush(); time.sleep(0.02)
    sys.stdout.write(a[cut:]); sys.stdout.flush()
"""


class _SelftestBed:
    """Just enough of Testbed for the baselines' own code: nodes, popen
    without a namespace, terminate."""

    def node(self, n: Any) -> Any:
        import types
        i = int(n)
        return types.SimpleNamespace(index=i, address=f"10.77.{i}.2", ifname="veth0")

    def popen(self, node: Any, argv: list[str], **kw: Any) -> subprocess.Popen:
        return subprocess.Popen(argv, **kw)

    def terminate(self, procs: list[subprocess.Popen], timeout: float = 5.0) -> None:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=timeout)


def _poll_with_fake_pmc(tb: Any, workdir: str, query: str, answers: list[str],
                        until: Any, script: str = _FAKE_PMC) -> "PtpBaseline":
    """Runs PtpBaseline's real poll loop against `script` (a stand-in for
    pmc) until `until(p)` holds (at most 10 s), then stops it."""
    p = PtpBaseline(tb, 1, 2, workdir, poll_hz=200.0, query=query)
    p._pmc = tb.popen(None, [sys.executable, "-c", script, json.dumps(answers)],
                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    p.procs.append(p._pmc)
    p._thread = threading.Thread(target=p._poll_loop, name="selftest-pmc-poll", daemon=True)
    p._thread.start()
    deadline = time.monotonic() + 10.0
    while not until(p) and time.monotonic() < deadline:
        time.sleep(0.02)
    p.stop()
    return p


class SelfTestChecks:
    """The bench tools' self-tests: each check prints FAIL (always) or ok
    (when verbose) and counts the failures; result() prints the verdict and
    gives the exit status."""

    def __init__(self, verbose: bool = True) -> None:
        self.verbose = verbose
        self.fails = 0

    def __call__(self, cond: bool, what: str) -> None:
        if not cond:
            self.fails += 1
            print(f"FAIL: {what}")
        elif self.verbose:
            print(f"ok:   {what}")

    def result(self) -> int:
        print(f"selftest: {'PASS' if not self.fails else f'{self.fails} FAILED'}")
        return 0 if not self.fails else 1


def selftest(verbose: bool = True) -> int:
    check = SelfTestChecks(verbose)

    # statistics
    v = list(range(1, 101))
    check(percentile(v, 50) == 50.5 and abs(percentile(v, 99) - 99.01) < 1e-9, "p50/p99 of 1..100")
    check(math.isnan(percentile([], 50)) and percentile([4.5], 1) == 4.5, "percentile of 0 and 1 values")
    s = summarize_abs_us([-3000, 1000, -2000, 6000])
    check(s == {"samples": 4, "p50_us": 2.5, "p99_us": percentile([1000, 2000, 3000, 6000], 99) / 1e3,
                "max_us": 6.0, "mean_us": 3.0}, f"summarize_abs_us takes |x| in us: {s}")
    check(summarize_abs_us([])["samples"] == 0 and math.isnan(summarize_abs_us([])["p99_us"]),
          "summarize_abs_us of nothing")

    tb = _SelftestBed()
    tmpd = tempfile.mkdtemp(prefix="clbaselines-selftest-")
    try:
        # chronyd: measurements.log rows
        log = os.path.join(tmpd, "measurements.log")
        with open(log, "w") as f:
            f.write(_CHRONY_LOG_SAMPLE)
        rows = parse_chrony_measurements(log)
        check(len(rows) == 5, f"5 rows, header and torn line ignored ({len(rows)})")
        r0 = rows[0]
        check(abs(r0["offset_ns"] - -4966.0) < 1e-6 and abs(r0["delay_ns"] - 22960.0) < 1e-6,
              f"offset and delay in ns ({r0['offset_ns']}, {r0['delay_ns']})")
        check(r0["t_s"] == _dt.datetime(2026, 11, 25, 8, 0, 0, tzinfo=_dt.timezone.utc).timestamp(),
              "row time is UTC")
        check([r["interleaved"] for r in rows] == [True, False, True, True, True], "interleaved = mode 4I")
        check([r["valid"] for r in rows] == [True, True, False, True, True], "valid = tests 123 and 567 pass")
        check(len(parse_chrony_measurements(log, "10.77.1.2")) == 4, "rows filtered by server")
        check(parse_chrony_measurements(os.path.join(tmpd, "absent.log")) == [], "no log, no rows")

        c = ChronyBaseline(tb, 1, 2, os.path.join(tmpd, "chrony"))
        sconf, cconf = c._write_configs()
        with open(cconf) as f:
            ctext = f.read()
        with open(sconf) as f:
            stext = f.read()
        check("server 10.77.1.2 port 123 minpoll -7 maxpoll -7 xleave noselect\n" in ctext and "port 0\n" in ctext
              and "log rawmeasurements statistics tracking\n" in ctext and "cmdport 0\n" in ctext,
              "chrony client: interleaved, noselect, client only, raw measurements, no command port")
        check(f"allow {_tbmod.SUBNET}\n" in stext and "local stratum 1\n" in stext,
              "chrony server: serves the test bed unsynchronised")
        check(os.stat(c.cdir).st_mode & 0o777 == 0o700, "run directories are private (0700)")
        os.makedirs(os.path.dirname(c.measurements_log), exist_ok=True)
        shutil.copy(log, c.measurements_log)
        check([r["offset_ns"] for r in c.samples()] == [rows[0]["offset_ns"], rows[1]["offset_ns"],
                                                        rows[4]["offset_ns"]],
              "samples: valid rows of the server only")
        check(len(c.samples(interleaved_only=True)) == 2, "samples: interleaved only")
        t1 = int(rows[1]["t_s"] * 1e9)
        check(len(c.samples(since_ns=t1 + 500_000_000, until_ns=t1 + 1_500_000_000)) == 1,
              "a row's whole second overlaps the span: 08:00:01 kept, 08:00:03 not")
        check(c.offsets_ns(valid_only=False)[2] == 9e6, "offsets_ns passes the filters on")

        # chronyd: statistics.log rows (its filtered estimate)
        slog = os.path.join(tmpd, "statistics.log")
        with open(slog, "w") as f:
            f.write(_CHRONY_STATS_SAMPLE)
        srows = parse_chrony_statistics(slog)
        check(len(srows) == 4, f"statistics: 4 rows, header and torn line ignored ({len(srows)})")
        s0 = srows[0]
        check(abs(s0["offset_ns"] - -6.849) < 1e-9 and abs(s0["offset_sd_ns"] - 7.776) < 1e-9
              and abs(s0["stddev_ns"] - 24.46) < 1e-9 and abs(s0["diff_freq_ppm"] - -0.02471) < 1e-12,
              f"statistics: est offset (negated: measurements.log's sign), its sd, scatter in ns, "
              f"diff freq in ppm ({s0})")
        check(s0["n_samples"] == 33 and s0["runs"] == 20 and s0["asym"] == -0.38
              and srows[3]["asym"] is None and srows[3]["best_start"] == 2,
              "statistics: Ns, Bs, Nr; Asym optional")
        check(s0["t_s"] == _dt.datetime(2026, 11, 26, 4, 21, 10, tzinfo=_dt.timezone.utc).timestamp(),
              "statistics: row time is UTC")
        check(len(parse_chrony_statistics(slog, "10.77.0.1")) == 3, "statistics: rows filtered by server")
        check(parse_chrony_statistics(os.path.join(tmpd, "absent.log")) == [], "statistics: no log, no rows")
        c2 = ChronyBaseline(tb, 7, 2, os.path.join(tmpd, "chrony2"))  # server address 10.77.7.2
        c2._write_configs()
        with open(slog) as f:
            text = f.read().replace("10.77.0.1 ", "10.77.7.2 ")
        with open(c2.statistics_log, "w") as f:
            f.write(text)
        ft = int(_dt.datetime(2026, 11, 26, 4, 21, 11, tzinfo=_dt.timezone.utc).timestamp()) * 10**9
        check([round(x, 3) for x in c2.filtered_offsets_ns()] == [-6.849, 81.02, -7.678],
              "filtered_offsets_ns: the server's rows, in ns")
        check([round(x, 3) for x in c2.filtered_offsets_ns(since_ns=ft + 1, until_ns=ft + 2 * 10**9)]
              == [-7.678], "filtered samples: a row's whole second overlaps the span")
        check("log rawmeasurements statistics tracking\n" in ctext and " noselect\n" in ctext,
              "chrony client logs statistics (its filtered estimate), stays noselect")

        # CPU accounting
        check(proc_cpu_ticks(os.getpid()) is not None and proc_cpu_ticks(2**22 + 12345) is None,
              "proc_cpu_ticks: own process read, absent pid None")
        check(abs(cpu_percent(100, 100 + CLK_TCK // 2, 10.0) - 5.0) < 1e-9
              and cpu_percent(None, 5, 1.0) is None and cpu_percent(1, 5, 0.0) is None,
              "cpu_percent: ticks over wall time, % of a core; None when unknown")
        sl = tb.popen(None, [sys.executable, "-c", "import time; time.sleep(30)"])
        c2.procs.append(sl)
        c2.roles["client"] = sl
        k = c2.cpu_ticks()
        check(set(k) == {"client"} and isinstance(k["client"], int), f"cpu_ticks by role {k}")
        c2.stop()
        check(c2.cpu_ticks() == {"client": None}, "cpu_ticks: a stopped daemon reads None")

        # ptp4l: configs and management sockets
        p = PtpBaseline(tb, 1, 2, os.path.join(tmpd, "ptp"))
        socks = p._socket_paths()
        check(os.path.dirname(socks["slave"]) == p.workdir, "short run dir: sockets inside it")
        mconf, pconf = p._write_configs(socks)
        with open(pconf) as f:
            ptext = f.read()
        with open(mconf) as f:
            mtext = f.read()
        check("free_running            1\n" in ptext and "free_running            1\n" in mtext,
              "ptp4l never steers the shared clock (free_running on both)")
        check("UDPv4                   10.77.1.2\n" in ptext and "slaveOnly               1\n" in ptext
              and f"uds_address             {socks['slave']}\n" in ptext, "slave: unicast to the master")
        check("unicast_listen          1\n" in mtext and "masterOnly              1\n" in mtext,
              "master: unicast listen, master only")
        check("logSyncInterval         -4\n" in ptext, "16 Sync/s by default")
        deep = os.path.join(tmpd, "d" * 90, "ptp")
        p2 = PtpBaseline(tb, 1, 2, deep)
        socks2 = p2._socket_paths()
        check(all(len(x) <= _UDS_MAX for x in socks2.values()) and p2._tmp_sockdir,
              "long run dir: sockets in a private temporary dir, within sun_path")
        p2.stop()
        check(not os.path.exists(os.path.dirname(socks2["slave"])), "stop() removes that dir")
        try:
            PtpBaseline(tb, 1, 2, tmpd, query="PORT_DATA_SET")
            check(False, "unknown pmc query refused")
        except ValueError:
            check(True, "unknown pmc query refused")

        # ptp4l: the real poll loop against a stand-in pmc
        ts = [_PMC_TIME_STATUS.format(seq=0, offset=0, ingress=0, gm="false"),      # no master yet
              _PMC_TIME_STATUS.format(seq=0, offset=999, ingress=500, gm="false"),  # master gone
              _PMC_TIME_STATUS.format(seq=1, offset=-52, ingress=1000, gm="true"),
              _PMC_TIME_STATUS.format(seq=2, offset=-52, ingress=1000, gm="true"),  # same Sync again
              _PMC_TIME_STATUS.format(seq=3, offset=17, ingress=2000, gm="true")]
        p = _poll_with_fake_pmc(tb, os.path.join(tmpd, "pmc1"), "TIME_STATUS_NP", ts,
                                lambda q: q.poll_stats["timeouts"] >= 1)
        got = [(r["t_ns"], r["offset_ns"]) for r in p.samples()]
        check(got == [(1000, -52), (2000, 17)], f"TIME_STATUS_NP: one sample per Sync, by ingress time {got}")
        check(p.poll_stats["responses"] == 5 and p.poll_stats["timeouts"] >= 1 and p.poll_error is None,
              f"every answer counted, silence times out {p.poll_stats}")
        check(p.offsets_ns(since_ns=1500) == [17], "samples filtered by Sync time")
        cd = [_PMC_CURRENT_DATA_SET.format(seq=0, offset="0.0", delay="0.0"),     # nothing measured yet
              _PMC_CURRENT_DATA_SET.format(seq=1, offset="-12.0", delay="801.5"),
              _PMC_CURRENT_DATA_SET.format(seq=2, offset="-12.0", delay="801.5"),  # unchanged: same Sync
              _PMC_CURRENT_DATA_SET.format(seq=3, offset="-12.0", delay="802.5")]
        p = _poll_with_fake_pmc(tb, os.path.join(tmpd, "pmc2"), "CURRENT_DATA_SET", cd,
                                lambda q: q.poll_stats["timeouts"] >= 1)
        got = [(r["offset_ns"], r["delay_ns"]) for r in p.samples()]
        check(got == [(-12.0, 801.5), (-12.0, 802.5)], f"CURRENT_DATA_SET: a new sample per change {got}")
        p = _poll_with_fake_pmc(tb, os.path.join(tmpd, "pmc3"), "TIME_STATUS_NP", [],
                                lambda q: q.poll_error is not None, script="import sys; sys.stdin.readline()")
        check(p.poll_error is not None and not p.samples(), f"a pmc that exits is reported ({p.poll_error})")
        _selftest_node_clocks(check, tb, tmpd)
    finally:
        shutil.rmtree(tmpd, ignore_errors=True)
    return check.result()


def _selftest_node_clocks(check: Any, tb: Any, tmpd: str) -> None:
    """The baselines on the nodes' own clocks: where a row sits in its
    second, the true offset, the daemons' command line, the errors."""
    from clock_trajectory import FINE_PER_NS, Knot, Trajectory
    import random

    S = 1_800_000_000
    rows = [{"t_s": float(S)}] * 3 + [{"t_s": float(S + 1)}] * 4 + [{"t_s": float(S + 2)}] * 4 \
        + [{"t_s": float(S + 3)}]
    rows = place_within_seconds([dict(r) for r in rows])
    got = [r["t_ns"] - S * 10**9 for r in rows]
    want = [375_000_000, 625_000_000, 875_000_000,
            1_125_000_000, 1_375_000_000, 1_625_000_000, 1_875_000_000,
            2_125_000_000, 2_375_000_000, 2_625_000_000, 2_875_000_000, 3_125_000_000]
    check(got == want, f"rows placed within their second: full seconds evenly, the partial first "
                       f"counted from its end, the partial last from its start ({got})")

    # the truth: server 1 us ahead of true time, client 10 ppm fast from 0
    server = Trajectory.linear(1000, 0, 0)
    client = Trajectory.linear(0, 10, 0)
    truth = PairTruth(server, client)
    v = 2_000_000_000_020
    t = Fraction(v) / (1 + Fraction(10, 10**6))
    check(truth.server_minus_client_ns(v) == t + 1000 - v, "server minus client at the client's reading, exact")
    check(abs(truth.motion_within_second_ns(v) - 1e9 * 1e-5 / (1 + 1e-5)) < 1e-3,
          f"the truth moves 10 us in a second of a 10 ppm clock ({truth.motion_within_second_ns(v)})")
    check(PairTruth().server_minus_client_ns(v) == 0, "on the kernel clock the truth is 0")

    # true_time's bisection against the scan, on generated trajectories (steps
    # forward and back, rates of +-500 ppm)
    rnd = random.Random(31)
    mismatches = falls = 0
    for _ in range(80):
        t_ns, value, knots = 10**12, 10**12 * FINE_PER_NS, []
        for _k in range(rnd.randint(1, 30)):
            slope = FINE_PER_NS + rnd.randint(-500, 500) * 10**9
            knots.append(Knot(t_ns, value, slope))
            dt = rnd.randint(1, 10**6) if rnd.random() < 0.3 else rnd.randint(1, 10**9)  # some steps back win
            value += dt * slope + rnd.choice([0, 0, 1, -1]) * rnd.randint(0, 10**6) * FINE_PER_NS
            t_ns += dt
        fast = Trajectory(knots)
        for _v in range(60):
            if rnd.random() < 0.5:  # anywhere
                target = Fraction(rnd.randint(knots[0].value_fine - 10**6 * FINE_PER_NS, value), FINE_PER_NS)
            else:  # near a knot, where a step back makes two instants read the same
                near = rnd.choice(knots).value_fine // FINE_PER_NS
                target = Fraction(near + rnd.randint(-2 * 10**6, 2 * 10**6))
            k = fast.last_knot_at_or_below_by_scan(target * FINE_PER_NS)
            simple = knots[k].t_ns + (target * FINE_PER_NS - knots[k].value_fine) / knots[k].slope
            if k + 1 < len(knots) and simple > knots[k + 1].t_ns:
                simple = Fraction(knots[k + 1].t_ns)
            mismatches += fast.true_time(target) != simple
        falls += any(b.value_fine < a.value_fine for a, b in zip(knots, knots[1:]))
    check(falls >= 10, f"the generated trajectories include knots whose values fall ({falls} of 80)")
    check(mismatches == 0, f"true_time's bisection equals the scan on 4 800 generated readings ({mismatches} differ)")

    # the daemons' command line on a node's clock, and on the kernel's
    c = ChronyBaseline(tb, 1, 2, os.path.join(tmpd, "chrony-nodes"), clock_states={1: "/s/n1", 2: "/s/n2"},
                       shim="/b/shim.so", ntp_port=11123)
    argv, env = c.on_node_clock(c.client, ["chronyd", "-x"])
    check(argv == NO_SYS_TIME + ["chronyd", "-x"] and env["LD_PRELOAD"] == "/b/shim.so"
          and env["CHRONOLINK_CLOCK_STATE"] == "/s/n2" and env["CHRONOLINK_CLOCK_STATE_WALL_ONLY"] == "1",
          "on a node's clock: the shim, wall-only, that node's file, no CAP_SYS_TIME")
    check(ChronyBaseline(tb, 1, 2, tmpd).on_node_clock(c.client, ["x"]) == (["x"], None),
          "on the kernel clock: as given")
    sconf, cconf = c._write_configs()
    with open(sconf) as f, open(cconf) as g:
        check("port 11123\n" in f.read() and " port 11123 minpoll" in g.read(),
              "the baseline server on its own port, beside a discipline's")
    try:
        c.start()
        check(False, "a missing shim is refused")
    except BaselineError as e:
        check("not built" in str(e), f"a missing shim is refused ({e})")

    # errors against the truth: chrony's offset is server minus client, ptp's slave minus master
    with open(c.measurements_log, "w") as f:
        f.write(_CHRONY_LOG_SAMPLE)
    c._truth, c.stopped_ns = truth, 1
    samples = c.samples()
    errs = c.errors_ns()
    check(len(errs) == len(samples) == 3 and all(
        abs(e - (r["offset_ns"] - float(truth.server_minus_client_ns(r["t_ns"])))) < 1e-6
        for e, r in zip(errs, samples)) and abs(errs[0] - samples[0]["offset_ns"]) > 1000,
        "chronyd: error = offset - (server - client) at the row's instant")
    motion = c.truth_motion()
    check(abs(motion["max_ns"] - 1e4) < 1 and abs(motion["median_ns"] - 1e4) < 1
          and abs(motion["placement_ns"] - 1e4 / 1) < 1,
          f"the truth's motion within a logged second, and a row's worth of it (a second of one row) ({motion})")
    p = PtpBaseline(tb, 1, 2, os.path.join(tmpd, "ptp-nodes"), clock_states={1: "/s/n1", 2: "/s/n2"})
    p._samples = [{"t_ns": v, "offset_ns": -900.0}]
    p._truth, p.stopped_ns = truth, 1
    check(abs(p.errors_ns()[0] - (-900.0 + float(truth.server_minus_client_ns(v)))) < 1e-9,
          "ptp4l: error = offset - (slave - master) at the Sync's receive stamp")
    try:
        PtpBaseline(tb, 1, 2, tmpd, query="CURRENT_DATA_SET", clock_states={2: "/s/n2"})
        check(False, "CURRENT_DATA_SET refused on node clocks")
    except ValueError:
        check(True, "CURRENT_DATA_SET refused on node clocks (no Sync instant)")


# --------------------------------------------------------------------------
# convenience driver

def run_baselines(tb: Testbed, a: Any, b: Any, workdir: str, seconds: float, *,
                  which: Sequence[str] = ("chrony", "ptp"), warmup_s: float = 2.0,
                  log=print) -> dict:
    """Run the chosen baselines between nodes a (server/master) and b
    (client/slave) for `seconds` after a warm-up; returns
    {label: {"errors_ns": [...], "summary": {...}} or {"error": reason}}
    (on the kernel clock an error is the offset the daemon reported)."""
    started: list[_Baseline] = []
    out: dict[str, Any] = {}
    for w in which:
        try:
            if w == "chrony":
                bl: _Baseline = ChronyBaseline(tb, a, b, os.path.join(workdir, "chrony"))
            elif w == "ptp":
                bl = PtpBaseline(tb, a, b, os.path.join(workdir, "ptp"))
            else:
                raise ValueError(f"unknown baseline {w!r}")
            bl.start()
            started.append(bl)
        except (BaselineError, TestbedError, OSError) as e:
            out[w] = {"error": str(e)}
            log(f"baseline {w} failed: {e}")
    try:
        time.sleep(warmup_s)
        t0 = time.time_ns()
        m0 = time.monotonic()
        ticks0 = [bl.cpu_ticks() for bl in started]
        time.sleep(seconds)
        t1 = time.time_ns()
        wall = time.monotonic() - m0
        ticks1 = [bl.cpu_ticks() for bl in started]
    finally:
        for bl in started:
            bl.stop()
    for bl, k0, k1 in zip(started, ticks0, ticks1):
        offs = bl.errors_ns(since_ns=t0, until_ns=t1)  # on the kernel clock: the offsets themselves
        cpu = {role: cpu_percent(k0.get(role), k1.get(role), wall) for role in bl.roles}
        out[bl.label] = {"errors_ns": offs, "summary": summarize_abs_us(offs), "cpu_pct_of_core": cpu}
        if isinstance(bl, PtpBaseline):
            out[bl.label]["poll_stats"] = dict(bl.poll_stats)
        if isinstance(bl, ChronyBaseline):
            fo = bl.filtered_errors_ns(since_ns=t0, until_ns=t1)
            out[bl.label + " filtered"] = {"errors_ns": fo, "summary": summarize_abs_us(fo),
                                           "cpu_pct_of_core": cpu}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="run chronyd and ptp4l baselines on a test bed")
    ap.add_argument("--name", default="clbase")
    ap.add_argument("--topology", choices=["direct", "routed"], default="direct")
    ap.add_argument("--tbf-rate", default="200mbit", help="routed only; '' for none")
    ap.add_argument("--load", default="", help="cross traffic per direction, e.g. 180M (routed)")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--which", default="chrony,ptp")
    ap.add_argument("--workdir", default="")
    ap.add_argument("--json", help="write offsets and summaries here")
    ap.add_argument("--selftest", action="store_true", help="check the parsing and the pmc poller, exit (no root)")
    a = ap.parse_args(argv)
    if a.selftest:
        return selftest()
    workdir = a.workdir or tempfile.mkdtemp(prefix="chronolink-baselines-")
    tbf = {"rate": a.tbf_rate} if (a.topology == "routed" and a.tbf_rate) else None
    try:
        cts = []
        with Testbed(a.name, nodes=2, topology=a.topology, tbf=tbf) as tb, contextlib.ExitStack() as st:
            if a.load:
                cts = [st.enter_context(tb.cross_traffic(s, d, a.load)) for s, d in ((1, 2), (2, 1))]
            res = run_baselines(tb, 1, 2, workdir, a.seconds, which=a.which.split(","))
            for ct in cts:
                ct.stop()
    except _tbmod.TestbedPermissionError as e:
        print(f"baselines: {e}", file=sys.stderr)
        return _tbmod.EXIT_NOT_PERMITTED
    except KeyboardInterrupt:
        print("baselines: interrupted (test bed cleaned up)", file=sys.stderr)
        return 130
    print(f"{a.topology} load={a.load or 'idle'} seconds={a.seconds} workdir={workdir}")
    for ct in cts:
        r = ct.result or {}
        bps = r.get("bits_per_second")
        print(f"cross traffic {ct.src.index}->{ct.dst.index}: asked {ct.rate}, achieved "
              + (f"{bps / 1e6:.1f} Mbit/s" if isinstance(bps, (int, float)) else "?"))
    print(f"{'method':<24} {'samples':>8} {'p50 us':>9} {'p99 us':>9} {'max us':>9}")
    for k, v in res.items():
        if "error" in v:
            print(f"{k:<24} failed: {v['error']}")
            continue
        s = v["summary"]
        cpu = v.get("cpu_pct_of_core") or {}
        cpu_s = ", ".join(f"{r} {'-' if c is None else f'{c:.2f}'} %" for r, c in cpu.items())
        print(f"{k:<24} {s['samples']:>8} {s['p50_us']:>9.3f} {s['p99_us']:>9.3f} {s['max_us']:>9.3f}"
              + (f"   CPU of a core: {cpu_s}" if cpu_s else ""))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"topology": a.topology, "load": a.load, "results": res}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
