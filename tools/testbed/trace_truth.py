"""Exact truth of traces recorded on a chronolink test bed.

Compares each event of an aligned trace with the true instant of the same
event in the original trace: the test bed's clocks are virtual clocks
(truth.VClock, or a clock state file's trajectory: clock_trajectory), so the
true time of a host-clock stamp is exact. The aligned trace is on cluster
time, the reference node's REALTIME: where that clock is not true time (a
disciplined reference), pass it as `reference` and each event is compared
with the reference's reading at the event's true instant. Used by the
end-to-end test (tests/integration/trace_alignment_e2e.py) and the demo.
Standard library and python3-protobuf only; exact arithmetic (Fraction,
Decimal), never a float for an epoch instant.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from decimal import Decimal
from fractions import Fraction

from truth import VClock

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_json(path):
    with open(path) as f:
        return json.load(f, parse_float=Decimal, parse_int=Decimal)


# Half of 2^-10 us, the JSON writer's time grid (trace/exporters/micros_grid.h).
JSON_GRID_HALF_TICK_NS = 1000 / 1024 / 2


def events_of(doc):
    evs = doc["traceEvents"] if isinstance(doc, dict) else doc
    return [e for e in evs if isinstance(e, dict) and e.get("ph") not in ("M",) and "ts" in e]


def on_reference(true_ns, reference=None):
    """Cluster time at a true instant: the reference node's clock there
    (None: the reference reads true time)."""
    return true_ns if reference is None else reference.at(true_ns)


def chrome_errors(original_path, origin_ns, aligned_path, clock: VClock, reference=None):
    """Per event: aligned - true (ns, Fraction) and its reported bound."""
    orig = events_of(load_json(original_path))
    aligned_doc = load_json(aligned_path)
    base = Fraction(int(aligned_doc.get("baseTimeNanoseconds", 0))) if isinstance(aligned_doc, dict) else 0
    aligned = events_of(aligned_doc)
    key = lambda e: (str(e.get("pid")), str(e.get("tid")), str(e.get("name")))
    by_key: dict = {}
    for e in aligned:
        by_key.setdefault(key(e), []).append(e)
    seen: dict = {}
    out = []
    for e in orig:
        k = key(e)
        idx = seen.get(k, 0)
        seen[k] = idx + 1
        peers = by_key.get(k, [])
        if idx >= len(peers):
            raise AssertionError(f"event {k} #{idx} missing from {aligned_path}")
        b = peers[idx]
        host_ns = Fraction(origin_ns) + Fraction(e["ts"]) * 1000
        true_ns = on_reference(clock.true_time(host_ns), reference)
        got_ns = base + Fraction(b["ts"]) * 1000
        # The JSON writer puts every instant on a 2^-10 us grid (docs/chrome-trace.md):
        # half a tick more than the correction's own bound.
        bound = float(b.get("args", {}).get("chronolink_bound_ns", "nan")) + JSON_GRID_HALF_TICK_NS
        out.append((float(got_ns - true_ns), bound))
    return out


def load_xplane_module(out):
    """python3-protobuf with proto/xplane.proto: a reader independent of ours."""
    gen = os.path.join(out, "pb")
    os.makedirs(gen, exist_ok=True)
    cp = subprocess.run(["protoc", f"-I{ROOT}", f"--python_out={gen}", os.path.join(ROOT, "proto", "xplane.proto")],
                        capture_output=True, text=True, timeout=60)
    if cp.returncode != 0:
        raise RuntimeError(f"protoc failed: {cp.stderr}")
    sys.path.insert(0, gen)
    from proto import xplane_pb2  # noqa: E402
    return xplane_pb2


def profile_start(space):
    """The Task Environment's profile_start_time (0: lines are absolute)."""
    for plane in space.planes:
        if plane.name == "Task Environment":
            for st in plane.stats:
                if plane.stat_metadata[st.metadata_id].name == "profile_start_time":
                    return st.uint64_value
    return 0


