#!/usr/bin/env python3
"""chronolink-trace alignment throughput: events/s per core and peak memory
of `chronolink-trace align` on XSpace and on Chrome JSON, against a naive
Python transform (python3-protobuf) of the same data in the same run.

Scenario (docs/PERFORMANCE.md, "Trace alignment throughput"):
  1. chronolink-trace-fixture writes an XLA-like run (full: 8 hosts x 8 GPUs,
     100 steps of 100 ms, 1 560 kernels per GPU per step: 10 075 200 events),
     every host stamped by its own skewed clock, with a truth file.
  2. An offsets.jsonl that solves those clocks exactly (chronolink.offset.v1,
     reference "mean" or the first host's node, an instant every 2 s over the
     span plus 4 s each side), derived from the truth with exact arithmetic.
  3. `chronolink-trace align RUN --offsets F --host N=HOST... --timings` under
     /usr/bin/time -v: wall, user+sys CPU, peak RSS, and the read / align /
     write phases from --timings; events / CPU second.
  4. The same for Chrome JSON: every host exported with export-chrome, the
     JSON files aligned; then one host of about 1 GB of JSON, aligned, for the
     peak RSS of reading it against the file's size.
  5. The naive baseline: protoc --python_out of proto/xplane.proto, a Python
     loop over every event (absolute time, piecewise-linear offset from the
     same offsets file, written back), in its own process under /usr/bin/time.
  6. Checks: sampled events of the C++ output against the truth (|error|, ns)
     and against the Python output (must agree within 1 ns).

  /usr/bin/python3 bench/trace_align_bench.py [--build-dir build] [--json FILE]
  /usr/bin/python3 bench/trace_align_bench.py --quick      # ~100 k events, seconds
  /usr/bin/python3 bench/trace_align_bench.py --selftest   # own arithmetic, no binaries

Needs: the built chronolink-trace and chronolink-trace-fixture, protoc,
python3-protobuf and /usr/bin/time (Debian package `time`). Prints figures;
asserts only that the outputs are right (exit 1 otherwise).
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import filecmp
import importlib
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from typing import Any, Iterable, Sequence

_HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(_HERE)
sys.path.insert(0, os.path.join(REPO, "tools", "testbed"))
from truth import VClock  # noqa: E402

PERIOD_NS = 2_000_000_000      # one solved instant every 2 s, as the leader's default window
MARGIN_NS = 4_000_000_000      # instants this far beyond the profile on both sides
UNCERTAINTY_NS = 40.0          # the sigma written for every solved node (0 for a named reference)
RESIDUAL_NS = 12.0
EDGES_USED = 6                 # k = 6 probe graph
TASK_ENV = "Task Environment"
TIME_BIN = "/usr/bin/time"
AGREE_NS = 1.0                 # C++ and Python outputs must agree this closely (and the JSON path with the
                               # XSpace path: it rounds each instant to the 2^-10 us grid twice, export and
                               # align, at most 2 x 0.49 ns)
TRUTH_NS = 2.0                 # and the C++ output with the truth (stamps are whole ns)


@dataclasses.dataclass(frozen=True)
class Size:
    hosts: int
    gpus: int
    steps: int
    kernels: int
    step_ns: int
    big_json_bytes: int   # target size of the one-host JSON for the memory check (0: skip)


SIZES = {
    "full": Size(hosts=8, gpus=8, steps=100, kernels=1560, step_ns=100_000_000,
                 big_json_bytes=1_000_000_000),
    "quick": Size(hosts=8, gpus=2, steps=10, kernels=611, step_ns=100_000_000,
                  big_json_bytes=20_000_000),
}


def fixture_events(hosts: int, gpus: int, steps: int, kernels: int) -> int:
    """Events chronolink-trace-fixture writes: per host and step a step root and
    ExecuteProgram, per GPU the kernels, XlaModule, 7 collective host events
    (6 ops + all-reduce-done) and 6 NCCL kernels."""
    return hosts * steps * (2 + gpus * (kernels + 14))


# ---------------------------------------------------------------- clocks ---

@dataclasses.dataclass(frozen=True)
class Linear:
    """A clock reading a*t + b at true time t (exact rationals)."""
    a: Fraction
    b: Fraction

    @classmethod
    def of(cls, clock: VClock) -> "Linear":
        # v = t + o + r (t - t0) = (1 + r) t + (o - r t0)
        return cls(1 + clock.rate, clock.offset_ns - clock.rate * clock.t0_ns)

    def at(self, t: Fraction | int) -> Fraction:
        return self.a * t + self.b

    def true_time(self, x: Fraction | int) -> Fraction:
        return (x - self.b) / self.a


def reference_clock(clocks: Sequence[Linear], reference: str) -> Linear:
    """The cluster clock: the mean of all clocks, or the first host's."""
    if reference == "mean":
        n = len(clocks)
        return Linear(sum((c.a for c in clocks), Fraction(0)) / n,
                      sum((c.b for c in clocks), Fraction(0)) / n)
    return clocks[0]


def offsets_lines(clocks: Sequence[Linear], nodes: Sequence[int], reference: str,
                  first_true_ns: int, last_true_ns: int) -> list[dict[str, Any]]:
    """offsets.jsonl lines that solve `clocks` exactly, as the leader writes
    them: offset_ns = node - cluster at the cluster instant t_ns, drift =
    d(node - cluster)/d(cluster). Instants every PERIOD_NS on the cluster
    clock over [first, last] true time plus MARGIN_NS each side."""
    ref = reference_clock(clocks, reference)
    ref_name: int | str = "mean" if reference == "mean" else nodes[0]
    lo = math.floor((ref.at(first_true_ns) - MARGIN_NS) / PERIOD_NS) * PERIOD_NS
    hi = math.ceil((ref.at(last_true_ns) + MARGIN_NS) / PERIOD_NS) * PERIOD_NS
    lines = []
    for t_ns in range(lo, hi + 1, PERIOD_NS):
        t = ref.true_time(t_ns)
        for node, clock in zip(nodes, clocks):
            is_ref = ref_name == node
            lines.append({
                "schema": "chronolink.offset.v1", "node": node, "reference": ref_name,
                "t_ns": t_ns, "offset_ns": float(clock.at(t) - t_ns),
                "drift": float(clock.a / ref.a - 1),
                "uncertainty_ns": 0.0 if is_ref else UNCERTAINTY_NS,
                "residual_ns": 0.0 if is_ref else RESIDUAL_NS, "reachable": True,
                "component": 0, "edges_used": EDGES_USED, "leader": nodes[0]})
    return lines


