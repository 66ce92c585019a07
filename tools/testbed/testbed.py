#!/usr/bin/env python3
"""chronolink test bed: network namespaces joined by veth pairs.

A module (for the benchmark and demo drivers) and a CLI (for the C++
integration tests, through the `chronolink-testbed` wrapper). Python 3
standard library only; needs root (CAP_SYS_ADMIN + CAP_NET_ADMIN).

Topologies
  direct  exactly two nodes, one veth pair:  PFX-n1 10.77.0.1/24 <-> PFX-n2 10.77.0.2/24
  routed  N nodes, each with a veth to the router namespace PFX-r:
          node i: 10.77.<i>.2/24 (default route via 10.77.<i>.1), router: 10.77.<i>.1/24,
          ip_forward=1 in the router, optional tbf on every router egress veth.

Module use
    from testbed import Testbed
    with Testbed("clb", nodes=2, topology="routed",
                 tbf={"rate": "200mbit", "burst": "32kbit", "latency": "20ms"}) as tb:
        p = tb.popen(1, ["some-daemon", "-x"])
        print(tb.exec(2, ["ip", "-br", "addr"]).stdout)
        with tb.cross_traffic(1, 2, "100M"):
            ...
        tb.probe_loss(1, 0.1)             # drop 10 % of the probes node 1 sends
        print(tb.probe_loss_stats(1))     # the drop filter's counters
    # every process started by tb.popen is stopped and every namespace deleted here,
    # also on exceptions, SIGINT, SIGTERM and SIGHUP.

CLI exit codes: 0 ok, 1 error, 2 usage, 77 not permitted (not root, or
`ip netns add` refused) so that callers can skip instead of fail.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import dataclasses
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Iterable, Sequence

__all__ = [
    "Testbed", "Node", "CrossTraffic", "TestbedError", "TestbedPermissionError",
    "teardown", "list_namespaces", "EXIT_NOT_PERMITTED", "SUBNET", "probe_loss_loader",
    "PROBE_LOSS_PIN_ROOT", "PROBE_LOSS_TYPES",
]

SUBNET = "10.77.0.0/16"
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NOT_PERMITTED = 77

NODE_IFNAME = "veth0"              # node side, in every node namespace
DEFAULT_TBF = {"burst": "32kbit", "latency": "20ms"}
MAX_NODES = 200
_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,39}$")
_RATE_RE = re.compile(r"^\d+(\.\d+)?[kKmMgG]?$")
# Probe loss (docs/testbed.md "Probe loss"): the loader's counter pins, one
# file <netns inode>-<device> per attached filter (tools/testbed/probe_loss/).
PROBE_LOSS_PIN_ROOT = "/sys/fs/bpf/chronolink/probe_loss"
PROBE_LOSS_TYPES = ("forward", "reverse", "followup", "pilot")
_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


class TestbedError(RuntimeError):
    """Anything that went wrong building, using or removing a test bed."""


class TestbedPermissionError(TestbedError):
    """Not root, or the kernel refused to create a network namespace."""


def _log(msg: str) -> None:
    if os.environ.get("CHRONOLINK_TESTBED_QUIET") != "1":
        print(f"testbed: {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# small process helpers (every wait has a timeout)

def _run(argv: Sequence[str], *, timeout: float = 10.0, check: bool = True,
         input: str | None = None) -> subprocess.CompletedProcess:
    try:
        cp = subprocess.run(list(argv), input=input, capture_output=True, text=True,
                            timeout=timeout)
    except FileNotFoundError as e:
        raise TestbedError(f"{argv[0]}: not found ({e})") from None
    except subprocess.TimeoutExpired:
        raise TestbedError(f"timed out after {timeout:.0f}s: {' '.join(argv)}") from None
    if check and cp.returncode != 0:
        err = (cp.stderr or cp.stdout).strip()
        raise TestbedError(f"`{' '.join(argv)}` failed (rc={cp.returncode}): {err}")
    return cp


def _pid_alive(pid: int) -> bool:
    """True while pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    # state is the field right after the parenthesised command name
    rparen = stat.rfind(b")")
    state = stat[rparen + 2:rparen + 3]
    return state not in (b"Z", b"X")


def _kill_pids(pids: Iterable[int], term_timeout: float = 3.0, kill_timeout: float = 2.0) -> list[int]:
    """SIGTERM, wait, SIGKILL, wait. Returns pids still alive at the end."""
    pids = [p for p in set(pids) if p > 1 and p != os.getpid()]
    for sig, timeout in ((signal.SIGTERM, term_timeout), (signal.SIGKILL, kill_timeout)):
        alive = [p for p in pids if _pid_alive(p)]
        if not alive:
            return []
        for p in alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p, sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not any(_pid_alive(p) for p in alive):
                break
            time.sleep(0.02)
    return [p for p in pids if _pid_alive(p)]


def _check_root() -> None:
    if os.geteuid() != 0:
        raise TestbedPermissionError(
            "must run as root: network namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN "
            "(try: sudo chronolink-testbed ...)")
    if shutil.which("ip") is None:
        raise TestbedError("`ip` (iproute2) not found in PATH")


# --------------------------------------------------------------------------
# namespace bookkeeping

def _ns_pattern(name: str) -> re.Pattern:
    return re.compile(r"^" + re.escape(name) + r"-(n[0-9]+|r)$")


def _validate_name(name: str) -> None:
    if not _NAME_RE.match(name or ""):
        raise TestbedError(
            f"bad test-bed name {name!r}: use 1-40 characters [A-Za-z0-9_.-], starting with a letter")


def _all_namespaces() -> list[str]:
    cp = _run(["ip", "netns", "list"], timeout=10)
    out = []
    for line in cp.stdout.splitlines():
        tok = line.split()
        if tok:
            out.append(tok[0])
    return out


