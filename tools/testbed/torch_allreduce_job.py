#!/usr/bin/python3
"""One rank of a real multi-rank PyTorch gloo job, profiled: the trace producer
of the test bed (docs/testbed.md, "Clock shim and the PyTorch workload").

Run it with Debian's /usr/bin/python3 (python3-torch 1.13, CPU, no Kineto),
one process per rank, usually under the clock shim
(tools/testbed/trace_workload.py starts it). Each iteration all_reduces
tensors of a few sizes with some matmul in between, inside
torch.autograd.profiler.profile, and the rank writes

  OUT/rank<r>.json                          export_chrome_trace: a bare JSON array,
                                            ts/dur in integer µs, ts relative to the
                                            profiler's start
  OUT/rank<r>.json.chronolink-origin.json   what ts = 0 means on this host's clock

Origin: torch 1.13 computes every ts as (event start in µs) minus
trace_start_us, its own CLOCK_REALTIME reading (in µs) taken when the
profiler starts, and exposes that value as profile.kineto_results.
trace_start_us(). origin_ns = trace_start_us * 1000 is therefore exact
(origin_uncertainty_ns 0): origin_ns + ts * 1000 is the profiler's stamp of
the event floored to the µs (ts_resolution_ns 1000). time.time_ns() read just
before and after the profiler starts brackets it (bracket_ns), and is the
fallback origin (midpoint, half the width as uncertainty) for a torch that
does not expose trace_start_us. All of these are the process's REALTIME,
i.e. the node's skewed clock under the shim.

`unskewed` holds readings of the kernel's CLOCK_REALTIME made with the raw
system call, which no preload library can change: the ground truth a test
compares the skewed figures with. It is test-only data.

Every wait is bounded: process-group initialisation and each collective by
--timeout-s, the whole rank by --job-timeout-s (SIGALRM, exit 3).
Exit status: 0 ok, 2 usage, 3 timeout, 4 torch missing or unsuitable, 1 other error.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import os
import platform
import signal
import socket
import sys
import time

SCHEMA = "chronolink.trace_origin.v1"
EXIT_ERROR, EXIT_USAGE, EXIT_TIMEOUT, EXIT_NO_TORCH = 1, 2, 3, 4
DEFAULT_SIZES = (1 << 10, 1 << 14, 1 << 18)  # float32 elements: 4 KiB, 64 KiB, 1 MiB
_SYS_CLOCK_GETTIME = {"x86_64": 228, "aarch64": 113}.get(platform.machine())


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded once: a bracket should hold only the read


def _unskewed_realtime_ns() -> int | None:
    """CLOCK_REALTIME by the raw system call: the kernel's clock, untouched by the shim."""
    if _SYS_CLOCK_GETTIME is None:
        return None
    ts = _Timespec()
    if _LIBC.syscall(_SYS_CLOCK_GETTIME, 0, ctypes.byref(ts)) != 0:
        return None
    return ts.tv_sec * 1_000_000_000 + ts.tv_nsec


def _fail(code: int, msg: str) -> None:
    print(f"torch_allreduce_job: {msg}", file=sys.stderr, flush=True)
    # os._exit: gloo's threads may be blocked in a collective; a normal exit would wait on them.
    os._exit(code)


def _arm_job_timeout(seconds: float, rank: int) -> None:
    def on_alarm(signum, frame):  # noqa: ARG001
        _fail(EXIT_TIMEOUT, f"rank {rank}: the job did not finish within {seconds:.0f} s")
    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)


def _write_atomically(path: str, write) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _one_iteration(torch, dist, tensors, weights) -> None:
    for t in tensors:
        # compute between collectives: the matmul a training step would do
        weights[0] = torch.tanh(weights[0] @ weights[1])
        dist.all_reduce(t)
        t.mul_(0.5)


def _profile(torch, dist, a: argparse.Namespace) -> tuple:
    tensors = [torch.full((n,), float(a.rank + 1)) for n in a.sizes]
    weights = [torch.rand(a.matmul, a.matmul), torch.rand(a.matmul, a.matmul) / a.matmul]
    _one_iteration(torch, dist, tensors, weights)  # warm-up outside the profile
    dist.barrier()
    unskewed_before = _unskewed_realtime_ns()
    before = time.time_ns()
    with torch.autograd.profiler.profile() as prof:
        after = time.time_ns()
        unskewed_after = _unskewed_realtime_ns()
        for i in range(a.iterations):
            with torch.autograd.profiler.record_function(f"iteration#{i}"):
                _one_iteration(torch, dist, tensors, weights)
        unskewed_last = _unskewed_realtime_ns()  # just after the last event ended
    truth = {"start_bracket_ns": [unskewed_before, unskewed_after],
             "after_last_event_ns": unskewed_last}
    return prof, (before, after), truth