# ------------------------------------------------- the naive correction ---

class NaiveCorrection:
    """One node's map node clock -> cluster time in integer picoseconds, as a
    straightforward Python programmer writes it from docs/formats.md and
    docs/trace-correction.md: offsets interpolated linearly between the solved
    instants (on the node's clock), the nearest instant's drift outside."""

    def __init__(self, knots: Iterable[tuple[int, float, float]]):
        ordered = sorted(knots)
        self.o = [round(o * 1000) for _, o, _ in ordered]                    # ps
        self.x = [t * 1000 + o for (t, _, _), o in zip(ordered, self.o)]     # node clock, ps
        self.d = [d for _, _, d in ordered]

    def to_cluster_ps(self, x: int) -> int:
        xs = self.x
        i = bisect.bisect_right(xs, x) - 1
        if i < 0:
            o = self.o[0] + self.d[0] * (x - xs[0]) / (1 + self.d[0])
        elif i >= len(xs) - 1:
            o = self.o[-1] + self.d[-1] * (x - xs[-1]) / (1 + self.d[-1])
        else:
            o = self.o[i] + (self.o[i + 1] - self.o[i]) * (x - xs[i]) / (xs[i + 1] - xs[i])
        return x - round(o)


def naive_corrections(lines: Iterable[dict[str, Any]]) -> dict[int, NaiveCorrection]:
    knots: dict[int, dict[int, tuple[int, float, float]]] = {}
    for line in lines:
        if line["reachable"]:
            knots.setdefault(line["node"], {})[line["t_ns"]] = (
                line["t_ns"], line["offset_ns"], line["drift"])  # the last line per instant wins
    return {node: NaiveCorrection(k.values()) for node, k in knots.items()}


def read_jsonl(path: str) -> list[dict[str, Any]]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


# ---------------------------------------------------- XSpace in Python ---

def load_pb(pb_dir: str):
    sys.path.insert(0, pb_dir)
    return importlib.import_module("proto.xplane_pb2")


def protoc_python(out_dir: str) -> str:
    """proto/xplane.proto compiled for Python into out_dir (once)."""
    if os.path.exists(os.path.join(out_dir, "proto", "xplane_pb2.py")):
        return out_dir
    os.makedirs(out_dir, exist_ok=True)
    subprocess.run(["protoc", f"--python_out={out_dir}", f"-I{REPO}",
                    os.path.join(REPO, "proto", "xplane.proto")], check=True)
    return out_dir


def read_space(pb, path: str):
    space = pb.XSpace()
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    return space


def task_env_stat(space, name: str):
    """The XStat `name` of the Task Environment plane (None when absent)."""
    for plane in space.planes:
        if plane.name != TASK_ENV:
            continue
        ids = {m.id for m in plane.stat_metadata.values() if m.name == name}
        for stat in plane.stats:
            if stat.metadata_id in ids:
                return stat
    return None


def line_base_ns(space, absolute: bool) -> int:
    if absolute:
        return 0
    stat = task_env_stat(space, "profile_start_time")
    return int(stat.uint64_value) if stat is not None else 0


def host_span_ps(space, base_ns: int) -> tuple[int, int]:
    """First and last instants (ps, host clock) of every timed event and the
    session bounds, as chronolink-trace's aligner takes them."""
    lo, hi = None, None
    for plane in space.planes:
        for line in plane.lines:
            start = (base_ns + line.timestamp_ns) * 1000
            for ev in line.events:
                s = start + ev.offset_ps
                e = s + ev.duration_ps
                if lo is None or s < lo:
                    lo = s
                if hi is None or e > hi:
                    hi = e
    for name in ("profile_start_time", "profile_stop_time"):
        stat = task_env_stat(space, name)
        if stat is not None:
            v = int(stat.uint64_value) * 1000
            lo = v if lo is None else min(lo, v)
            hi = v if hi is None else max(hi, v)
    return lo, hi


def naive_rewrite(planes, base_ns: int, to_cluster_ps, origin_ns: int) -> int:
    """Every event's start and end mapped at their own instants, lines re-based
    on the common origin. Returns the number of events."""
    n = 0
    for plane in planes:
        if plane.name == TASK_ENV:
            continue
        for line in plane.lines:
            start_ps = (base_ns + line.timestamp_ns) * 1000
            mapped_start = to_cluster_ps(start_ps)
            new_ts = mapped_start // 1000 - origin_ns
            new_base_ps = (origin_ns + new_ts) * 1000
            for ev in line.events:
                s = start_ps + ev.offset_ps
                cs = to_cluster_ps(s)
                ce = to_cluster_ps(s + ev.duration_ps)
                ev.offset_ps = cs - new_base_ps
                ev.duration_ps = ce - cs
                n += 1
            if line.duration_ps:
                line.duration_ps = to_cluster_ps(start_ps + line.duration_ps) - mapped_start
            line.timestamp_ns = new_ts
    return n


