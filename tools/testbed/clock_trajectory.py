"""A node clock as deployed clocks behave, exactly: the Python side of
clock/clock_trajectory.h.

The clock is a piecewise-linear function of the test bed's true time t (the
one kernel clock every namespace shares, int64 ns):

    c(t) = value_k + (t - t_k) * slope_k     for t_k <= t < t_{k+1}

in fine units (1e-15 ns), slope in fine units per ns (1e15: a perfect
clock). A reading is floor(c(t) / 1e15) ns. Knots come from a trajectory file
(JSON lines, docs/testbed.md "Clocks as deployed"): a header line
{"chronolink_clock_trajectory": 1, ...}, then one {"t_ns", "value_fine"
(decimal text), "slope"} per knot. Everything is integer or Fraction
arithmetic: epoch nanoseconds never pass through a float.
"""
from __future__ import annotations

import bisect
import dataclasses
import json
import struct
import sys
from fractions import Fraction
from typing import Iterable

FINE_PER_NS = 10**15
FORMAT_KEY = "chronolink_clock_trajectory"


@dataclasses.dataclass(frozen=True)
class Knot:
    t_ns: int
    value_fine: int
    slope: int


class Trajectory:
    """A clock's knots, and what it reads at any true instant."""

    def __init__(self, knots: Iterable[Knot], header: dict | None = None):
        self.knots = list(knots)
        if not self.knots:
            raise ValueError("a trajectory needs at least one knot")
        if any(b.t_ns <= a.t_ns for a, b in zip(self.knots, self.knots[1:])):
            raise ValueError("trajectory knots must move forward in time")
        self.header = header or {}
        self._t = [k.t_ns for k in self.knots]
        # The least knot value from each knot on: it never falls, so the last
        # knot at or below a value is a bisection away even across steps back
        # (a baseline's tens of thousands of samples against thousands of
        # knots): the last i whose suffix minimum is at or below it.
        self._suffix_min = [k.value_fine for k in self.knots]
        for i in range(len(self._suffix_min) - 2, -1, -1):
            self._suffix_min[i] = min(self._suffix_min[i], self._suffix_min[i + 1])

    @classmethod
    def linear(cls, offset_ns: int, drift_ppm, t0_ns: int) -> "Trajectory":
        """The old linear virtual clock v = t + offset + drift·(t - t0) as one
        knot (drift_ppm must be a multiple of 1e-9 ppm to be exact)."""
        slope = FINE_PER_NS + Fraction(drift_ppm) * 10**9
        if slope.denominator != 1:
            raise ValueError(f"drift {drift_ppm} ppm is finer than 1e-15 per ns")
        return cls([Knot(int(t0_ns), (int(t0_ns) + int(offset_ns)) * FINE_PER_NS, int(slope))])

    @classmethod
    def from_lines(cls, lines: Iterable[str], name: str = "trajectory") -> "Trajectory":
        header = None
        knots = []
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{name}:{n}: not JSON: {e}") from None
            if header is None:
                if obj.get(FORMAT_KEY) != 1:
                    raise ValueError(f"{name}:{n}: not a version 1 clock trajectory (no \"{FORMAT_KEY}\": 1)")
                header = obj
                continue
            try:
                t, v, s = obj["t_ns"], obj["value_fine"], obj["slope"]
                if not (isinstance(t, int) and isinstance(s, int) and isinstance(v, str)):
                    raise TypeError
                knots.append(Knot(t, int(v, 10), s))
            except (KeyError, TypeError, ValueError):
                raise ValueError(f"{name}:{n}: a knot needs integer t_ns and slope and decimal-text value_fine")
        if header is None:
            raise ValueError(f"{name}: empty")
        return cls(knots, header)

    @classmethod
    def load(cls, path: str) -> "Trajectory":
        with open(path, encoding="utf-8") as f:
            return cls.from_lines(f, path)

    def _segment(self, t) -> Knot:
        i = bisect.bisect_right(self._t, t) - 1
        return self.knots[max(i, 0)]

    def fine_at(self, t) -> Fraction:
        """The clock at true t (int or Fraction), exactly, in fine units."""
        k = self._segment(t)
        return k.value_fine + (t - k.t_ns) * k.slope

    def at(self, t) -> Fraction:
        """The clock at true t in ns (exact, before the reading's floor)."""
        return Fraction(self.fine_at(t)) / FINE_PER_NS

    def read(self, t: int) -> int:
        """What the clock reads at true t: whole ns, floored."""
        return self.fine_at(t) // FINE_PER_NS

    def rate_at(self, t) -> Fraction:
        """dc/dt - 1 at true t: the clock's frequency error there."""
        return Fraction(self._segment(t).slope - FINE_PER_NS, FINE_PER_NS)

    @staticmethod
    def sum(a: "Trajectory", b: "Trajectory") -> "Trajectory":
        """a + b at every instant (a clock and a correction): knots at the
        union of both, each value and slope the sum."""
        at = sorted({k.t_ns for k in a.knots} | {k.t_ns for k in b.knots})
        return Trajectory([Knot(t, a.fine_at(t) + b.fine_at(t), a._segment(t).slope + b._segment(t).slope)
                           for t in at])

    def last_knot_at_or_below_by_scan(self, target_fine) -> int:
        """The simple path true_time's bisection must agree with (checked on
        generated trajectories by bench/baselines.py --selftest): the last
        knot whose value is at or below target_fine, else the first."""
        for i in range(len(self.knots) - 1, -1, -1):
            if self.knots[i].value_fine <= target_fine:
                return i
        return 0

    def true_time(self, v) -> Fraction:
        """The true instant at which the clock (continuous, not floored) is
        at v ns; across a step back the later one, skipped forward the step's
        instant. Needs every slope positive."""
        target = Fraction(v) * FINE_PER_NS
        k = max(bisect.bisect_right(self._suffix_min, target) - 1, 0)
        knot = self.knots[k]
        t = knot.t_ns + (target - knot.value_fine) / knot.slope
        if k + 1 < len(self.knots) and t > self.knots[k + 1].t_ns:
            t = Fraction(self.knots[k + 1].t_ns)
        return t


