"""Ground truth of a chronolink test bed.

Every namespace shares one kernel clock t, so the only clock differences are
the test-only virtual clocks the agents apply:
    v(t) = t + offset_ns + drift_ppm * 1e-6 * (t - t0_ns)
Arithmetic is exact (integers and Fractions); epoch nanoseconds never pass
through a float.
"""
from __future__ import annotations

import collections
import dataclasses
import math
import statistics
import decimal
import time
from fractions import Fraction
from typing import Any


def to_fraction(x: Any) -> Fraction:
    if isinstance(x, Fraction):
        return x
    if isinstance(x, float):
        return Fraction(repr(x))  # the decimal that was written, not the binary float
    if isinstance(x, (int, decimal.Decimal)):
        return Fraction(x)
    return Fraction(str(x))


def offset_rows(line: Any) -> list:
    """The solutions of one parsed offsets.jsonl line as rows
    ("chronolink.offset.v1" dicts), whichever form holds them
    (docs/formats.md): a row is itself, a columns line one row per node,
    its integers turned back into exact Fractions of ns; anything else none."""
    if not isinstance(line, dict):
        return []
    if line.get("schema") == "chronolink.offset.v1":
        return [line]
    if line.get("schema") != "chronolink.offset_columns.v1":
        return []

    def scaled(v, unit):
        return None if v is None else Fraction(v) / unit

    rows, node = [], 0
    for i, delta in enumerate(line.get("node_delta", [])):
        node += delta
        offset = line["offset_ps"][i]
        rows.append({"schema": "chronolink.offset.v1", "node": node, "reference": line.get("reference"),
                     "t_ns": line.get("t_ns"), "offset_ns": scaled(offset, 1000),
                     "drift": scaled(line["drift_ps_per_s"][i], 10**12),
                     "uncertainty_ns": scaled(line["uncertainty_ps"][i], 1000),
                     "residual_ns": scaled(line["residual_ps"][i], 1000), "reachable": offset is not None,
                     "component": line["component"][i], "edges_used": line["edges_used"][i],
                     "leader": line.get("leader"), "recomputed": line.get("recomputed", False)})
    return rows


@dataclasses.dataclass(frozen=True)
class VClock:
    """v(t) = t + offset_ns + drift_ppm*1e-6*(t - t0_ns), t the shared kernel clock."""
    offset_ns: int
    drift_ppm: Fraction
    t0_ns: int

    @classmethod
    def make(cls, offset_ns: Any, drift_ppm: Any, t0_ns: Any) -> "VClock":
        return cls(int(offset_ns), to_fraction(drift_ppm), int(t0_ns))

    @property
    def rate(self) -> Fraction:
        return self.drift_ppm / 1_000_000

    def at(self, t: Fraction | int) -> Fraction:
        return t + self.offset_ns + self.rate * (t - self.t0_ns)

    def true_time(self, v: Fraction | int) -> Fraction:
        """Inverse of at(): the shared-clock instant at which this clock reads v."""
        return self.t0_ns + (Fraction(v) - self.offset_ns - self.t0_ns) / (1 + self.rate)

    def rate_at(self, t=None) -> Fraction:
        return self.rate


def true_beta(x0_ns: Any, own: VClock, peer: VClock) -> Fraction:
    """True offset peer - own (ns) at the instant own's clock reads x0_ns."""
    t = own.true_time(to_fraction(x0_ns))
    return peer.at(t) - own.at(t)