def _origin(prof, bracket: tuple[int, int]) -> tuple[int, int, str]:
    results = getattr(prof, "kineto_results", None)
    start_us = getattr(results, "trace_start_us", None)
    if callable(start_us):
        origin = int(start_us()) * 1000
        # floor to the µs: the start may lie up to 999 ns before time.time_ns()'s first read
        if not bracket[0] - 1000 < origin <= bracket[1]:
            raise RuntimeError(f"trace_start_us {origin} ns lies outside the bracket {bracket}")
        return origin, 0, ("profile.kineto_results.trace_start_us() * 1000: the CLOCK_REALTIME "
                           "instant (µs) torch subtracted from every event start")
    mid = bracket[0] + (bracket[1] - bracket[0]) // 2
    return mid, (bracket[1] - bracket[0] + 1) // 2, (
        "midpoint of time.time_ns() read just before and after the profiler started "
        "(this torch does not expose trace_start_us)")


def _write_outputs(torch, prof, bracket, truth, a: argparse.Namespace) -> dict:
    trace = os.path.join(a.out, f"rank{a.rank}.json")
    _write_atomically(trace, prof.export_chrome_trace)
    origin_ns, uncertainty, how = _origin(prof, bracket)
    meta = {
        "schema": SCHEMA, "origin_ns": origin_ns, "clock": "host_realtime", "how": how,
        "origin_uncertainty_ns": uncertainty, "bracket_ns": list(bracket),
        "ts_unit": "us", "ts_resolution_ns": 1000,
        "host": a.host, "rank": a.rank, "world_size": a.world_size,
        "trace": os.path.basename(trace),
        "producer": {"name": "torch", "version": torch.__version__,
                     "profiler": "torch.autograd.profiler.profile, export_chrome_trace (no Kineto)"},
        "workload": {"iterations": a.iterations, "sizes": list(a.sizes), "matmul": a.matmul,
                     "backend": "gloo"},
        "unskewed": truth,
    }

    def dump(path: str) -> None:
        with open(path, "w") as f:
            json.dump(meta, f, indent=1)
            f.write("\n")
    _write_atomically(trace + ".chronolink-origin.json", dump)
    return {"rank": a.rank, "host": a.host, "trace": trace, "origin_ns": origin_ns}


def _import_torch():
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        _fail(EXIT_NO_TORCH, f"cannot import torch with {sys.executable} ({e}); use Debian's "
              "/usr/bin/python3 with python3-torch installed")
    if torch.autograd.kineto_available():
        # Kineto's export writes its own JSON with absolute times; this job's origin rule is the
        # legacy export's (ts relative to trace_start_us).
        _fail(EXIT_NO_TORCH, f"torch {torch.__version__} has Kineto; this workload expects a build "
              "without it (Debian python3-torch)")
    if not dist.is_available() or not dist.is_gloo_available():
        _fail(EXIT_NO_TORCH, f"torch {torch.__version__} has no gloo backend")
    return torch, dist


def run(a: argparse.Namespace) -> dict:
    _arm_job_timeout(a.job_timeout_s, a.rank)
    if a.ifname:
        os.environ["GLOO_SOCKET_IFNAME"] = a.ifname
    torch, dist = _import_torch()
    torch.set_num_threads(1)  # ranks share the machine's cores
    dist.init_process_group("gloo", init_method=f"tcp://{a.master_addr}:{a.master_port}",
                            rank=a.rank, world_size=a.world_size,
                            timeout=datetime.timedelta(seconds=a.timeout_s))
    try:
        prof, bracket, truth = _profile(torch, dist, a)
        summary = _write_outputs(torch, prof, bracket, truth, a)
        dist.barrier()  # nobody tears the group down while another rank still profiles
    finally:
        dist.destroy_process_group()
    return summary


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: comma-separated element counts") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: element counts must be >= 1")
    return sizes


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world-size", type=int, required=True)
    p.add_argument("--master-addr", required=True)
    p.add_argument("--master-port", type=int, required=True)
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--out", required=True, help="directory for rank<r>.json and its origin file")
    p.add_argument("--host", default=socket.gethostname(),
                   help="host name recorded in the origin file (default: this machine's)")
    p.add_argument("--ifname", help="network interface gloo uses (GLOO_SOCKET_IFNAME)")
    p.add_argument("--sizes", type=_sizes, default=DEFAULT_SIZES,
                   help="comma-separated float32 element counts all_reduced each iteration")
    p.add_argument("--matmul", type=int, default=96, help="side of the square matmul between collectives")
    p.add_argument("--timeout-s", type=float, default=30.0,
                   help="bound on process-group initialisation and on each collective")
    p.add_argument("--job-timeout-s", type=float, default=120.0, help="bound on the whole rank")
    return p


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    if not (0 <= a.rank < a.world_size) or a.iterations < 1 or a.matmul < 1:
        print("torch_allreduce_job: need 0 <= rank < world-size, iterations >= 1, matmul >= 1",
              file=sys.stderr)
        return EXIT_USAGE
    if a.timeout_s <= 0 or a.job_timeout_s <= 0:
        print("torch_allreduce_job: timeouts must be positive", file=sys.stderr)
        return EXIT_USAGE
    os.makedirs(a.out, exist_ok=True)
    try:
        summary = run(a)
    except Exception as e:  # noqa: BLE001 - one clear line, then a non-zero exit
        _fail(EXIT_ERROR, f"rank {a.rank}: {type(e).__name__}: {e}")
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
