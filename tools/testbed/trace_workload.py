#!/usr/bin/env python3
"""The test bed's trace producer: a real PyTorch gloo job, one rank per node,
each rank under the clock shim with its node's virtual clock.

Module use (next to agents the caller starts on the same bed):

    sys.path.insert(0, "tools/testbed")
    from testbed import Testbed
    import trace_workload as tw

    clocks = tw.default_clocks(4, t0_ns=time.time_ns())   # {node: NodeClock}
    with Testbed("tw1", nodes=4, topology="routed") as tb:
        # agents: tb.popen(i, [agent, ..., "--test-mode", *clocks[i].agent_args()])
        result = tw.run_on_testbed(tb, clocks, "out/tw1", shim=tw.find_shim())
    # out/tw1/rank<r>.json (+ .chronolink-origin.json), truth.json, workload.json

`run_loopback(clocks, out_dir, shim=...)` runs the same ranks as plain
processes on 127.0.0.1 (no namespaces, no root): the unit test's way.

CLI (stdlib only; the ranks themselves run under Debian's /usr/bin/python3,
which has python3-torch):

    sudo tools/testbed/trace_workload.py --nodes 4 --out out/tw
    tools/testbed/trace_workload.py --loopback --nodes 2 --out /tmp/tw \\
        --clock 1:30000000:5000 --clock 2:-20000000:-3000

Outputs in OUT: each rank's trace and origin file (tools/testbed/
torch_allreduce_job.py), logs/rank<r>.log, truth.json = {host: {offset_ns,
drift_ppm, t0_ns, node, rank, address}} (the virtual clock of the host's
node, tools/testbed/truth.py inverts it), and workload.json (what ran).
Every wait is bounded; on an error, a timeout or a signal every rank is
stopped (and, for a bed this module built, the namespaces removed).
Exit status: 0 ok, 1 error, 2 usage, 77 not permitted (not root for namespaces).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any, Callable, Mapping

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
JOB = os.path.join(HERE, "torch_allreduce_job.py")
TORCH_PYTHON = "/usr/bin/python3"
SHIM_NAME = "libchronolink_clock_shim.so"
DEFAULT_PORT = 29500
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_NOT_PERMITTED = 0, 1, 2, 77

# Offsets (ms) and drifts (ppm) of the default clocks: spread over ±50 ms and
# ±100 ppm as the end-to-end test asks; node 1 is the unskewed reference.
_DEFAULT_OFFSETS_MS = (0, 37, -46, 49, -21, 12, -33, 25)
_DEFAULT_DRIFTS_PPM = (0, 80, -95, -60, 100, -30, 55, -75)


class WorkloadError(RuntimeError):
    """A rank failed, timed out, or left no trace."""


@dataclasses.dataclass(frozen=True)
class NodeClock:
    """A node's virtual clock v = t + offset_ns + drift_ppm·1e-6·(t − t0_ns),
    handed identically to its agent (--virtual-*) and to the shim (env)."""
    offset_ns: int
    drift_ppm: float
    t0_ns: int

    def _texts(self) -> tuple[str, str, str]:
        # repr of the float: the shortest decimal that parses back to the same double,
        # in the agent (std::from_chars), the shim (strtod) and truth.py (Fraction(repr)).
        return str(int(self.offset_ns)), repr(float(self.drift_ppm)), str(int(self.t0_ns))

    def shim_env(self, shim: str) -> dict[str, str]:
        off, drift, t0 = self._texts()
        return {"LD_PRELOAD": shim, "CHRONOLINK_SHIM_OFFSET_NS": off,
                "CHRONOLINK_SHIM_DRIFT_PPM": drift, "CHRONOLINK_SHIM_T0_NS": t0}

    def agent_args(self) -> list[str]:
        off, drift, t0 = self._texts()
        return ["--virtual-offset-ns", off, "--virtual-drift-ppm", drift, "--virtual-t0-ns", t0]

    def to_dict(self) -> dict:
        return {"offset_ns": int(self.offset_ns), "drift_ppm": float(self.drift_ppm),
                "t0_ns": int(self.t0_ns)}


@dataclasses.dataclass(frozen=True)
class StateFileClock:
    """A node clock that evolves (oscillator wander, a daemon's discipline):
    the test bed's clock state file (docs/testbed.md "Clocks as deployed"),
    which the agent reads (--virtual-clock-state) and the ranks through the
    discipline shim in its wall-only mode: their REALTIME is the node's,
    their monotonic clocks the kernel's (absolute deadlines stay right).
    `shim` is libchronolink_discipline_shim.so; the job's own shim argument
    is not used for this clock."""
    state_file: str
    shim: str

    def shim_env(self, shim: str) -> dict[str, str]:
        return {"LD_PRELOAD": self.shim, "CHRONOLINK_CLOCK_STATE": self.state_file,
                "CHRONOLINK_CLOCK_STATE_WALL_ONLY": "1"}

    def agent_args(self) -> list[str]:
        return ["--virtual-clock-state", self.state_file]

    def to_dict(self) -> dict:
        return {"state_file": self.state_file}


RankClock = NodeClock | StateFileClock


@dataclasses.dataclass
class WorkloadResult:
    out_dir: str
    truth_path: str
    ranks: list[dict]  # per rank: node, rank, host, trace, origin file, origin_ns, log


def default_clocks(nodes: int, t0_ns: int) -> dict[int, NodeClock]:
    out = {}
    for i in range(1, nodes + 1):
        if i <= len(_DEFAULT_OFFSETS_MS):
            off_ms, drift = _DEFAULT_OFFSETS_MS[i - 1], _DEFAULT_DRIFTS_PPM[i - 1]
        else:  # deterministic, still within ±50 ms and ±100 ppm
            off_ms, drift = (i * 37) % 101 - 50, (i * 53) % 201 - 100
        out[i] = NodeClock(off_ms * 1_000_000, float(drift), t0_ns)
    return out


def find_shim(explicit: str | None = None) -> str:
    """The built shim: `explicit`, else $CHRONOLINK_CLOCK_SHIM, else build/tools/."""
    candidates = [explicit] if explicit else [os.environ.get("CHRONOLINK_CLOCK_SHIM"),
                                              os.path.join(ROOT, "build", "tools", SHIM_NAME)]
    for c in candidates:
        if c and os.path.isfile(c):
            return os.path.abspath(c)
    raise WorkloadError(f"clock shim not found (tried {[c for c in candidates if c]}); build it with "
                        "`cmake --build build --target chronolink_clock_shim` or pass --shim")


def free_tcp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------
# running the ranks

@dataclasses.dataclass
class _Rank:
    node: int
    rank: int
    host: str
    log: str
    proc: subprocess.Popen | None = None


def _job_argv(python: str, r: _Rank, world: int, master: str, port: int, out_dir: str,
              iterations: int, ifname: str, timeout_s: float, job_timeout_s: float,
              extra: list[str]) -> list[str]:
    return [python, JOB, "--rank", str(r.rank), "--world-size", str(world),
            "--master-addr", master, "--master-port", str(port), "--iterations", str(iterations),
            "--out", out_dir, "--host", r.host, "--ifname", ifname,
            "--timeout-s", str(timeout_s), "--job-timeout-s", str(job_timeout_s), *extra]


def _tail(path: str, n: int = 800) -> str:
    with contextlib.suppress(OSError):
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - n))
            return f.read().decode(errors="replace").strip()
    return "(no log)"


def _wait_all(ranks: list[_Rank], deadline: float) -> None:
    """Until every rank exits 0; raises on the first failure or at the deadline."""
    while True:
        pending = [r for r in ranks if r.proc.poll() is None]
        failed = [r for r in ranks if r.proc.returncode not in (None, 0)]
        if failed:
            r = failed[0]
            raise WorkloadError(f"rank {r.rank} (node {r.node}) exited {r.proc.returncode}: "
                                f"{_tail(r.log)}")
        if not pending:
            return
        if time.monotonic() > deadline:
            raise WorkloadError("ranks " + ", ".join(str(r.rank) for r in pending) +
                                " still running at the deadline; last log lines: " +
                                " | ".join(_tail(r.log, 300) for r in pending))
        time.sleep(0.05)


def _stop(procs: list[subprocess.Popen], timeout: float = 3.0) -> None:
    """SIGTERM each rank's process group, SIGKILL what is left after `timeout`."""
    live = [p for p in procs if p is not None and p.poll() is None]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in live:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, sig)
        end = time.monotonic() + timeout
        for p in live:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=max(0.0, end - time.monotonic()))
        live = [p for p in live if p.poll() is None]
        if not live:
            return