def list_namespaces(name: str) -> list[str]:
    """Namespaces that belong to test bed `name`: exactly NAME-n<k> and NAME-r."""
    pat = _ns_pattern(name)
    return sorted(n for n in _all_namespaces() if pat.match(n))


def _ns_pids(ns: str) -> list[int]:
    cp = _run(["ip", "netns", "pids", ns], timeout=10, check=False)
    return [int(x) for x in cp.stdout.split() if x.isdigit()]


def teardown(name: str, *, term_timeout: float = 3.0) -> list[str]:
    """Kill every process inside NAME's namespaces, then delete the namespaces.

    Touches nothing but namespaces named NAME-n<k> / NAME-r. Never fails
    because something is already gone. Returns the namespaces it removed."""
    _validate_name(name)
    _check_root()
    namespaces = list_namespaces(name)
    if not namespaces:
        return []
    pids: list[int] = []
    for ns in namespaces:
        pids += _ns_pids(ns)
    if pids:
        left = _kill_pids(pids, term_timeout=term_timeout)
        if left:
            _log(f"warning: processes {left} in {name}'s namespaces survived SIGKILL")
    _remove_probe_loss_pins(namespaces)
    removed = []
    for ns in namespaces:
        cp = _run(["ip", "netns", "del", ns], timeout=10, check=False)
        if cp.returncode == 0 or "No such file" in cp.stderr:
            removed.append(ns)
        else:
            _log(f"warning: could not delete {ns}: {cp.stderr.strip()}")
    return removed


def _remove_probe_loss_pins(namespaces: Iterable[str]) -> list[str]:
    """Unpins the probe-loss counters of filters in these namespaces (the
    filters themselves go with their devices when the namespace is deleted).
    The pins are named by namespace inode, which only lives as long as the
    namespace: remove them first."""
    try:
        pins = os.listdir(PROBE_LOSS_PIN_ROOT)
    except OSError:
        return []
    removed = []
    for ns in namespaces:
        try:
            ino = os.stat(f"/run/netns/{ns}").st_ino
        except OSError:
            continue
        for pin in pins:
            if pin.startswith(f"{ino}-"):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(PROBE_LOSS_PIN_ROOT, pin))
                    removed.append(pin)
    return removed


def probe_loss_loader(explicit: str | None = None) -> str:
    """Path of chronolink-probe-loss: `explicit`, $CHRONOLINK_PROBE_LOSS_BIN,
    PATH, or the build trees of this checkout (build*/tools/)."""
    cands = [explicit, os.environ.get("CHRONOLINK_PROBE_LOSS_BIN"),
             shutil.which("chronolink-probe-loss")]
    with contextlib.suppress(OSError):
        for d in sorted(os.listdir(_REPO)):
            if d.startswith("build"):
                cands.append(os.path.join(_REPO, d, "tools", "chronolink-probe-loss"))
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    if explicit:
        raise TestbedError(f"probe-loss loader {explicit!r} is not an executable file")
    raise TestbedError("chronolink-probe-loss not found: build it (cmake --build build --target "
                       "chronolink-probe-loss; needs the eBPF toolchain) or set "
                       "CHRONOLINK_PROBE_LOSS_BIN")


# --------------------------------------------------------------------------
# description

@dataclasses.dataclass(frozen=True)
class Node:
    index: int
    netns: str
    address: str
    ifname: str
    prefixlen: int = 24
    mac: str = ""
    gateway: str | None = None
    peer_ifname: str = ""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _mac(subnet: int, host: int) -> str:
    # locally administered, deterministic; namespaces are never bridged, so
    # equal MACs in two different test beds never meet.
    return f"02:77:00:00:{subnet:02x}:{host:02x}"


def _plan(name: str, nodes: int, topology: str) -> tuple[list[Node], dict | None]:
    if topology == "direct":
        if nodes != 2:
            raise TestbedError("direct topology has exactly 2 nodes")
        ns = [Node(index=i, netns=f"{name}-n{i}", address=f"10.77.0.{i}", ifname=NODE_IFNAME,
                   mac=_mac(0, i), gateway=None, peer_ifname=NODE_IFNAME) for i in (1, 2)]
        return ns, None
    if topology == "routed":
        if not 1 <= nodes <= MAX_NODES:
            raise TestbedError(f"routed topology takes 1..{MAX_NODES} nodes")
        ns = [Node(index=i, netns=f"{name}-n{i}", address=f"10.77.{i}.2", ifname=NODE_IFNAME,
                   mac=_mac(i, 2), gateway=f"10.77.{i}.1", peer_ifname=f"veth-n{i}")
              for i in range(1, nodes + 1)]
        router = {
            "netns": f"{name}-r",
            "ip_forward": 1,
            "interfaces": [{"node": n.index, "ifname": n.peer_ifname, "address": n.gateway,
                            "prefixlen": 24, "mac": _mac(n.index, 1)} for n in ns],
        }
        return ns, router
    raise TestbedError(f"unknown topology {topology!r} (direct|routed)")


def _normalise_tbf(tbf: Any) -> dict | None:
    if tbf in (None, False, "", {}):
        return None
    if isinstance(tbf, str):
        tbf = {"rate": tbf}
    out = dict(DEFAULT_TBF)
    out.update({k: v for k, v in dict(tbf).items() if v is not None})
    if "rate" not in out:
        raise TestbedError("tbf needs a rate, e.g. 200mbit")
    for k in ("rate", "burst", "latency"):
        out[k] = str(out[k])
        if not re.match(r"^[0-9.]+[A-Za-z]*$", out[k]):
            raise TestbedError(f"bad tbf {k}: {out[k]!r}")
    return {k: out[k] for k in ("rate", "burst", "latency")}


# --------------------------------------------------------------------------
# signals