class PhaseClock:
    """CPU seconds per named phase (process time: what a core spent)."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self._t = time.process_time()

    def end(self, phase: str) -> None:
        now = time.process_time()
        self.phases[phase] = self.phases.get(phase, 0.0) + now - self._t
        self._t = now


def naive_worker(args: argparse.Namespace) -> int:
    """The naive transform, in its own process so /usr/bin/time measures it
    alone. Two passes over the files (the common origin needs every host's
    first instant; holding every parsed host at once would need ~5 GB)."""
    pb = load_pb(args.pb_dir)
    clock = PhaseClock()
    corrections = naive_corrections(read_jsonl(args.offsets))
    node_of = {h.split("=", 1)[1]: int(h.split("=", 1)[0]) for h in args.host}
    hosts = [os.path.basename(f)[: -len(".xplane.pb")] for f in args.files]
    clock.end("offsets")
    first = []
    for path, host in zip(args.files, hosts):
        space = read_space(pb, path)
        clock.end("parse")
        lo, _ = host_span_ps(space, line_base_ns(space, args.absolute))
        first.append(corrections[node_of[host]].to_cluster_ps(lo) // 1000)
        del space
        clock.end("span")
    origin = min(first)
    events = 0
    os.makedirs(args.out, exist_ok=True)
    for path, host in zip(args.files, hosts):
        space = read_space(pb, path)
        clock.end("parse")
        base = line_base_ns(space, args.absolute)
        to_cluster = corrections[node_of[host]].to_cluster_ps
        _, hi = host_span_ps(space, base)
        events += naive_rewrite(space.planes, base, to_cluster, origin)
        for name, value in (("profile_start_time", origin), ("profile_stop_time", to_cluster(hi) // 1000)):
            stat = task_env_stat(space, name)
            if stat is not None:
                stat.uint64_value = value
        clock.end("align")
        with open(os.path.join(args.out, os.path.basename(path)), "wb") as f:
            f.write(space.SerializeToString())
        del space
        clock.end("write")
    print(json.dumps({"events": events, "origin_ns": origin, "phases_cpu_s": clock.phases}))
    return 0


# ------------------------------------------------------------- checks ---

def _lines_by_key(space) -> dict[tuple[str, int], Any]:
    return {(p.name, l.id): l for p in space.planes for l in p.lines}


def sample_indices(n: int, per_line: int) -> list[int]:
    if n <= per_line:
        return list(range(n))
    return sorted({round(i * (n - 1) / (per_line - 1)) for i in range(per_line)})


@dataclasses.dataclass
class CheckResult:
    samples: int = 0
    max_truth_err_ns: float = 0.0    # |C++ aligned - truth|
    max_cxx_py_diff_ns: float = 0.0  # |C++ - Python|
    py_samples: int = 0

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def check_host(pb, in_path: str, cxx_path: str, py_path: str | None, host_clock: Linear,
               ref: Linear, absolute: bool, per_line: int, result: CheckResult) -> None:
    """Sampled events of one host: input stamp -> true time -> cluster time,
    against the C++ output and (when given) the Python output."""
    src = read_space(pb, in_path)
    cxx = read_space(pb, cxx_path)
    py = read_space(pb, py_path) if py_path else None
    base_in = line_base_ns(src, absolute)
    base_c = line_base_ns(cxx, False)
    base_p = line_base_ns(py, False) if py is not None else 0
    cxx_lines = _lines_by_key(cxx)
    py_lines = _lines_by_key(py) if py is not None else {}
    for plane in src.planes:
        if plane.name == TASK_ENV:
            continue
        for line in plane.lines:
            lc = cxx_lines[(plane.name, line.id)]
            lp = py_lines.get((plane.name, line.id))
            for i in sample_indices(len(line.events), per_line):
                ev = line.events[i]
                v_start = (base_in + line.timestamp_ns) * 1000 + ev.offset_ps
                for v_ps, which in ((v_start, 0), (v_start + ev.duration_ps, 1)):
                    expected_ns = ref.at(host_clock.true_time(Fraction(v_ps, 1000)))
                    got_ps = _instant_ps(base_c, lc, i, which)
                    result.max_truth_err_ns = max(result.max_truth_err_ns,
                                                  float(abs(Fraction(got_ps, 1000) - expected_ns)))
                    result.samples += 1
                    if lp is not None:
                        py_ps = _instant_ps(base_p, lp, i, which)
                        result.max_cxx_py_diff_ns = max(result.max_cxx_py_diff_ns,
                                                        abs(py_ps - got_ps) / 1000)
                        result.py_samples += 1


def _instant_ps(base_ns: int, line, i: int, end: int) -> int:
    ev = line.events[i]
    s = (base_ns + line.timestamp_ns) * 1000 + ev.offset_ps
    return s + ev.duration_ps if end else s


CORRECTION_PLANE = "/host:chronolink-clock-correction"
BASE_TIME_RE = re.compile(rb'"baseTimeNanoseconds"\s*:\s*(\d+)')


def xspace_event_instants(space) -> Iterable[tuple[int, int]]:
    """(start, end) ps of every event of the trace's own lines, in file order
    (not the correction plane, not the _counters_ lines alignment adds)."""
    base = line_base_ns(space, False)
    for plane in space.planes:
        if plane.name in (TASK_ENV, CORRECTION_PLANE):
            continue
        for line in plane.lines:
            if line.name == "_counters_":
                continue
            start = (base + line.timestamp_ns) * 1000
            for ev in line.events:
                s = start + ev.offset_ps
                yield s, s + ev.duration_ps


def json_event_instants(path: str) -> Iterable[tuple[int, int]]:
    """(start, end) ps of every complete ("X") event of an aligned Chrome JSON
    file, in file order, but the correction record's process; ts and dur read
    exactly (Decimal µs). Expects the writer's one event per line."""
    import decimal
    with open(path, "rb") as f:
        m = BASE_TIME_RE.search(f.read(1 << 16))
    base_ps = int(m.group(1)) * 1000 if m else 0
    correction_pids = set()
    with open(path) as f:
        for line in f:
            if CORRECTION_PLANE in line and '"process_name"' in line:
                correction_pids.add(json.loads(line.strip().rstrip(","))["pid"])
            if '"ph":"X"' not in line:
                continue
            ev = json.loads(line.strip().rstrip(","), parse_float=decimal.Decimal)
            if ev["pid"] in correction_pids:
                continue
            s = base_ps + int(decimal.Decimal(ev["ts"]) * 1_000_000)
            yield s, s + int(decimal.Decimal(ev.get("dur", 0)) * 1_000_000)


def check_json_against_xspace(pb, xspace_path: str, json_path: str) -> dict[str, Any]:
    """The JSON path's aligned events against the XSpace path's, one host."""
    xs = list(xspace_event_instants(read_space(pb, xspace_path)))
    js = list(json_event_instants(json_path))
    worst = max((max(abs(a[0] - b[0]), abs(a[1] - b[1])) for a, b in zip(xs, js)), default=0)
    return {"xspace_events": len(xs), "json_events": len(js), "max_diff_ns": worst / 1000}


# ------------------------------------------------------ timed commands ---

@dataclasses.dataclass
class Timed:
    wall_s: float
    user_s: float
    sys_s: float
    maxrss_kb: int
    phases: dict[str, dict[str, float]]
    stdout: str
    stderr: str = ""

    @property
    def cpu_s(self) -> float:
        return self.user_s + self.sys_s