def _collect(ranks: list[_Rank], clocks: Mapping[int, RankClock], addresses: Mapping[int, str],
             out_dir: str, meta: dict) -> WorkloadResult:
    rows, truth = [], {}
    for r in ranks:
        trace = os.path.join(out_dir, f"rank{r.rank}.json")
        origin_path = trace + ".chronolink-origin.json"
        try:
            with open(origin_path) as f:
                origin = json.load(f)
        except (OSError, ValueError) as e:
            raise WorkloadError(f"rank {r.rank}: no usable origin file {origin_path}: {e}") from None
        if not os.path.isfile(trace):
            raise WorkloadError(f"rank {r.rank}: no trace {trace}")
        rows.append({"node": r.node, "rank": r.rank, "host": r.host, "trace": trace,
                     "origin_file": origin_path, "origin_ns": origin["origin_ns"], "log": r.log})
        truth[r.host] = {**clocks[r.node].to_dict(), "node": r.node, "rank": r.rank,
                         "address": addresses[r.node]}
    truth_path = os.path.join(out_dir, "truth.json")
    _write_json(truth_path, truth)
    _write_json(os.path.join(out_dir, "workload.json"), {**meta, "ranks": rows})
    return WorkloadResult(out_dir=out_dir, truth_path=truth_path, ranks=rows)