class FitClockTruth:
    """A node's fit clock (clock/fit_clock.h), which its agent fits offsets
    in: F = realtime_ns + (raw - raw_ns)·(1 + rate_fine·1e-15), raw the
    node's CLOCK_MONOTONIC_RAW (a test bed oscillator; a linear virtual
    clock is its own RAW), each anchor from its raw_ns until the next's (an
    agent anchors again when F leaves REALTIME too far). The anchors are the
    "fit_clock" objects of the agent's edges.jsonl records. Exact, like the
    clocks it wraps."""

    def __init__(self, raw, anchors):
        if isinstance(anchors, dict):
            anchors = [anchors]
        self.raw = raw
        self.anchors = sorted(((int(a["raw_ns"]), int(a["realtime_ns"]), 1 + Fraction(int(a["rate_fine"]), 10**15))
                               for a in anchors), key=lambda a: a[0])
        if not self.anchors:
            raise ValueError("a fit clock needs an anchor")

    def _anchor_at_raw(self, r):
        chosen = self.anchors[0]
        for a in self.anchors:
            if a[0] <= r:
                chosen = a
        return chosen

    def at(self, t) -> Fraction:
        r = self.raw.at(t)
        raw0, f0, scale = self._anchor_at_raw(r)
        return f0 + (r - raw0) * scale

    def true_time(self, v) -> Fraction:
        # The newest anchor whose stretch holds v (where F jumped back, two do).
        for i in range(len(self.anchors) - 1, -1, -1):
            raw0, f0, scale = self.anchors[i]
            r = raw0 + (Fraction(v) - f0) / scale
            nxt = self.anchors[i + 1][0] if i + 1 < len(self.anchors) else None
            if (r >= raw0 or i == 0) and (nxt is None or r < nxt):
                return self.raw.true_time(r)
        raw0, f0, scale = self.anchors[0]
        return self.raw.true_time(raw0 + (Fraction(v) - f0) / scale)

    def rate_at(self, t=None) -> Fraction:
        scale = self._anchor_at_raw(self.raw.at(t))[2]
        return (1 + self.raw.rate_at(t)) * scale - 1


def fit_clock_truth(records, realtime, raw):
    """The clock a node's edges.jsonl records are on: its fit clock over
    `raw` with every anchor the records name, else its REALTIME (`realtime`;
    an agent run with --fit-clock realtime, or from before the fit clock)."""
    anchors = {}
    for r in records:
        a = r.get("fit_clock")
        if isinstance(a, dict):
            anchors[(a["raw_ns"], a["realtime_ns"], a["rate_fine"])] = a
    return FitClockTruth(raw, list(anchors.values())) if anchors else realtime


def fit_clock_bends(records) -> list[tuple[int, int, int]]:
    """The bends of a node's fit clock its edges.jsonl records show: where
    an anchor starts at its predecessor's F (a new rate without a step,
    docs/clocks.md "A new rate at the start"), (at_fit_ns, rate_before_fine,
    rate_after_fine), oldest first, as clock/fit_clock_remap.h takes them."""
    anchors = sorted({(int(a["raw_ns"]), int(a["realtime_ns"]), int(a["rate_fine"]))
                      for r in records if isinstance(a := r.get("fit_clock"), dict)})
    bends = []
    for (raw0, f0, rate0), (raw1, f1, rate1) in zip(anchors, anchors[1:]):
        old_f = f0 + (raw1 - raw0) + round(Fraction((raw1 - raw0) * rate0, 10**15))
        if abs(old_f - f1) <= 1:
            bends.append((f1, rate0, rate1))
    return bends


def straighten(bends, v: int) -> int:
    """FitClockRemap::Apply through every bend: an F value read before a
    bend onto the line of the rate after it, drawn back."""
    for at, before, after in bends:
        if v < at:
            v = at + round(Fraction((v - at) * (10**15 + after), 10**15 + before))
    return v


def true_alpha(own, peer, t=None) -> Fraction:
    """True drift d(peer - own)/d(own) at true instant t (any t for linear
    clocks; a test bed node clock's (clock_trajectory.Trajectory) drift
    changes with its wander and discipline)."""
    ro, rp = own.rate_at(t), peer.rate_at(t)
    return (rp - ro) / (1 + ro)


def load_record_clock(record: dict, cache: dict | None = None):
    """The true clock of the node that wrote an edges.jsonl record in test
    mode: its test bed clock state (CLOCK_REALTIME as a Trajectory) or its
    linear virtual clock; None outside test mode."""
    path = record.get("test_clock_state")
    if path:
        from clock_trajectory import NodeClockState
        if cache is not None and path in cache:
            return cache[path]
        clock = NodeClockState.load(path).realtime()
        if cache is not None:
            cache[path] = clock
        return clock
    v = record.get("test_virtual_clock")
    if v:
        return VClock.make(v["offset_ns"], repr(v["drift_ppm"]), v["t0_ns"])
    return None