class _SignalGuard:
    """Turns SIGINT/SIGTERM/SIGHUP into exceptions while a test bed is up, so
    that `with` blocks and finally clauses run; shields cleanup itself."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self._prev: dict[int, Any] = {}
        self.pending: int | None = None

    @staticmethod
    def _raise(signum, frame):  # noqa: ARG004
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + signum)

    def _record(self, signum, frame):  # noqa: ARG002
        self.pending = signum

    def _main(self) -> bool:
        return threading.current_thread() is threading.main_thread()

    def install(self) -> None:
        if not self._main() or self._prev:
            return
        for s in self.SIGNALS:
            self._prev[s] = signal.signal(s, self._raise)

    def shield(self) -> None:
        """During cleanup: remember signals instead of raising."""
        if not self._main():
            return
        for s in self.SIGNALS:
            prev = signal.signal(s, self._record)
            self._prev.setdefault(s, prev)

    def restore(self) -> None:
        if not self._main():
            return
        for s, h in self._prev.items():
            with contextlib.suppress(Exception):
                signal.signal(s, h if h is not None else signal.SIG_DFL)
        self._prev.clear()


# --------------------------------------------------------------------------
# the test bed

class Testbed:
    """A set of network namespaces NAME-n1..NAME-nN (+ NAME-r when routed).

    Use as a context manager (builds on enter, removes on exit) or call
    up()/down() yourself; down() also runs at interpreter exit."""

    def __init__(self, name: str, nodes: int = 2, topology: str = "direct", tbf: Any = None, *,
                 ipv6: bool = False, static_neigh: bool = True, handle_signals: bool = True,
                 term_timeout: float = 5.0) -> None:
        _validate_name(name)
        self.name = name
        self.topology = topology
        self.tbf = _normalise_tbf(tbf)
        self.ipv6 = ipv6
        self.static_neigh = static_neigh
        self.term_timeout = term_timeout
        self.nodes, self.router = _plan(name, nodes, topology)
        self._owned = True
        self._is_up = False
        self._procs: list[subprocess.Popen] = []
        self._procs_lock = threading.Lock()
        self._guard = _SignalGuard() if handle_signals else None
        self._atexit_registered = False
        self._loss: dict[tuple[str, str], str] = {}  # (netns, device) -> loader, to detach at down()

    # ---- construction ---------------------------------------------------

    @classmethod
    def attach(cls, name: str) -> "Testbed":
        """A handle on a test bed that some other process built (e.g. the
        CLI's `up`). Its cleanup stops only processes it started itself and
        leaves the namespaces alone."""
        _validate_name(name)
        _check_root()
        nss = list_namespaces(name)
        if not nss:
            raise TestbedError(f"no test bed named {name!r} (no namespaces {name}-n*)")
        idx = sorted(int(n.rsplit("-n", 1)[1]) for n in nss if not n.endswith("-r"))
        topology = "routed" if f"{name}-r" in nss else "direct"
        tb = cls(name, nodes=len(idx), topology=topology, handle_signals=True)
        tb._owned = False
        tb._is_up = True
        return tb

    def describe(self) -> dict:
        return {
            "name": self.name,
            "topology": self.topology,
            "subnet": SUBNET,
            "nodes": [n.to_dict() for n in self.nodes],
            "router": self.router,
            "tbf": self.tbf,
        }

    def up(self) -> dict:
        _check_root()
        t0 = time.monotonic()
        if self._owned:
            old = teardown(self.name)
            if old:
                _log(f"removed leftover namespaces {old}")
        if self._guard:
            self._guard.install()
        if not self._atexit_registered:
            atexit.register(self.down)
            self._atexit_registered = True
        self._is_up = True
        try:
            self._build()
        except BaseException:
            self.down()
            raise
        _log(f"{self.name}: {self.topology} with {len(self.nodes)} nodes up in "
             f"{time.monotonic() - t0:.2f}s")
        return self.describe()

    def _add_ns(self, ns: str) -> None:
        cp = _run(["ip", "netns", "add", ns], timeout=10, check=False)
        if cp.returncode != 0:
            err = cp.stderr.strip()
            if "not permitted" in err or "Permission denied" in err:
                raise TestbedPermissionError(
                    f"`ip netns add {ns}` not permitted: {err} (need root with CAP_SYS_ADMIN; "
                    "inside a container use --privileged or add CAP_SYS_ADMIN/CAP_NET_ADMIN)")
            raise TestbedError(f"`ip netns add {ns}` failed: {err}")

    def _sysctl(self, ns: str, settings: dict[str, str]) -> None:
        script = "".join(f"echo {v} > /proc/sys/{k.replace('.', '/')} && " for k, v in settings.items())
        _run(["ip", "netns", "exec", ns, "sh", "-c", script + "true"], timeout=10)

    def _batch(self, tool: str, ns: str, lines: list[str]) -> None:
        if lines:
            _run([tool, "-n", ns, "-batch", "-"], input="\n".join(lines) + "\n", timeout=20)

    def _build(self) -> None:
        all_ns = [n.netns for n in self.nodes] + ([self.router["netns"]] if self.router else [])
        for ns in all_ns:
            self._add_ns(ns)
        base = {} if self.ipv6 else {"net.ipv6.conf.all.disable_ipv6": "1",
                                     "net.ipv6.conf.default.disable_ipv6": "1"}
        for ns in all_ns:
            extra = {"net.ipv4.ip_forward": "1"} if self.router and ns == self.router["netns"] else {}
            if base or extra:
                self._sysctl(ns, {**base, **extra})

        cmds: dict[str, list[str]] = {ns: ["link set lo up"] for ns in all_ns}
        tc_cmds: dict[str, list[str]] = {ns: [] for ns in all_ns}
        tbf = (f"tbf rate {self.tbf['rate']} burst {self.tbf['burst']} latency {self.tbf['latency']}"
               if self.tbf else None)
        if self.topology == "direct":
            a, b = self.nodes
            # both ends created straight inside their namespaces: nothing ever
            # appears in the host's namespace
            cmds[a.netns].append(f"link add {a.ifname} address {a.mac} type veth "
                                 f"peer name {b.ifname} address {b.mac} netns {b.netns}")
            for n, other in ((a, b), (b, a)):
                cmds[n.netns] += [f"addr add {n.address}/{n.prefixlen} dev {n.ifname}",
                                  f"link set {n.ifname} up"]
                if self.static_neigh:
                    cmds[n.netns].append(f"neigh replace {other.address} lladdr {other.mac} "
                                         f"dev {n.ifname} nud permanent")
                if tbf:
                    tc_cmds[n.netns].append(f"qdisc replace dev {n.ifname} root {tbf}")
            # links must exist in b before b's batch runs: run a first
            self._batch("ip", a.netns, cmds[a.netns])
            self._batch("ip", b.netns, cmds[b.netns])
        else:
            r = self.router["netns"]
            rif = {i["node"]: i for i in self.router["interfaces"]}
            for n in self.nodes:
                ri = rif[n.index]
                cmds[r] += [f"link add {ri['ifname']} address {ri['mac']} type veth "
                            f"peer name {n.ifname} address {n.mac} netns {n.netns}",
                            f"addr add {ri['address']}/24 dev {ri['ifname']}",
                            f"link set {ri['ifname']} up"]
                if self.static_neigh:
                    cmds[r].append(f"neigh replace {n.address} lladdr {n.mac} "
                                   f"dev {ri['ifname']} nud permanent")
                    cmds[n.netns].append(f"neigh replace {n.gateway} lladdr {ri['mac']} "
                                         f"dev {n.ifname} nud permanent")
                cmds[n.netns] = [f"addr add {n.address}/{n.prefixlen} dev {n.ifname}",
                                 f"link set {n.ifname} up",
                                 f"route add default via {n.gateway} dev {n.ifname}"] + cmds[n.netns]
                if tbf:
                    tc_cmds[r].append(f"qdisc replace dev {ri['ifname']} root {tbf}")
            self._batch("ip", r, cmds[r])
            for n in self.nodes:
                self._batch("ip", n.netns, cmds[n.netns])
        for ns, lines in tc_cmds.items():
            self._batch("tc", ns, lines)

    # ---- use ----------------------------------------------------------

    def node(self, node: Any) -> Node:
        if isinstance(node, Node):
            return node
        i = int(node)
        if not 1 <= i <= len(self.nodes):
            raise TestbedError(f"no node {node} (have 1..{len(self.nodes)})")
        return self.nodes[i - 1]

    def netns(self, node: Any) -> str:
        """Namespace of node `node` (index, Node, or 'r'/'router'/0 for the router)."""
        if node in ("r", "router", 0, "0"):
            if not self.router:
                raise TestbedError("this test bed has no router (direct topology)")
            return self.router["netns"]
        return self.node(node).netns

    def address(self, node: Any) -> str:
        return self.node(node).address

    def ns_argv(self, node: Any, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.netns(node), *map(str, argv)]

    def exec(self, node: Any, argv: Sequence[str], *, timeout: float = 30.0, check: bool = True,
             input: str | None = None) -> subprocess.CompletedProcess:
        """Run argv inside the node's namespace and wait (at most `timeout`)."""
        full = self.ns_argv(node, argv)
        try:
            cp = subprocess.run(full, input=input, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TestbedError(f"timed out after {timeout:.0f}s in {self.netns(node)}: "
                               f"{' '.join(map(str, argv))}") from None
        if check and cp.returncode != 0:
            raise TestbedError(f"in {self.netns(node)}: `{' '.join(map(str, argv))}` failed "
                               f"(rc={cp.returncode}): {(cp.stderr or cp.stdout).strip()}")
        return cp

    def popen(self, node: Any, argv: Sequence[str], **kw: Any) -> subprocess.Popen:
        """Start argv inside the node's namespace (`ip netns exec` execs it, so
        the returned pid is the program itself). It runs in its own session /
        process group and is stopped (SIGTERM, then SIGKILL) at cleanup."""
        kw.setdefault("start_new_session", True)
        kw.setdefault("stdin", subprocess.DEVNULL)
        if not self._is_up:
            raise TestbedError("test bed is not up")
        p = subprocess.Popen(self.ns_argv(node, argv), **kw)
        p.chronolink_netns = self.netns(node)  # type: ignore[attr-defined]
        with self._procs_lock:
            self._procs.append(p)
        return p

    def terminate(self, procs: Any, timeout: float | None = None, sig: int = signal.SIGTERM) -> None:
        """Stop one Popen or a list of them: `sig` to the process group, wait up
        to `timeout`, then SIGKILL and reap."""
        if isinstance(procs, subprocess.Popen):
            procs = [procs]
        procs = [p for p in procs if p is not None]
        timeout = self.term_timeout if timeout is None else timeout

        def _signal(p: subprocess.Popen, s: int) -> None:
            if p.poll() is not None:
                return
            try:
                os.killpg(p.pid, s)  # own group when start_new_session (the default)
            except (ProcessLookupError, PermissionError):
                with contextlib.suppress(ProcessLookupError):
                    p.send_signal(s)

        for p in procs:
            _signal(p, sig)
        deadline = time.monotonic() + timeout
        for p in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
        for p in procs:
            if p.poll() is None:
                _signal(p, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(timeout=3.0)
            # members of the group that outlived the leader
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)

    def stop_processes(self) -> None:
        with self._procs_lock:
            procs, self._procs = self._procs, []
        self.terminate(procs)

    def cross_traffic(self, src: Any, dst: Any, rate: str, **kw: Any) -> "CrossTraffic":
        """UDP cross traffic src -> dst (context manager, or .start()/.stop())."""
        return CrossTraffic(self, src, dst, rate, **kw)

    # ---- probe loss (docs/testbed.md "Probe loss") -----------------------

    def _loss_target(self, node: Any, dev: str | None) -> tuple[str, str]:
        ns = self.netns(node)
        if dev is None:
            if node in ("r", "router", 0, "0"):
                raise TestbedError("probe loss on the router needs a device (veth-n<i>)")
            dev = self.node(node).ifname
        return ns, dev

    def _loss_cli(self, ns: str, loader: str, args: list[str]) -> dict:
        # --netns rather than `ip netns exec`: the loader stays in our mount
        # namespace and so sees the host's /sys/fs/bpf, where it pins.
        cp = _run([loader, "--netns", ns, *args], timeout=30, check=False)
        if cp.returncode != 0:
            raise TestbedError(f"chronolink-probe-loss {' '.join(args)} in {ns} failed "
                               f"(rc={cp.returncode}): {(cp.stderr or cp.stdout).strip()}")
        try:
            return json.loads(cp.stdout)
        except ValueError:
            raise TestbedError(f"chronolink-probe-loss printed no JSON: {cp.stdout!r}") from None

    def probe_loss(self, node: Any, fraction: float, *, types: Iterable[str] | str = "all",
                   port: int = 7319, dev: str | None = None, loader: str | None = None,
                   keep: bool = False) -> dict:
        """Drop `fraction` (0..1) of the chronolink datagrams node `node` sends
        (tc egress of its veth, or `dev`), of the message `types` (forward,
        reverse, followup, pilot; all by default). Loss on node A's egress
        loses A's forward probes and the reverse probes and follow-ups A
        sends as responder: pick the node and the types for one direction.
        Replaces an earlier filter there. Detached at down() unless `keep`.
        Returns the loader's JSON (prog_id, pin, ...)."""
        if not self._is_up:
            raise TestbedError("test bed is not up")
        f = float(fraction)
        if not 0.0 <= f <= 1.0:
            raise TestbedError(f"probe-loss fraction must be in [0, 1], not {fraction!r}")
        tlist = [types] if isinstance(types, str) else list(types)
        for t in tlist:
            if t != "all" and t not in PROBE_LOSS_TYPES:
                raise TestbedError(f"unknown probe type {t!r} ({', '.join(PROBE_LOSS_TYPES)} or all)")
        if not tlist:
            raise TestbedError("probe loss: no types given")
        ns, dev = self._loss_target(node, dev)
        exe = probe_loss_loader(loader)
        out = self._loss_cli(ns, exe, ["attach", "--dev", dev, "--fraction", repr(f),
                                       "--port", str(int(port)), "--types", ",".join(tlist)])
        if not keep:
            self._loss[(ns, dev)] = exe
        _log(f"probe loss {f:g} of {','.join(tlist)} on {ns} {dev} egress")
        return out

    def probe_loss_stats(self, node: Any, *, dev: str | None = None,
                         loader: str | None = None) -> dict:
        """The drop filter's counters on node `node`: seen / dropped in all
        and by_type (forward, reverse, followup, pilot, other)."""
        ns, dev = self._loss_target(node, dev)
        return self._loss_cli(ns, probe_loss_loader(loader or self._loss.get((ns, dev))),
                              ["stats", "--dev", dev])

    def probe_loss_detach(self, node: Any, *, dev: str | None = None,
                          loader: str | None = None) -> dict:
        ns, dev = self._loss_target(node, dev)
        exe = probe_loss_loader(loader or self._loss.pop((ns, dev), None))
        return self._loss_cli(ns, exe, ["detach", "--dev", dev])

    def _detach_all_loss(self) -> None:
        for (ns, dev), exe in list(self._loss.items()):
            try:
                self._loss_cli(ns, exe, ["detach", "--dev", dev])
            except TestbedError as e:
                _log(f"warning: probe loss on {ns} {dev} not detached: {e}")
        self._loss.clear()

    # ---- teardown -----------------------------------------------------

    def down(self) -> None:
        """Stop our processes, then (if we built it) delete the namespaces.
        Safe to call more than once; signals during cleanup are deferred."""
        if self._guard:
            self._guard.shield()
        try:
            self.stop_processes()
            self._detach_all_loss()
            if self._owned and self._is_up:
                with contextlib.suppress(TestbedError):
                    teardown(self.name)
            self._is_up = False
        finally:
            if self._atexit_registered:
                atexit.unregister(self.down)
                self._atexit_registered = False
            if self._guard:
                pending = self._guard.pending
                self._guard.pending = None
                self._guard.restore()
                if pending is not None and sys.exc_info()[0] is None:
                    os.kill(os.getpid(), pending)  # re-deliver to the restored handler

    def __enter__(self) -> "Testbed":
        if self._owned:
            self.up()
        elif self._guard:
            self._guard.install()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.down()


# --------------------------------------------------------------------------
# cross traffic

def _port_for(src: int, dst: int) -> int:
    return 20000 + (src * 256 + dst) % 40000


def format_cross_traffic(cts: list[dict | None]) -> str:
    """'1->2 171.3 Mbit/s (lost 0.4 %), ...' from CrossTraffic results."""
    parts = []
    for c in cts:
        if not c:
            parts.append("? (no summary)")
            continue
        bps = c.get("bits_per_second")
        lost = c.get("lost_percent")
        parts.append(f"{c.get('src')}->{c.get('dst')} "
                     + (f"{bps / 1e6:.1f} Mbit/s" if isinstance(bps, (int, float)) else "? Mbit/s")
                     + (f" (lost {lost:.1f} %)" if isinstance(lost, (int, float)) else "")
                     + f" of {c.get('rate')} asked"
                     + (f" on CPU {','.join(map(str, c['cpus']))}" if c.get("cpus") else ""))
    return ", ".join(parts)


class CrossTraffic:
    """UDP load from node src to node dst at `rate` (iperf3 syntax: 100M, 1.5G).

    iperf3 (UDP, `length`-byte datagrams) when installed, else a small Python
    UDP blaster (this file's `blast`/`sink` subcommands). Context manager or
    start()/stop(); stop() always returns within a few seconds.

    `cpus`: run both ends on these CPUs only (taskset). The softirqs of the
    load's packets then run there too, not on the CPU of whatever else is
    running: a kernel without CONFIG_IRQ_TIME_ACCOUNTING charges a softirq
    to the task it interrupts, so a process measured beside the load pays
    for the load's packets in /proc's figures."""

    def __init__(self, tb: Testbed, src: Any, dst: Any, rate: str, *, seconds: float | None = None,
                 port: int | None = None, length: int = 1400, tool: str = "auto",
                 logdir: str | None = None, start_timeout: float = 5.0,
                 cpus: Sequence[int] | None = None) -> None:
        self.tb = tb
        self.src = tb.node(src)
        self.dst = tb.node(dst)
        if not _RATE_RE.match(str(rate)):
            raise TestbedError(f"bad rate {rate!r} (e.g. 100M)")
        self.rate = str(rate)
        self.seconds = seconds
        self.port = port or _port_for(self.src.index, self.dst.index)
        self.length = int(length)
        if tool == "auto":
            tool = "iperf3" if shutil.which("iperf3") else "python"
        if tool not in ("iperf3", "python"):
            raise TestbedError(f"unknown cross-traffic tool {tool!r}")
        self.tool = tool
        self.logdir = logdir
        self.start_timeout = start_timeout
        self.cpus = sorted({int(c) for c in cpus}) if cpus else None
        if self.cpus is not None and any(c < 0 or c >= (os.cpu_count() or 1) for c in self.cpus):
            raise TestbedError(f"cross-traffic CPUs {self.cpus} are not all on this machine "
                               f"(0..{(os.cpu_count() or 1) - 1})")
        self.server: subprocess.Popen | None = None
        self.client: subprocess.Popen | None = None
        self.result: dict | None = None
        self._threads: list[threading.Thread] = []

    def __repr__(self) -> str:
        return f"CrossTraffic({self.src.index}->{self.dst.index} {self.rate} via {self.tool})"

    def _wait_line(self, p: subprocess.Popen, needle: str, timeout: float) -> bytes:
        deadline = time.monotonic() + timeout
        buf = b""
        fd = p.stdout.fileno()
        while time.monotonic() < deadline:
            r, _, _ = select.select([fd], [], [], 0.05)
            if r:
                chunk = os.read(fd, 4096)
                buf += chunk
                if needle.encode() in buf:
                    return buf
                if not chunk:  # EOF: it exited
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        p.wait(timeout=1.0)
                    raise TestbedError(
                        f"cross-traffic server exited: {buf.decode(errors='replace').strip()[-300:]}")
        raise TestbedError(f"cross-traffic server not ready after {timeout:.0f}s")

    @staticmethod
    def _drain(p: subprocess.Popen, head: bytes = b"") -> threading.Thread:
        """Read p.stdout to EOF in the background (a full pipe would stall the
        tool); the text ends up in p.chronolink_output."""
        p.chronolink_output = head  # type: ignore[attr-defined]

        def run() -> None:
            chunks = [head]
            with contextlib.suppress(Exception):
                while True:
                    c = os.read(p.stdout.fileno(), 65536)
                    if not c:
                        break
                    chunks.append(c)
                    if sum(map(len, chunks)) > (4 << 20):  # keep the tail only
                        chunks = [b"".join(chunks)[-(1 << 20):]]
            p.chronolink_output = b"".join(chunks)  # type: ignore[attr-defined]

        t = threading.Thread(target=run, name=f"drain-{p.pid}", daemon=True)
        t.start()
        return t

    def start(self) -> "CrossTraffic":
        secs = self.seconds if self.seconds else 86400
        dst_addr, src_addr = self.dst.address, self.src.address
        if self.tool == "iperf3":
            srv = ["iperf3", "-s", "-1", "-B", dst_addr, "-p", str(self.port), "-i", "0",
                   "--forceflush"]
            cli = ["iperf3", "-u", "-c", dst_addr, "-B", src_addr, "-p", str(self.port),
                   "-b", self.rate, "-l", str(self.length), "-t", str(int(max(1, round(secs)))),
                   "-i", "0", "-J"]
            ready = "Server listening"
        else:
            me = os.path.abspath(__file__)
            srv = [sys.executable, me, "sink", "--bind", dst_addr, "--port", str(self.port)]
            cli = [sys.executable, me, "blast", "--dst", dst_addr, "--port", str(self.port),
                   "--rate", self.rate, "--length", str(self.length), "--seconds", str(secs)]
            ready = "sink ready"
        if self.cpus is not None:
            pin = ["taskset", "-c", ",".join(map(str, self.cpus))]
            srv, cli = pin + srv, pin + cli
        self.server = self.tb.popen(self.dst, srv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            head = self._wait_line(self.server, ready, self.start_timeout)
            self._threads.append(self._drain(self.server, head))
            self.client = self.tb.popen(self.src, cli, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT)
            self._threads.append(self._drain(self.client))
            # iperf3 exits at once when it cannot connect: catch that here
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.client.wait(timeout=0.3)
            if self.client.poll() is not None and self.client.returncode != 0:
                self._threads[-1].join(timeout=2.0)
                txt = self.client.chronolink_output.decode(errors="replace")
                raise TestbedError(f"cross-traffic client failed: {txt.strip()[-500:]}")
        except BaseException:
            self.stop()
            raise
        _log(f"cross traffic {self.src.index}->{self.dst.index} at {self.rate} ({self.tool}) started")
        return self

    def wait(self, timeout: float | None = None) -> dict | None:
        """Wait until a --seconds run finishes (at most `timeout`), then stop."""
        if self.client is not None:
            limit = timeout if timeout is not None else (self.seconds or 0) + 10
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.client.wait(timeout=limit)
        return self.stop()

    def stop(self) -> dict | None:
        """Stop client then server; returns the client's summary (or None)."""
        client, server = self.client, self.server
        self.client = self.server = None
        if client is not None:
            # SIGINT makes iperf3 end the test and print its JSON summary
            self.tb.terminate(client, timeout=3.0, sig=signal.SIGINT)
        if server is not None:
            self.tb.terminate(server, timeout=2.0, sig=signal.SIGTERM)
        for t in self._threads:
            t.join(timeout=2.0)
        self._threads = []
        for p in (client, server):
            if p is not None:
                with contextlib.suppress(Exception):
                    p.stdout.close()
        if client is not None and self.result is None:
            self.result = self._parse(getattr(client, "chronolink_output", b"").decode(errors="replace"))
            self.result["client_rc"] = client.returncode
        return self.result

    def _parse(self, text: str) -> dict:
        res: dict[str, Any] = {"src": self.src.index, "dst": self.dst.index, "rate": self.rate,
                               "tool": self.tool, "cpus": self.cpus}
        try:
            if self.tool == "iperf3":
                j = json.loads(text[text.index("{"):])
                s = j.get("end", {}).get("sum", {})
                res.update({"seconds": s.get("seconds"), "bits_per_second": s.get("bits_per_second"),
                            "packets": s.get("packets"), "lost_percent": s.get("lost_percent")})
                if j.get("error"):
                    res["error"] = j["error"]
            else:
                res.update(json.loads(text.strip().splitlines()[-1]))
        except (ValueError, IndexError, AttributeError):
            res["raw_tail"] = text[-300:]
        return res

    def __enter__(self) -> "CrossTraffic":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _parse_rate(rate: str) -> float:
    m = re.match(r"^(\d+(?:\.\d+)?)([kKmMgG]?)$", rate)
    if not m:
        raise TestbedError(f"bad rate {rate!r}")
    mult = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2).lower()]
    return float(m.group(1)) * mult


def _blast(dst: str, port: int, rate: str, length: int, seconds: float) -> int:
    """Paced UDP sender: `length`-byte datagrams at `rate` bit/s (payload)."""
    pps = _parse_rate(rate) / (8 * length)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    payload = b"\0" * length
    sent = errors = 0
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    t0 = time.monotonic()
    end = t0 + seconds
    tick = 0.001
    while not stop.is_set():
        now = time.monotonic()
        if now >= end:
            break
        due = int((now - t0) * pps) - sent
        for _ in range(max(0, due)):
            try:
                s.sendto(payload, (dst, port))
            except OSError:
                errors += 1
            sent += 1
        time.sleep(tick)
    el = time.monotonic() - t0
    print(json.dumps({"seconds": el, "packets": sent, "errors": errors,
                      "bits_per_second": sent * length * 8 / el if el else 0}), flush=True)
    return 0


def _sink(bind: str, port: int) -> int:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    s.bind((bind, port))
    s.settimeout(0.5)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print("sink ready", flush=True)
    n = 0
    while not stop.is_set():
        try:
            s.recv(65536)
            n += 1
        except socket.timeout:
            pass
        except InterruptedError:
            pass
    print(json.dumps({"received": n}), flush=True)
    return 0


# --------------------------------------------------------------------------
# CLI

def _write_state(path: str, desc: dict) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(desc, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def _cmd_up(a: argparse.Namespace) -> int:
    tbf = {"rate": a.tbf_rate, "burst": a.tbf_burst, "latency": a.tbf_latency} if a.tbf_rate else None
    tb = Testbed(a.name, nodes=a.nodes, topology=a.topology, tbf=tbf, ipv6=a.ipv6,
                 static_neigh=not a.no_static_neigh, handle_signals=True)
    try:
        desc = tb.up()
    except BaseException:
        tb.down()
        raise
    # the namespaces outlive this process: detach the cleanup hooks
    tb._owned = False
    tb.down()
    if a.state:
        _write_state(a.state, desc)
    print(json.dumps(desc, indent=2))
    return EXIT_OK


def _cmd_down(a: argparse.Namespace) -> int:
    removed = teardown(a.name)
    _log(f"{a.name}: removed {len(removed)} namespaces" + (f" {removed}" if removed else ""))
    return EXIT_OK


def _cmd_show(a: argparse.Namespace) -> int:
    tb = Testbed.attach(a.name)
    print(json.dumps(tb.describe(), indent=2))
    return EXIT_OK


def _cmd_exec(a: argparse.Namespace) -> int:
    cmd = list(a.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise TestbedError("exec: no command given (use: exec --name P --node I -- cmd ...)")
    _check_root()
    ns = f"{a.name}-r" if a.node in ("r", "router", "0") else f"{a.name}-n{int(a.node)}"
    if ns not in list_namespaces(a.name):
        raise TestbedError(f"no namespace {ns}")
    os.execvp("ip", ["ip", "netns", "exec", ns, *cmd])
    return EXIT_ERROR  # not reached


def _cmd_cross(a: argparse.Namespace) -> int:
    tb = Testbed.attach(a.name)
    results = []
    with tb:
        flows = [(a.src, a.dst)] + ([(a.dst, a.src)] if a.both else [])
        cpus = [int(c) for c in a.cpus.split(",")] if a.cpus else None
        cts = [tb.cross_traffic(s, d, a.rate, seconds=a.seconds, length=a.length, tool=a.tool,
                                port=a.port if i == 0 else None, cpus=cpus) for i, (s, d) in enumerate(flows)]
        try:
            for ct in cts:
                ct.start()
            deadline = time.monotonic() + a.seconds + 10
            for ct in cts:
                results.append(ct.wait(timeout=max(0.1, deadline - time.monotonic())))
        finally:
            for ct in cts:
                ct.stop()
    print(json.dumps(results, indent=2))
    return EXIT_OK


def _cmd_probe_loss(a: argparse.Namespace) -> int:
    tb = Testbed.attach(a.name)
    node = "r" if a.node in ("r", "router", "0") else int(a.node)
    if a.stats:
        out = tb.probe_loss_stats(node, dev=a.dev, loader=a.loader)
    elif a.detach:
        out = tb.probe_loss_detach(node, dev=a.dev, loader=a.loader)
    else:
        if a.fraction is None:
            raise TestbedError("probe-loss: give --fraction F (or --stats, or --detach)")
        # it outlives this process, like the namespaces: `down` removes it
        out = tb.probe_loss(node, a.fraction, types=a.types.split(","), port=a.port, dev=a.dev,
                            loader=a.loader, keep=True)
    print(json.dumps(out, indent=2))
    return EXIT_OK


def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="chronolink-testbed",
                                description="chronolink network-namespace test bed (needs root)")
    sub = p.add_subparsers(dest="cmd", required=True)

    u = sub.add_parser("up", help="create (or re-create) a test bed")
    u.add_argument("--name", required=True, help="namespace prefix PFX (PFX-n1.., PFX-r)")
    u.add_argument("--nodes", type=int, default=2)
    u.add_argument("--topology", choices=["direct", "routed"], default="direct")
    u.add_argument("--tbf-rate", help="tbf rate on router egress veths, e.g. 200mbit")
    u.add_argument("--tbf-burst", default=DEFAULT_TBF["burst"])
    u.add_argument("--tbf-latency", default=DEFAULT_TBF["latency"])
    u.add_argument("--state", help="also write the JSON description here")
    u.add_argument("--ipv6", action="store_true", help="keep IPv6 enabled in the namespaces")
    u.add_argument("--no-static-neigh", action="store_true",
                   help="use ARP instead of permanent neighbour entries")
    u.set_defaults(func=_cmd_up)

    d = sub.add_parser("down", help="kill processes in and delete PFX's namespaces")
    d.add_argument("--name", required=True)
    d.set_defaults(func=_cmd_down)

    s = sub.add_parser("show", help="print the JSON description of an existing test bed")
    s.add_argument("--name", required=True)
    s.set_defaults(func=_cmd_show)

    e = sub.add_parser("exec", help="run a command in a node (r = router): exec --name P --node 1 -- cmd")
    e.add_argument("--name", required=True)
    e.add_argument("--node", required=True)
    e.add_argument("cmd", nargs=argparse.REMAINDER)
    e.set_defaults(func=_cmd_exec)

    c = sub.add_parser("cross-traffic", help="UDP load between two nodes for S seconds")
    c.add_argument("--name", required=True)
    c.add_argument("--from", dest="src", type=int, required=True)
    c.add_argument("--to", dest="dst", type=int, required=True)
    c.add_argument("--rate", default="100M")
    c.add_argument("--seconds", type=float, default=10.0)
    c.add_argument("--length", type=int, default=1400)
    c.add_argument("--port", type=int)
    c.add_argument("--both", action="store_true", help="also the reverse direction")
    c.add_argument("--tool", choices=["auto", "iperf3", "python"], default="auto")
    c.add_argument("--cpus", help="run the load on these CPUs only, e.g. 1 or 2,3 (its softirqs then run there)")
    c.set_defaults(func=_cmd_cross)

    pl = sub.add_parser("probe-loss",
                        help="drop a fraction of the probes a node sends (tc BPF), or read/remove it")
    pl.add_argument("--name", required=True)
    pl.add_argument("--node", required=True, help="node index (r = router, needs --dev)")
    pl.add_argument("--dev", help="device (default: the node's veth)")
    act = pl.add_mutually_exclusive_group()
    act.add_argument("--fraction", type=float, help="attach: drop this fraction, 0..1")
    act.add_argument("--stats", action="store_true", help="print the filter's counters")
    act.add_argument("--detach", action="store_true", help="remove the filter and its pin")
    pl.add_argument("--types", default="all",
                    help="attach: forward,reverse,followup,pilot or all (default)")
    pl.add_argument("--port", type=int, default=7319, help="attach: the agents' probe port")
    pl.add_argument("--loader", help="chronolink-probe-loss binary (default: found in build*/tools)")
    pl.set_defaults(func=_cmd_probe_loss)

    b = sub.add_parser("blast", help=argparse.SUPPRESS)
    b.add_argument("--dst", required=True)
    b.add_argument("--port", type=int, required=True)
    b.add_argument("--rate", required=True)
    b.add_argument("--length", type=int, default=1400)
    b.add_argument("--seconds", type=float, default=10.0)
    b.set_defaults(func=lambda a: _blast(a.dst, a.port, a.rate, a.length, a.seconds))

    k = sub.add_parser("sink", help=argparse.SUPPRESS)
    k.add_argument("--bind", required=True)
    k.add_argument("--port", type=int, required=True)
    k.set_defaults(func=lambda a: _sink(a.bind, a.port))
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except TestbedPermissionError as e:
        print(f"chronolink-testbed: {e}", file=sys.stderr)
        return EXIT_NOT_PERMITTED
    except TestbedError as e:
        print(f"chronolink-testbed: error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