def _write_json(path: str, obj: Any) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def _run(spawn: Callable[[_Rank, list[str], dict[str, str]], subprocess.Popen],
         clocks: Mapping[int, RankClock], addresses: Mapping[int, str], master: str, ifname: str,
         out_dir: str, *, shim: str, iterations: int, port: int, python: str,
         hosts: Mapping[int, str] | None, timeout_s: float, job_timeout_s: float,
         extra_args: list[str] | None) -> WorkloadResult:
    if not os.path.isfile(shim):
        raise WorkloadError(f"clock shim {shim} does not exist")
    if not clocks:
        raise WorkloadError("no nodes to run on")
    out_dir = os.path.abspath(out_dir)
    os.makedirs(os.path.join(out_dir, "logs"), exist_ok=True)
    nodes = sorted(clocks)
    ranks = [_Rank(node=n, rank=k, host=(hosts or {}).get(n, f"node{n}"),
                   log=os.path.join(out_dir, "logs", f"rank{k}.log")) for k, n in enumerate(nodes)]
    started = time.time()
    try:
        for r in ranks:
            argv = _job_argv(python, r, len(ranks), master, port, out_dir, iterations, ifname,
                             timeout_s, job_timeout_s, list(extra_args or []))
            env = {**clocks[r.node].shim_env(shim), "OMP_NUM_THREADS": "1"}
            r.proc = spawn(r, argv, env)
        _wait_all(ranks, time.monotonic() + job_timeout_s + 10.0)
    finally:
        _stop([r.proc for r in ranks])
    meta = {"master": f"{master}:{port}", "world_size": len(ranks), "iterations": iterations,
            "shim": shim, "python": python, "started_unix_s": started,
            "seconds": round(time.time() - started, 3)}
    return _collect(ranks, clocks, addresses, out_dir, meta)


def run_on_testbed(tb: Any, clocks: Mapping[int, RankClock], out_dir: str, *, shim: str,
                   iterations: int = 20, port: int = DEFAULT_PORT, python: str = TORCH_PYTHON,
                   hosts: Mapping[int, str] | None = None, timeout_s: float = 60.0,
                   job_timeout_s: float = 180.0, extra_args: list[str] | None = None) -> WorkloadResult:
    """One rank per node of `clocks` (rank = position in node order) inside its
    namespace of the existing, running Testbed `tb`; master on the first node.
    The ranks are started through tb.popen, so the bed's cleanup also stops them."""
    addresses = {n: tb.address(n) for n in clocks}
    first = min(clocks)

    def spawn(r: _Rank, argv: list[str], env: dict[str, str]) -> subprocess.Popen:
        # `env` puts the shim on the rank only, not on `ip netns exec` before it.
        with open(r.log, "wb") as log:
            return tb.popen(r.node, ["env", *(f"{k}={v}" for k, v in env.items()), *argv],
                            stdout=log, stderr=subprocess.STDOUT)

    return _run(spawn, clocks, addresses, addresses[first], tb.node(first).ifname, out_dir,
                shim=shim, iterations=iterations, port=port, python=python, hosts=hosts,
                timeout_s=timeout_s, job_timeout_s=job_timeout_s, extra_args=extra_args)