def xspace_events(pb, path):
    """{(plane, line, index): (abs ns Fraction, bound or None)} of a host file."""
    space = pb.XSpace()
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    base = profile_start(space)
    out = {}
    for plane in space.planes:
        if plane.name in ("Task Environment", "/host:chronolink-clock-correction"):
            continue
        bound_id = next((k for k, m in plane.stat_metadata.items() if m.name == "chronolink_bound_ns"), None)
        for line in plane.lines:
            if line.name == "_counters_":
                continue
            for i, e in enumerate(line.events):
                t = Fraction(base + line.timestamp_ns) + Fraction(e.offset_ps, 1000)
                bound = next((st.double_value for st in e.stats if st.metadata_id == bound_id), None)
                out[(plane.name, line.name, i)] = (t, bound)
    return out




def xspace_errors(pb, original_path, aligned_path, clock: VClock, reference=None):
    """Per event of a host's XSpace file: (aligned - true ns, bound or -1), and
    the keys missing from the aligned file."""
    orig = xspace_events(pb, original_path)
    got = xspace_events(pb, aligned_path)
    out = []
    for k, (t_host, _) in orig.items():
        if k in got:
            t_aligned, bound = got[k]
            expected = on_reference(clock.true_time(t_host), reference)
            out.append((float(t_aligned - expected), bound if bound is not None else -1.0))
    return out, sorted(set(orig) - set(got))


def gpu_truth(path):
    """{(device, correlation_id): (true start ns, true end ns)} of a
    `chronolink-collect run --truth` file (the simulated GPU's records)."""
    truth = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            truth[(int(r["device"]), int(r["correlation_id"]))] = (int(r["true_start_ns"]), int(r["true_end_ns"]))
    return truth


def gpu_events(pb, path):
    """[(device, correlation_id, start ns, end ns (Fractions), bound or None)]
    of the /device:GPU planes of an XSpace file."""
    space = pb.XSpace()
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    base = profile_start(space)
    out = []
    for plane in space.planes:
        if not plane.name.startswith("/device:GPU:"):
            continue
        names = {k: m.name for k, m in plane.stat_metadata.items()}
        for line in plane.lines:
            for e in line.events:
                stats = {names.get(s.metadata_id): s for s in e.stats}
                if "correlation_id" not in stats:
                    continue
                cid = stats["correlation_id"].uint64_value or stats["correlation_id"].int64_value
                start = Fraction(base + line.timestamp_ns) + Fraction(e.offset_ps, 1000)
                b = stats.get("chronolink_bound_ns")
                out.append((plane.id, cid, start, start + Fraction(e.duration_ps, 1000),
                            b.double_value if b is not None else None))
    return out


def gpu_errors(pb, truth_path, recorded_path, aligned_path, reference=None):
    """A collector's GPU events against the simulation's truth: per aligned
    start and end (aligned - true ns, bound or -1); the recorded file's
    |host time - true| of each start; and how many aligned events had no
    truth record and how many recorded events the aligned file lacks."""
    truth = gpu_truth(truth_path)
    recorded = gpu_events(pb, recorded_path)
    aligned = gpu_events(pb, aligned_path)
    errs, before, unknown = [], [], 0
    for dev, cid, start, end, bound in aligned:
        t = truth.get((dev, cid))
        if t is None:
            unknown += 1
            continue
        b = bound if bound is not None else -1.0
        errs += [(float(start - on_reference(t[0], reference)), b), (float(end - on_reference(t[1], reference)), b)]
    for dev, cid, start, _end, _b in recorded:
        t = truth.get((dev, cid))
        if t is not None:
            before.append(abs(float(start - t[0])))
    return {"errors": errs, "before": before, "unknown": unknown,
            "recorded": len(recorded), "aligned": len(aligned)}


def figures(errs):
    """p50/p99/max of |error| and the fraction within the event's bound."""
    mags = sorted(abs(e) for e, _ in errs)
    if not mags:
        return {"events": 0}
    p = lambda q: mags[min(len(mags) - 1, int(q * len(mags)))]
    within = sum(1 for e, b in errs if abs(e) <= b) / len(errs)
    bounds = sorted(b for _, b in errs)
    return {"events": len(errs), "p50_ns": p(0.5), "p99_ns": p(0.99), "max_ns": mags[-1],
            "within_bound": within, "bound_p50_ns": bounds[len(bounds) // 2]}