def parse_time_v(text: str) -> dict[str, float]:
    """The fields of GNU time -v we use: user, sys, wall (s), peak RSS (kB)."""
    out: dict[str, float] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("User time (seconds):"):
            out["user_s"] = float(line.rsplit(":", 1)[1])
        elif line.startswith("System time (seconds):"):
            out["sys_s"] = float(line.rsplit(":", 1)[1])
        elif line.startswith("Maximum resident set size (kbytes):"):
            out["maxrss_kb"] = int(line.rsplit(":", 1)[1])
        elif line.startswith("Elapsed (wall clock) time"):
            clock = line.split("):", 1)[1].strip()          # h:mm:ss or m:ss.ss
            seconds = 0.0
            for part in clock.split(":"):
                seconds = seconds * 60 + float(part)
            out["wall_s"] = seconds
    missing = {"user_s", "sys_s", "maxrss_kb", "wall_s"} - out.keys()
    if missing:
        raise ValueError(f"time -v output lacks {sorted(missing)}")
    return out


TIMING_RE = re.compile(r"^timing: phase=(\S+) wall_s=([\d.]+) cpu_s=([\d.]+) maxrss_kb=(\d+)$")


def parse_timings(stderr: str) -> dict[str, dict[str, float]]:
    """`chronolink-trace align --timings` lines -> {phase: {wall_s, cpu_s, maxrss_kb}}."""
    phases = {}
    for line in stderr.splitlines():
        m = TIMING_RE.match(line.strip())
        if m:
            phases[m.group(1)] = {"wall_s": float(m.group(2)), "cpu_s": float(m.group(3)),
                                  "maxrss_kb": int(m.group(4))}
    return phases


def run_timed(cmd: Sequence[str], label: str) -> Timed:
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        proc = subprocess.run([TIME_BIN, "-v", "-o", tf.name, *cmd], capture_output=True, text=True)
        report = tf.read()
    if proc.returncode != 0:
        raise RuntimeError(f"{label} failed (exit {proc.returncode}): {' '.join(cmd)}\n"
                           f"{proc.stderr[-3000:]}{proc.stdout[-2000:]}")
    t = parse_time_v(report)
    return Timed(t["wall_s"], t["user_s"], t["sys_s"], int(t["maxrss_kb"]),
                 parse_timings(proc.stderr), proc.stdout, proc.stderr)


# ------------------------------------------------------------ the table ---

def rate(events: int, cpu_s: float) -> float:
    return events / cpu_s if cpu_s > 0 else float("nan")


def row(name: str, events: int, cpu_s: float, wall_s: float | None, maxrss_kb: int | None,
        input_bytes: int | None = None, note: str = "") -> dict[str, Any]:
    return {"name": name, "events": events, "cpu_s": cpu_s, "wall_s": wall_s,
            "events_per_cpu_s": rate(events, cpu_s), "maxrss_kb": maxrss_kb,
            "input_bytes": input_bytes, "note": note}


def timed_rows(name: str, events: int, t: Timed, input_bytes: int,
               other: str = "other (start, offsets, free)") -> list[dict[str, Any]]:
    rows = [row(name, events, t.cpu_s, t.wall_s, t.maxrss_kb, input_bytes)]
    accounted = 0.0
    for phase, p in t.phases.items():
        accounted += p["cpu_s"]
        rows.append(row(f"  {phase}", events, p["cpu_s"], p.get("wall_s"), p.get("maxrss_kb"),
                        note="peak RSS at its end" if "maxrss_kb" in p else ""))
    if t.phases:
        rows.append(row(f"  {other}", events, max(t.cpu_s - accounted, 0.0),
                        None, None))
    return rows


def fmt_rate(r: float) -> str:
    if not math.isfinite(r):
        return "-"
    return f"{r / 1e6:.2f} M" if r >= 1e6 else f"{r / 1e3:.0f} k"


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    head = f"{'':42} {'events':>11} {'CPU s':>8} {'wall s':>8} {'events/s/core':>14} {'peak RSS':>10} {'RSS/input':>9}"
    out = [head, "-" * len(head)]
    for r in rows:
        rss = f"{r['maxrss_kb'] * 1024 / 1e6:.0f} MB" if r["maxrss_kb"] else "-"   # MB = 1e6 bytes, as file sizes
        ratio = (f"{r['maxrss_kb'] * 1024 / r['input_bytes']:.1f}x"
                 if r["maxrss_kb"] and r["input_bytes"] else "-")
        wall = f"{r['wall_s']:.2f}" if r["wall_s"] is not None else "-"
        out.append(f"{r['name']:42} {r['events']:>11,} {r['cpu_s']:>8.2f} {wall:>8} "
                   f"{fmt_rate(r['events_per_cpu_s']):>14} {rss:>10} {ratio:>9}"
                   + (f"  {r['note']}" if r["note"] else ""))
    return "\n".join(out)


# ------------------------------------------------------------ scenario ---