def sigma_coverage(errors_and_sigmas: list[tuple[float, float]]) -> dict | None:
    """How honest a reported one-sigma is, from (error, sigma) pairs against
    the truth: the share of |error| within 1, 2 and 3 sigma, and the median
    sigma over the median |error| (issue 12's targets: 3-sigma coverage
    >= 0.99 with that ratio <= 3). None without a usable pair."""
    pairs = [(abs(float(e)), float(s)) for e, s in errors_and_sigmas
             if s is not None and float(s) > 0 and math.isfinite(float(s)) and math.isfinite(float(e))]
    if not pairs:
        return None
    n = len(pairs)
    cover = {k: sum(1 for e, s in pairs if e <= k * s) / n for k in (1, 2, 3)}
    med_err = statistics.median(e for e, _ in pairs)
    med_sigma = statistics.median(s for _, s in pairs)
    return {"n": n, "cover_1s": cover[1], "cover_2s": cover[2], "cover_3s": cover[3],
            "median_sigma_ns": med_sigma, "median_abs_error_ns": med_err,
            "width_ratio": med_sigma / med_err if med_err > 0 else math.inf}


def format_sigma_coverage(c: dict | None) -> str:
    if c is None:
        return "no sigma reported"
    return (f"sigma covers {100 * c['cover_1s']:.0f} / {100 * c['cover_2s']:.0f} / "
            f"{100 * c['cover_3s']:.1f} % at 1/2/3 sigma; median sigma {c['median_sigma_ns']:.1f} ns "
            f"= {c['width_ratio']:.2f} x median |error| ({c['n']} estimates)")


def quantum_from_steps(steps: list[int]) -> int:
    """The step (ns) in which a clock's readings advance, from the positive
    differences between consecutive readings (repeats included): distinct
    differences within 1 ns of each other are one step (the ns conversion
    rounds), and the most common gap between those groups is the quantum.
    1 when the differences form one run (a clock that resolves every ns)."""
    groups: list[list[int]] = []
    for d in sorted(set(steps)):
        if groups and d - groups[-1][-1] <= 1:
            groups[-1].append(d)
        else:
            groups.append([d])
    if len(groups) < 3:
        return 1
    gaps = collections.Counter(b[0] - a[0] for a, b in zip(groups, groups[1:]))
    q = gaps.most_common(1)[0][0]
    # A quantum only if nearly every reading's difference sits on its grid
    # (within the 1 ns of rounding), counting repeats: sparse differences of
    # a fine clock do not, and a few odd ones (a read interrupted) may not.
    on_grid = sum(1 for d in steps if min(d % q, q - d % q) <= 1)
    return q if q > 1 and on_grid >= 0.9 * len(steps) else 1


def clock_quantum_ns(reads: int = 200_000, clock: int = time.CLOCK_REALTIME) -> int:
    """How finely this machine's clock (and so every kernel timestamp, which
    reads the same clocksource) resolves time: on some VMs it advances in
    ~10 ns steps, so one-way delays, and the offsets fitted to their
    extremes, come in steps of a few ns whatever the estimator does."""
    diffs = []
    prev = time.clock_gettime_ns(clock)
    for _ in range(reads):
        t = time.clock_gettime_ns(clock)
        if t > prev:
            diffs.append(t - prev)
        prev = t
    return quantum_from_steps(diffs)


def error_shape(errors: list[float], quantum_ns: int | None = None) -> dict | None:
    """How the |errors| of a set of windows are spread, for judging any sigma
    against them: the share under 1 ns, the share at or beyond half the
    clock's quantum (one step's worth of error), and p99 / (3 * median):
    the least median sigma / median |error| of a sigma that is the same in
    every window and still covers the p99 at 3 sigma."""
    a = sorted(abs(float(e)) for e in errors if math.isfinite(float(e)))
    if not a:
        return None
    n = len(a)
    med = statistics.median(a)
    p99 = a[min(n - 1, int(0.99 * n))]
    return {"n": n, "below_1ns": sum(1 for e in a if e < 1) / n,
            "at_half_quantum": None if not quantum_ns else sum(1 for e in a if e >= quantum_ns / 2) / n,
            "uniform_sigma_ratio": p99 / (3 * med) if med > 0 else math.inf}


def format_error_shape(c: dict | None, quantum_ns: int | None = None, each: str = "window") -> str:
    if c is None:
        return "no errors"
    half = ("" if c["at_half_quantum"] is None
            else f", >= {quantum_ns / 2:g} ns (half the clock's quantum) {100 * c['at_half_quantum']:.0f} %")
    return (f"|error| < 1 ns {100 * c['below_1ns']:.0f} %{half}; a sigma the same in every {each} "
            f"needs >= {c['uniform_sigma_ratio']:.2f} x median |error| to cover the p99 at 3 sigma")