HEADER_BYTES = 128
KNOT_BYTES = 48
_HEADER = struct.Struct("=8sIIQIIIIQI")
_KNOT = struct.Struct("=qqQqqQ")


def _fine(hi: int, lo: int) -> int:
    return (hi << 64) | lo


class NodeClockState:
    """A test bed node's clock file (clock/clock_state_file.h): the
    oscillator (CLOCK_MONOTONIC_RAW) and the discipline's correction;
    CLOCK_REALTIME = raw + correction, CLOCK_MONOTONIC the same without
    its steps. Exact: readings are floors of integer fine values."""

    def __init__(self, node: int, raw: Trajectory, correction: list[tuple[Knot, int]]):
        self.node = node
        self.raw = raw
        self.correction = Trajectory([k for k, _ in correction])
        self._steps = [s for _, s in correction]

    @classmethod
    def load(cls, path: str) -> "NodeClockState":
        with open(path, "rb") as f:
            data = f.read()
        if len(data) < HEADER_BYTES:
            raise ValueError(f"{path}: too short to be a clock state file")
        (magic, version, knot_bytes, seq, raw_n, raw_cap, corr_n, corr_cap, _generation,
         node) = _HEADER.unpack_from(data, 0)
        if magic != b"CLKSTAT1" or version != 1 or knot_bytes != KNOT_BYTES:
            raise ValueError(f"{path}: not a version 1 clock state file")
        if seq % 2 or len(data) != HEADER_BYTES + (raw_cap + corr_cap) * KNOT_BYTES or not raw_n or not corr_n:
            raise ValueError(f"{path}: torn or inconsistent (seq {seq}); read it again")

        def knot(i: int) -> tuple[Knot, int]:
            t, vhi, vlo, slope, shi, slo = _KNOT.unpack_from(data, HEADER_BYTES + i * KNOT_BYTES)
            return Knot(t, _fine(vhi, vlo), slope), _fine(shi, slo)

        raw = Trajectory([knot(i)[0] for i in range(raw_n)])
        return cls(node, raw, [knot(raw_cap + i) for i in range(corr_n)])

    def realtime(self) -> Trajectory:
        """CLOCK_REALTIME as one trajectory (for truth.true_beta and kin)."""
        return Trajectory.sum(self.raw, self.correction)

    def _steps_at(self, t) -> int:
        i = bisect.bisect_right([k.t_ns for k in self.correction.knots], t) - 1
        return self._steps[max(i, 0)]

    def realtime_fine(self, t) -> Fraction:
        return self.raw.fine_at(t) + self.correction.fine_at(t)

    def realtime_at(self, t: int) -> int:
        return self.realtime_fine(t) // FINE_PER_NS

    def monotonic_at(self, t: int) -> int:
        return (self.realtime_fine(t) - self._steps_at(t)) // FINE_PER_NS

    def raw_at(self, t: int) -> int:
        return self.raw.read(t)


def _main(argv: list[str]) -> int:
    import argparse
    ap = argparse.ArgumentParser(description="Read a test bed node's clock state file: what each clock "
                                             "reads at the given true instants (ns), one line each.")
    ap.add_argument("state", help="the node's clock state file")
    ap.add_argument("instants", nargs="+", type=int, help="true instants, int64 ns")
    args = ap.parse_args(argv)
    try:
        state = NodeClockState.load(args.state)
    except (OSError, ValueError) as e:
        print(f"clock_trajectory: {e}", file=sys.stderr)
        return 2
    for t in args.instants:
        print(t, state.raw_at(t), state.realtime_at(t), state.monotonic_at(t))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