class Bench:
    def __init__(self, args: argparse.Namespace, size: Size, work: str):
        self.args = args
        self.size = size
        self.work = work
        tools = os.path.join(os.path.abspath(args.build_dir), "tools")
        self.trace_bin = os.path.join(tools, "chronolink-trace")
        self.fixture_bin = os.path.join(tools, "chronolink-trace-fixture")
        self.rows: list[dict[str, Any]] = []
        self.record: dict[str, Any] = {"size": dataclasses.asdict(size), "reference": args.reference}

    def log(self, text: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)

    # -- 1. the run
    def fixture(self, logdir: str, hosts: int, steps: int, kernels: int) -> tuple[Timed, dict[str, Any], list[str]]:
        s = self.size
        t = run_timed([self.fixture_bin, "--logdir", logdir, "--hosts", str(hosts), "--gpus", str(s.gpus),
                       "--steps", str(steps), "--kernels", str(kernels), "--step-ns", str(s.step_ns),
                       "--seed", str(self.args.seed)], "chronolink-trace-fixture")
        with open(os.path.join(logdir, "chronolink_fixture_truth.json")) as f:
            truth = json.load(f)
        run_dir = re.search(r"^run (\S+):", t.stdout, re.M).group(1)
        files = [os.path.join(run_dir, h["file"]) for h in truth["hosts"]]
        return t, truth, files

    # -- 2. the offsets
    def write_offsets(self, truth: dict[str, Any], path: str) -> tuple[list[str], Linear, list[Linear]]:
        clocks = [Linear.of(VClock.make(h["offset_ns"], h["drift_ppm"], h["t0_ns"])) for h in truth["hosts"]]
        nodes = list(range(1, len(clocks) + 1))
        lines = offsets_lines(clocks, nodes, self.args.reference, truth["true_start_ns"], truth["true_stop_ns"])
        with open(path, "w") as f:
            for line in lines:
                f.write(json.dumps(line, separators=(",", ":")) + "\n")
        host_args = [f"{n}={h['host']}" for n, h in zip(nodes, truth["hosts"])]
        return host_args, reference_clock(clocks, self.args.reference), clocks

    def align(self, inputs: Sequence[str], offsets: str, host_args: Sequence[str], out: str, label: str,
              extra: Sequence[str] = ()) -> Timed:
        cmd = [self.trace_bin, "align", *inputs, "--offsets", offsets, "--out", out, "--timings", *extra]
        for h in host_args:
            cmd += ["--host", h]
        return run_timed(cmd, label)

    def run(self) -> int:
        s, w = self.size, self.work
        events = fixture_events(s.hosts, s.gpus, s.steps, s.kernels)
        self.log(f"fixture: {s.hosts} hosts x {s.gpus} GPUs, {s.steps} steps, {s.kernels} kernels: {events:,} events")
        logdir = os.path.join(w, "run")
        t_fix, truth, files = self.fixture(logdir, s.hosts, s.steps, s.kernels)
        xspace_bytes = sum(os.path.getsize(f) for f in files)
        self.record["fixture"] = {"events": events, "files": len(files), "bytes": xspace_bytes,
                                  "wall_s": t_fix.wall_s, "cpu_s": t_fix.cpu_s, "maxrss_kb": t_fix.maxrss_kb}
        self.rows.append(row("fixture: generate + write XSpace", events, t_fix.cpu_s, t_fix.wall_s, t_fix.maxrss_kb))
        offsets = os.path.join(w, "offsets.jsonl")
        host_args, ref, clocks = self.write_offsets(truth, offsets)
        self.record["offsets_lines"] = sum(1 for _ in open(offsets))

        self.log(f"align XSpace: {len(files)} files, {xspace_bytes / 1e6:.0f} MB")
        out_cxx = os.path.join(w, "aligned")
        t_x = self.align([logdir], offsets, host_args, out_cxx, "align XSpace")
        self.rows += timed_rows("align XSpace (C++)", events, t_x, xspace_bytes)
        self.record["align_xspace"] = dataclasses.asdict(t_x) | {"cpu_s": t_x.cpu_s, "input_bytes": xspace_bytes}
        cxx_run = self.cxx_run = re.search(r"^wrote (\S+)$", t_x.stdout, re.M).group(1)
        # The floor any file-to-file transform pays here: reading the inputs
        # and writing as many bytes (cp through the page cache).
        copy_dir = os.path.join(w, "copied")
        t_cp = run_timed(["cp", "-r", os.path.dirname(files[0]), copy_dir], "cp")
        self.rows.append(row("copy the XSpace files (cp: read + write floor)", events, t_cp.cpu_s, t_cp.wall_s,
                             t_cp.maxrss_kb, xspace_bytes))
        self.record["copy_floor"] = {"cpu_s": t_cp.cpu_s, "wall_s": t_cp.wall_s}
        shutil.rmtree(copy_dir, ignore_errors=True)
        # The same run with every host held at once (--hold-all): the earlier
        # design, for the memory and time that streaming one host saves.
        held_out = os.path.join(w, "aligned-held")
        t_h = self.align([logdir], offsets, host_args, held_out, "align XSpace --hold-all", ["--hold-all"])
        self.rows += timed_rows("align XSpace, --hold-all (every host at once)", events, t_h, xspace_bytes)
        self.record["align_xspace_hold_all"] = dataclasses.asdict(t_h) | {"cpu_s": t_h.cpu_s}
        held_run = re.search(r"^wrote (\S+)$", t_h.stdout, re.M).group(1)
        for f in files:
            name = os.path.basename(f)
            if not filecmp.cmp(os.path.join(cxx_run, name), os.path.join(held_run, name), shallow=False):
                raise RuntimeError(f"{name}: streamed and --hold-all outputs differ")
        if not self.args.keep:
            shutil.rmtree(held_out, ignore_errors=True)
        # The same streamed run through the protobuf model for every host
        # (--no-wire-rewrite): what the wire-level rewrite saves.
        model_out = os.path.join(w, "aligned-model")
        t_m = self.align([logdir], offsets, host_args, model_out, "align XSpace --no-wire-rewrite",
                         ["--no-wire-rewrite"])
        self.rows += timed_rows("align XSpace, --no-wire-rewrite (the model path)", events, t_m, xspace_bytes)
        self.record["align_xspace_model_path"] = dataclasses.asdict(t_m) | {"cpu_s": t_m.cpu_s}
        model_run = re.search(r"^wrote (\S+)$", t_m.stdout, re.M).group(1)
        for f in files:
            name = os.path.basename(f)
            if not filecmp.cmp(os.path.join(cxx_run, name), os.path.join(model_run, name), shallow=False):
                raise RuntimeError(f"{name}: wire-level and --no-wire-rewrite outputs differ")
        if "through the model" in t_x.stderr:
            raise RuntimeError("a host of the bench run declined the wire-level rewrite: " + t_x.stderr)
        if not self.args.keep:
            shutil.rmtree(model_out, ignore_errors=True)

        ok = True
        if not self.args.skip_naive:
            ok &= self.naive(truth, files, offsets, host_args, events, cxx_run, ref, clocks)
        else:
            ok &= self.check(truth, files, cxx_run, None, ref, clocks, len(files))
        if not self.args.skip_chrome:
            ok &= self.chrome(files, offsets, host_args, events)
            if s.big_json_bytes:
                self.big_json()
        if not self.args.keep:
            shutil.rmtree(os.path.join(w, "aligned"), ignore_errors=True)
        return 0 if ok else 1

    # -- 5. the naive baseline and the checks
    def naive(self, truth, files, offsets, host_args, events, cxx_run, ref, clocks) -> bool:
        n = len(files) if self.args.naive_hosts <= 0 else min(self.args.naive_hosts, len(files))
        subset, sub_hosts = files[:n], host_args[:n]
        sub_events = events * n // len(files)
        pb_dir = protoc_python(os.path.join(self.work, "pb"))
        out_py = os.path.join(self.work, "naive")
        self.log(f"naive Python over {n} of {len(files)} hosts ({sub_events:,} events)")
        cmd = [sys.executable, os.path.abspath(__file__), "--naive-worker", "--pb-dir", pb_dir,
               "--offsets", offsets, "--out", out_py, *subset]
        if truth.get("line_timestamps") == "absolute":
            cmd.append("--absolute")
        for h in sub_hosts:
            cmd += ["--host", h]
        t_py = run_timed(cmd, "naive Python")
        report = json.loads(t_py.stdout.strip().splitlines()[-1])
        if report["events"] != sub_events:
            raise RuntimeError(f"naive Python rewrote {report['events']} events, expected {sub_events}")
        t_py.phases = {k: {"cpu_s": v} for k, v in report["phases_cpu_s"].items()}
        sub_bytes = sum(os.path.getsize(f) for f in subset)
        self.rows += timed_rows(f"naive Python ({n} hosts)", sub_events, t_py, sub_bytes,
                                other="other (interpreter, imports, free)")
        cxx_rate = rate(events, self.record["align_xspace"]["cpu_s"])
        py_rate = rate(sub_events, t_py.cpu_s)
        self.record["naive_python"] = dataclasses.asdict(t_py) | {
            "cpu_s": t_py.cpu_s, "hosts": n, "events": sub_events, "input_bytes": sub_bytes,
            "protobuf_backend": _protobuf_backend()}
        self.record["speedup_cxx_over_python"] = cxx_rate / py_rate
        ok = self.check(truth, files, cxx_run, out_py, ref, clocks, n)
        if not self.args.keep:
            shutil.rmtree(out_py, ignore_errors=True)
        return ok

    def check(self, truth, files, cxx_run, py_out, ref, clocks, py_hosts) -> bool:
        pb = load_pb(protoc_python(os.path.join(self.work, "pb")))
        result = CheckResult()
        absolute = truth.get("line_timestamps") == "absolute"
        for i, path in enumerate(files):
            name = os.path.basename(path)
            py_path = os.path.join(py_out, name) if py_out and i < py_hosts else None
            check_host(pb, path, os.path.join(cxx_run, name), py_path, clocks[i], ref, absolute,
                       self.args.samples_per_line, result)
        self.record["check"] = result.as_dict()
        good = result.max_truth_err_ns <= TRUTH_NS and result.max_cxx_py_diff_ns <= AGREE_NS
        self.log(f"check: {result.samples} instants, max |C++ - truth| {result.max_truth_err_ns:.3f} ns; "
                 f"{result.py_samples} against Python, max |C++ - Python| {result.max_cxx_py_diff_ns:.3f} ns"
                 + ("" if good else "  FAILED"))
        return good

    # -- 4. Chrome JSON
    def chrome(self, files, offsets, host_args, events) -> bool:
        jdir = os.path.join(self.work, "json")
        os.makedirs(jdir)
        export_cpu = export_wall = 0.0
        export_rss = 0
        jfiles = []
        for f in files:
            out = os.path.join(jdir, os.path.basename(f)[: -len(".xplane.pb")] + ".json")
            t = run_timed([self.trace_bin, "export-chrome", f, "--out", out], "export-chrome")
            export_cpu += t.cpu_s
            export_wall += t.wall_s
            export_rss = max(export_rss, t.maxrss_kb)
            jfiles.append(out)
        json_bytes = sum(os.path.getsize(f) for f in jfiles)
        self.bytes_per_json_event = json_bytes / events
        self.rows.append(row("export-chrome, each host (C++)", events, export_cpu, export_wall, export_rss,
                             note="peak RSS: largest host"))
        self.log(f"align Chrome JSON: {len(jfiles)} files, {json_bytes / 1e6:.0f} MB")
        t_j = self.align(jfiles, offsets, host_args, os.path.join(self.work, "json-aligned"), "align JSON")
        self.rows += timed_rows("align Chrome JSON (C++)", events, t_j, json_bytes)
        self.record["export_chrome"] = {"cpu_s": export_cpu, "wall_s": export_wall, "maxrss_kb": export_rss,
                                        "bytes": json_bytes}
        self.record["align_json"] = dataclasses.asdict(t_j) | {"cpu_s": t_j.cpu_s, "input_bytes": json_bytes}
        host = os.path.basename(files[0])
        c = check_json_against_xspace(load_pb(protoc_python(os.path.join(self.work, "pb"))),
                                      os.path.join(self.cxx_run, host),
                                      os.path.join(self.work, "json-aligned", host[: -len(".xplane.pb")] + ".json"))
        c["host"] = host
        self.record["check_json"] = c
        good = c["xspace_events"] == c["json_events"] and c["max_diff_ns"] <= AGREE_NS
        self.log(f"check JSON: {c['json_events']} events of {host}, max |JSON path - XSpace path| "
                 f"{c['max_diff_ns']:.3f} ns" + ("" if good else "  FAILED"))
        if not self.args.keep:
            shutil.rmtree(os.path.join(self.work, "json-aligned"), ignore_errors=True)
            shutil.rmtree(jdir, ignore_errors=True)
        return good

    def big_json(self) -> None:
        """One host of about size.big_json_bytes of JSON: the peak RSS of reading it."""
        s = self.size
        per_step = fixture_events(1, s.gpus, 1, s.kernels)
        steps = max(1, round(s.big_json_bytes / self.bytes_per_json_event / per_step))
        events = per_step * steps
        logdir = os.path.join(self.work, "big")
        self.log(f"one-host JSON of ~{s.big_json_bytes / 1e6:.0f} MB: {steps} steps, {events:,} events")
        _, truth, files = self.fixture(logdir, 1, steps, s.kernels)
        offsets = os.path.join(self.work, "big-offsets.jsonl")
        host_args, _, _ = self.write_offsets(truth, offsets)
        jpath = os.path.join(self.work, truth["hosts"][0]["host"] + ".json")
        run_timed([self.trace_bin, "export-chrome", files[0], "--out", jpath], "export-chrome (big)")
        shutil.rmtree(logdir, ignore_errors=True)
        size = os.path.getsize(jpath)
        t = self.align([jpath], offsets, host_args, os.path.join(self.work, "big-aligned"), "align big JSON")
        self.rows += timed_rows(f"align one {size / 1e9:.2f} GB JSON (C++)", events, t, size)
        self.record["big_json"] = dataclasses.asdict(t) | {"cpu_s": t.cpu_s, "input_bytes": size, "events": events}
        shutil.rmtree(os.path.join(self.work, "big-aligned"), ignore_errors=True)
        os.remove(jpath)

    def print_table(self) -> None:
        print(format_table(self.rows))
        fx = self.record["fixture"]
        print(f"\nXSpace: {fx['files']} files, {fx['bytes'] / 1e6:.1f} MB ({fx['bytes'] / fx['events']:.1f} B/event)"
              + (f"; Chrome JSON: {self.record['export_chrome']['bytes'] / 1e6:.1f} MB "
                 f"({self.record['export_chrome']['bytes'] / fx['events']:.1f} B/event)"
                 if "export_chrome" in self.record else ""))
        if "speedup_cxx_over_python" in self.record:
            print(f"C++ align / naive Python, events per CPU second: {self.record['speedup_cxx_over_python']:.1f}x "
                  f"(python3-protobuf backend: {self.record['naive_python']['protobuf_backend']})")
        c = self.record.get("check")
        if c:
            print(f"check: {c['samples']} sampled instants, max |C++ - truth| {c['max_truth_err_ns']:.3f} ns; "
                  f"{c['py_samples']} against Python, max |C++ - Python| {c['max_cxx_py_diff_ns']:.3f} ns")
        cj = self.record.get("check_json")
        if cj:
            print(f"check JSON: {cj['json_events']} events of {cj['host']} aligned from JSON against the same "
                  f"aligned from XSpace, max |difference| {cj['max_diff_ns']:.3f} ns")
        print(f"offsets: {self.record['offsets_lines']} lines, reference {self.args.reference}; "
              f"load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")