def run_loopback(clocks: Mapping[int, RankClock], out_dir: str, *, shim: str, iterations: int = 20,
                 port: int | None = None, python: str = TORCH_PYTHON,
                 hosts: Mapping[int, str] | None = None, timeout_s: float = 60.0,
                 job_timeout_s: float = 180.0, extra_args: list[str] | None = None) -> WorkloadResult:
    """The same ranks as plain processes on 127.0.0.1: no namespaces, no root."""
    addresses = {n: "127.0.0.1" for n in clocks}

    def spawn(r: _Rank, argv: list[str], env: dict[str, str]) -> subprocess.Popen:
        with open(r.log, "wb") as log:
            return subprocess.Popen(argv, env={**os.environ, **env}, stdin=subprocess.DEVNULL,
                                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    return _run(spawn, clocks, addresses, "127.0.0.1", "lo", out_dir, shim=shim,
                iterations=iterations, port=port or free_tcp_port(), python=python, hosts=hosts,
                timeout_s=timeout_s, job_timeout_s=job_timeout_s, extra_args=extra_args)


# --------------------------------------------------------------------------
# CLI

def _parse_clock(text: str, t0_ns: int) -> tuple[int, NodeClock]:
    try:
        node, off, drift = text.split(":")
        return int(node), NodeClock(int(off), float(drift), t0_ns)
    except ValueError:
        raise WorkloadError(f"--clock {text!r}: want NODE:OFFSET_NS:DRIFT_PPM, e.g. 2:37000000:80") \
            from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="trace_workload.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=4)
    p.add_argument("--out", required=True)
    p.add_argument("--clock", action="append", default=[], metavar="NODE:OFFSET_NS:DRIFT_PPM",
                   help="a node's virtual clock (default: a spread over ±50 ms, ±100 ppm)")
    p.add_argument("--t0-ns", type=int, help="common T0 of the virtual clocks (default: now)")
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--shim", help=f"path of {SHIM_NAME} (default: $CHRONOLINK_CLOCK_SHIM, build/tools/)")
    p.add_argument("--python", default=TORCH_PYTHON, help="interpreter with torch for the ranks")
    p.add_argument("--loopback", action="store_true", help="plain processes on 127.0.0.1, no namespaces")
    p.add_argument("--name", help="test-bed prefix (default tw<pid>)")
    p.add_argument("--timeout-s", type=float, default=60.0)
    p.add_argument("--job-timeout-s", type=float, default=180.0)
    return p


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    if a.nodes < 1 or a.iterations < 1:
        print("trace_workload: --nodes and --iterations must be >= 1", file=sys.stderr)
        return EXIT_USAGE
    t0 = a.t0_ns if a.t0_ns is not None else time.time_ns()
    try:
        clocks = default_clocks(a.nodes, t0)
        for text in a.clock:
            node, clock = _parse_clock(text, t0)
            if node not in clocks:
                raise WorkloadError(f"--clock {text!r}: no node {node} (have 1..{a.nodes})")
            clocks[node] = clock
        kw = dict(shim=find_shim(a.shim), iterations=a.iterations, python=a.python,
                  timeout_s=a.timeout_s, job_timeout_s=a.job_timeout_s)
        if a.loopback:
            result = run_loopback(clocks, a.out, **kw)
        else:
            sys.path.insert(0, HERE)
            from testbed import Testbed, TestbedError, TestbedPermissionError
            try:
                with Testbed(a.name or f"tw{os.getpid()}", nodes=a.nodes, topology="routed") as tb:
                    result = run_on_testbed(tb, clocks, a.out, **kw)
            except TestbedPermissionError as e:
                print(f"trace_workload: {e}", file=sys.stderr)
                return EXIT_NOT_PERMITTED
            except TestbedError as e:
                raise WorkloadError(str(e)) from None
    except WorkloadError as e:
        print(f"trace_workload: error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    for r in result.ranks:
        c = clocks[r["node"]]
        print(f"node {r['node']} rank {r['rank']} {r['host']}: offset {c.offset_ns / 1e6:+.3f} ms, "
              f"drift {c.drift_ppm:+g} ppm -> {r['trace']}")
    print(f"truth: {result.truth_path}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