def _protobuf_backend() -> str:
    try:
        from google.protobuf.internal import api_implementation
        return api_implementation.Type()
    except ImportError:
        return "none"


# ----------------------------------------------------------- selftest ---

def selftest() -> int:
    rng = random.Random(7)
    failures = []

    def expect(cond: bool, what: str) -> None:
        if not cond:
            failures.append(what)

    # Fixture event counts seen from chronolink-trace-fixture.
    for (h, g, s, k), n in {(1, 1, 1, 1): 17, (1, 1, 1, 2): 18, (1, 1, 2, 1): 34, (1, 2, 1, 1): 32,
                            (2, 1, 1, 1): 34, (8, 8, 100, 1560): 10_075_200}.items():
        expect(fixture_events(h, g, s, k) == n, f"fixture_events{(h, g, s, k)} != {n}")

    # Offsets written as JSON solve the clocks exactly: every stamp of every
    # clock maps to the reference clock's reading at the same true instant.
    start = 1_795_320_926_000_000_000
    clocks = [VClock.make(rng.randint(-50_000_000, 50_000_000), Fraction(rng.randint(-100_000, 100_000), 1000), start)
              for _ in range(5)]
    lin = [Linear.of(c) for c in clocks]
    for reference in ("mean", "first"):
        lines = [json.loads(json.dumps(x)) for x in offsets_lines(lin, [1, 2, 3, 4, 5], reference, start, start + 30 * 10**9)]
        ref = reference_clock(lin, reference)
        instants = sorted({x["t_ns"] for x in lines})
        lo, hi = ref.at(start) - MARGIN_NS, ref.at(start + 30 * 10**9) + MARGIN_NS
        expect(lo - PERIOD_NS < instants[0] <= lo and hi <= instants[-1] < hi + PERIOD_NS,
               f"{reference}: instants {instants[0]}..{instants[-1]} do not just cover {lo}..{hi}")
        expect(all(b - a == PERIOD_NS for a, b in zip(instants, instants[1:])) and instants[0] % PERIOD_NS == 0,
               "instants off the 2 s grid")
        expect(len(lines) == 5 * len(instants), "one line per node per instant")
        corr = naive_corrections(lines)
        worst = 0.0
        for node, (c, l) in enumerate(zip(clocks, lin), start=1):
            for _ in range(300):
                t = start + rng.randint(-10**9, 31 * 10**9)    # a second beyond the profile too
                v = c.at(t)
                v_ps = math.floor(v * 1000)
                got = corr[node].to_cluster_ps(v_ps)
                want = ref.at(l.true_time(Fraction(v_ps, 1000))) * 1000
                worst = max(worst, float(abs(got - want)))
        expect(worst <= 2.0, f"{reference}: naive correction off by {worst} ps from the exact map")
        if reference == "first":
            expect(all(x["offset_ns"] == 0.0 and x["drift"] == 0.0 and x["uncertainty_ns"] == 0.0
                       for x in lines if x["node"] == 1), "the named reference is not the identity")
        mean_off = sum(x["offset_ns"] for x in lines if x["t_ns"] == lines[0]["t_ns"]) / 5
        if reference == "mean":
            expect(abs(mean_off) < 1e-6, f"mean reference: offsets average {mean_off} ns, want 0")

    # Extrapolation uses the exact inverse of a constant drift: 1000 s out, 100 ppm.
    c = NaiveCorrection([(0, 0.0, 1e-4), (2_000_000_000, 200_000.0, 1e-4)])
    x = (2_000_000_000 + 200_000 + 1000 * 10**9) * 1000    # 1000 s past the last knot's node time
    want = 2_000_000_000 * 1000 + round(10**15 / (1 + 1e-4))  # cluster: the knot + 1000 s / (1 + d)
    expect(abs(c.to_cluster_ps(x) - want) <= 2, f"extrapolation: {c.to_cluster_ps(x)} vs {want}")
    # Before the first instant, and exactly at a knot.
    expect(c.to_cluster_ps(-1_000_000) == -1_000_000 - round(1e-4 * -1_000_000 / (1 + 1e-4)), "before the first knot")
    expect(c.to_cluster_ps((2_000_000_000 + 200_000) * 1000) == 2_000_000_000 * 1000, "at the last knot")
    # The last line per (node, t_ns) wins.
    two = naive_corrections([{"node": 1, "t_ns": 0, "offset_ns": 5.0, "drift": 0.0, "reachable": True},
                             {"node": 1, "t_ns": 0, "offset_ns": 7.0, "drift": 0.0, "reachable": True}])
    expect(two[1].to_cluster_ps(100_000) == 93_000, "a replaced instant was not replaced")

    # The rewrite on stand-in messages: absolute instants become the mapped ones.
    @dataclasses.dataclass
    class Ev:
        offset_ps: int
        duration_ps: int

    @dataclasses.dataclass
    class Ln:
        timestamp_ns: int
        events: list
        duration_ps: int = 0

    @dataclasses.dataclass
    class Pl:
        name: str
        lines: list

    corr1 = naive_corrections(offsets_lines(lin[:2], [1, 2], "mean", start, start + 10**9))[2]
    base = clocks[1].offset_ns + start
    evs = [Ev(rng.randint(0, 10**15), rng.randint(0, 10**9)) for _ in range(50)]
    before = [((base + 5000) * 1000 + e.offset_ps, (base + 5000) * 1000 + e.offset_ps + e.duration_ps) for e in evs]
    planes = [Pl("/device:GPU:0", [Ln(5000, evs)]), Pl(TASK_ENV, [Ln(0, [Ev(0, 0)])])]
    origin = corr1.to_cluster_ps(base * 1000) // 1000 - 17
    expect(naive_rewrite(planes, base, corr1.to_cluster_ps, origin) == 50, "rewrite count")
    line = planes[0].lines[0]
    for (s, e), ev in zip(before, line.events):
        got_s = (origin + line.timestamp_ns) * 1000 + ev.offset_ps
        expect(got_s == corr1.to_cluster_ps(s), "rewritten start")
        expect(got_s + ev.duration_ps == corr1.to_cluster_ps(e), "rewritten end")
    expect(planes[1].lines[0].timestamp_ns == 0, "Task Environment must be left alone")

    # GNU time -v and --timings parsing.
    sample = """\tCommand being timed: "x"
\tUser time (seconds): 12.34
\tSystem time (seconds): 1.50
\tPercent of CPU this job got: 99%
\tElapsed (wall clock) time (h:mm:ss or m:ss): 1:02:03.5
\tMaximum resident set size (kbytes): 4567890
\tExit status: 0
"""
    t = parse_time_v(sample)
    expect(t == {"user_s": 12.34, "sys_s": 1.5, "wall_s": 3723.5, "maxrss_kb": 4567890}, f"time -v: {t}")
    expect(parse_time_v(sample.replace("1:02:03.5", "0:07.25"))["wall_s"] == 7.25, "m:ss wall")
    try:
        parse_time_v("nothing")
        failures.append("time -v without fields must fail")
    except ValueError:
        pass
    ph = parse_timings("noise\ntiming: phase=read wall_s=1.500000 cpu_s=1.250000 maxrss_kb=1024\n"
                       "timing: phase=align wall_s=0.5 cpu_s=0.25 maxrss_kb=2048\n")
    expect(ph == {"read": {"wall_s": 1.5, "cpu_s": 1.25, "maxrss_kb": 1024},
                  "align": {"wall_s": 0.5, "cpu_s": 0.25, "maxrss_kb": 2048}}, f"timings: {ph}")

    # Rates, samples and the table.
    expect(rate(10_000_000, 0.5) == 20_000_000, "rate")
    expect(math.isnan(rate(1, 0)), "rate of no CPU")
    expect(sample_indices(5, 16) == [0, 1, 2, 3, 4], "short line sampled whole")
    idx = sample_indices(1001, 5)
    expect(idx == [0, 250, 500, 750, 1000], f"sample_indices: {idx}")
    timed = Timed(10.0, 8.0, 1.0, 2048, {"read": {"wall_s": 4.0, "cpu_s": 4.0, "maxrss_kb": 1024}}, "")
    rows = timed_rows("x", 1_000_000, timed, 1024 * 1024)
    expect([r["name"] for r in rows] == ["x", "  read", "  other (start, offsets, free)"], "timed rows")
    expect(abs(rows[2]["cpu_s"] - 5.0) < 1e-9, "unaccounted CPU")
    table = format_table(rows)
    expect("2.0x" in table and "111 k" in table, f"table:\n{table}")

    for f in failures:
        print(f"FAIL: {f}")
    print(f"trace_align_bench selftest: {'FAILED' if failures else 'ok'} ({len(failures)} failures)")
    return 1 if failures else 0


# --------------------------------------------------------------- main ---

def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", default=os.path.join(REPO, "build"),
                   help="CMake build directory holding tools/chronolink-trace{,-fixture}")
    p.add_argument("--quick", action="store_true", help="a ~100 k-event smoke run")
    p.add_argument("--selftest", action="store_true", help="check this script's arithmetic, no binaries")
    p.add_argument("--json", help="write every figure here")
    p.add_argument("--work", help="work directory (default: a new one under $TMPDIR, removed at the end)")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    p.add_argument("--reference", choices=["mean", "first"], default="mean",
                   help="cluster clock of the offsets: the mean of the nodes, or the first host's node")
    p.add_argument("--seed", type=int, default=1, help="the fixture's seed (clocks and jitter)")
    p.add_argument("--naive-hosts", type=int, default=0,
                   help="run the Python baseline on the first N hosts only (0: all)")
    p.add_argument("--samples-per-line", type=int, default=24, help="events checked per trace line")
    p.add_argument("--skip-naive", action="store_true")
    p.add_argument("--skip-chrome", action="store_true")
    # The Python baseline's own process (internal).
    p.add_argument("--naive-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--pb-dir", help=argparse.SUPPRESS)
    p.add_argument("--offsets", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("--host", action="append", default=[], help=argparse.SUPPRESS)
    p.add_argument("--absolute", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("files", nargs="*", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.selftest:
        return selftest()
    if args.naive_worker:
        return naive_worker(args)

    if _protobuf_backend() == "none" or not shutil.which("protoc") or not os.path.exists(TIME_BIN):
        print(f"trace_align_bench: needs python3-protobuf (run with /usr/bin/python3, not {sys.executable}), "
              f"protoc and {TIME_BIN} (Debian packages python3-protobuf protobuf-compiler time)", file=sys.stderr)
        return 2
    size = SIZES["quick" if args.quick else "full"]
    work = args.work or tempfile.mkdtemp(prefix="trace_align_bench.")
    os.makedirs(work, exist_ok=True)
    bench = Bench(args, size, work)
    try:
        rc = bench.run()
    finally:
        if not args.keep and not args.work:
            shutil.rmtree(work, ignore_errors=True)
    bench.print_table()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"schema": "chronolink.trace_align_bench.v1", "rows": bench.rows} | bench.record, f, indent=1,
                      default=str)
    return rc


if __name__ == "__main__":
    sys.exit(main())
