#!/usr/bin/env python3
"""Replay a window's max-margin fit over a stamp-logged run, with other
choices of span and probes, against each packet's true one-way delay.

Every probe packet of an accuracy_bench run made with --stamp-logs has both
its stamps (each agent's stamps.jsonl) and its true one-way delay (the
stamps mapped to true time through each node's fit clock, exactly:
tools/testbed/truth.py, as bench/path_floor.py does). A max-margin line
through those packets' bounds with the true offset taken out (a forward
packet bounds the offset from above by its delay, a reverse one from below
by minus its delay) errs at x0 by exactly what the path's delays make it
err; the clocks' wander, which the agent's line must also follow, is not in
it. So an estimator change that acts on which packets a fit takes, or on
its span, can be measured here in seconds over saved runs, against the same
packets, instead of in a new 5-minute run whose path differs.

Each policy names a span, a packet set and the floor points:
  span    agent (the span the agent took, edges.jsonl fit_start/fit_end),
          S (seconds, centred on the window), or S@D (S seconds ending D
          seconds after the window's end: a trailing span, what a window
          could be fitted on D seconds after it ends)
  packets own (the prober's own session) or both (every probe of the
          link: the peer's session too, mirrored into the prober's frame,
          as the agent fits with --fit-probes link)
  K       optional: the line rests on the mean of the K deepest bounds per
          side (docs/estimator.md §4b), K = min(K, bounds per side / 16) as
          the agent takes it; agent: what the agent's records say
          (edges.jsonl floor_points); absent: 1, the hard margin
written SPAN/PACKETS[/K], e.g. agent/own, 12/both, 12@1/own, agent/both/8.
A span S, S@D or chooser:... followed by +half gives the mean of its line
and its later half's, the agent's rule for chosen spans over its longest
centred one since 2026-12-06 (--fit-later-half; agent/estimate/
fit_span_range.h): e.g. 20@2+half/both/agent/gain. The agent's spans
(agent) take the later half where its records say it did (later_half).
The agent's own policy, agent/PACKETS/agent, also takes the slope the
agent's line took where it leaned on its edge's recent drift (edges.jsonl
drift_prior_taken, docs/estimator.md §4c); every other policy fits its own
slope (agent/both/8: the same spans and points, each window's own slope).
An optional fourth field sets the slope: own, median (the median of the
prober's last 20 own slopes from the fifth on) or gain (that median moved
toward the window's own by the agent's gain from its records' chooser
evidence: the previous record's, which is what the agent's chooser held
when it fitted the window), e.g. agent/both/agent/own,
agent/both/agent/gain: what --fit-drift-windows would have done on a run
made before it. On a run made with it, agent/both/agent/gain replays the
agent's own errors (v1, u5: the same p99 and max).
A span chooser:M is the one the agent's span chooser's model picks for
each window from the evidence its record carries (fit_span_evidence), up
to M seconds; one longer than the run's longest centred span ends where
that one ends and reaches back (agent/estimate/fit_span_range.h), e.g.
chooser:6/both/agent, chooser:10/both/agent. chooser:M:C moves to the
model's span as the agent's chooser does: once it errs a tenth less than
the span in force, in C windows in a row (the agent's C is 4); each
window's fit on the span in force before its own record,
the start span first. Without C, each window takes its own pick.
chooser:M[:C]@S0 starts at S0 seconds instead of the chooser's start span
(6 s of 4-10 s), e.g. chooser:10:4@4/both/agent, as the agent did until
2026-12-05. --longest-centred-s S replays the chooser as an agent with
--fit-span-max-s S would have placed its spans (centred up to S), where
the run's own agent centred them up to its own.

It prints, per policy, |error| p50 / p99 / max over the agent's kernel
windows in the measured span, each prober's median signed error (what a
path or prober asymmetry adds), and first how far the replay of the
agent's own policy (agent/both/agent where its records say its fits took
the peer's session, tuples_peer_session; else agent/own/agent) stands from the
errors the agent's windows made (results.json): the replay's validity on
that run. With --wander the bounds also carry the wander of the two nodes'
oscillators (what no straight line over the run follows), on true time, so
a policy's figures are what the agent would have erred, not the path's
part alone.

    python3 bench/fit_replay.py OUT/routed-90pct [--wander] [--policy agent/own --policy 12/both/8 ...]
    python3 bench/fit_replay.py --selftest

No root: only saved runs (accuracy_bench --stamp-logs --out OUT). Needs
numpy (Debian's python3-numpy; run it with /usr/bin/python3 where another
python3 comes first on PATH).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tools", "testbed"))
from baselines import SelfTestChecks, percentile  # noqa: E402  (numpy's linear, as every bench prints)
from path_floor import read_stamp_log, scenario_clocks, stamped_packets  # noqa: E402

NS_PER_S = 1_000_000_000
SOURCE = "socket_software"
DEFAULT_POLICIES = ["agent/own", "agent/both", "agent/both/8", "12/both/8", "12@1/both/8"]
BOUNDS_PER_FLOOR_POINT = 16  # agent/estimate/max_margin_fit.h kBoundsPerFloorPoint
DRIFT_SLOPES = ("agent", "own", "median", "gain")
DRIFT_WINDOWS, DRIFT_MIN_WINDOWS = 20, 5  # agent/estimate/edge_drift_history.h EdgeDriftHistoryOptions


@dataclass
class Bounds:
    """One prober's bounds, sorted by x: x on the prober's fit clock (ns),
    y the bound less the true offset (ns), upper or not, own session or the peer's."""
    x: "np.ndarray"
    y: "np.ndarray"
    upper: "np.ndarray"
    own: "np.ndarray"


class Wander:
    """The part of the offset between two nodes' oscillators (their
    MONOTONIC_RAW, which the fit clocks scale and shift) that no straight
    line over the run follows: what an agent's line must follow within its
    span. With it the replay errs as the agent's fit does (to its soft
    margin), not by the path alone. x is true time then: a fit clock's
    re-anchor shifts its stamps, not the oscillators."""

    def __init__(self, clocks: dict, t_first, t_last):
        import numpy as np
        self.osc = {n: getattr(c, "raw", c) for n, c in clocks.items()}
        ts = np.linspace(float(t_first), float(t_last), 301)
        self.t0 = int(t_first)
        th = np.array([self._theta(int(t)) for t in ts])
        self.b, self.a = np.polyfit(ts - self.t0, th, 1)

    def _theta(self, t: int) -> float:
        """Oscillator 2 - oscillator 1 at true time t, ns."""
        return float(self.osc[2].at(t) - self.osc[1].at(t))

    def of(self, n: int, t: int) -> float:
        """In node n's frame (peer - n), less the run's straight line."""
        w = self._theta(t) - (self.a + self.b * (t - self.t0))
        return w if n == 1 else -w

    def rate_ns_per_sqrt_s(self, t_first: int, t_last: int, step_ns: int, lag: int = 4) -> float:
        """The true wander as the span chooser models it, a random walk of
        w ns/sqrt(s): from the second differences of the two oscillators'
        difference at `lag` steps, whose variance is 2 w^2 lag step."""
        import numpy as np
        th = np.array([self._theta(int(t)) for t in range(int(t_first), int(t_last), int(step_ns))])
        d2 = th[2 * lag:] - 2 * th[lag:-lag] + th[:-2 * lag]
        return float(np.sqrt(np.mean(d2 * d2) / (2 * lag * step_ns / NS_PER_S))) if len(d2) else float("nan")


def link_bounds(logs: dict[int, dict], clocks: dict, source: str = SOURCE,
                wander: "Wander | None" = None) -> dict[int, Bounds]:
    """Every forward and reverse packet both ends stamped with `source`, as
    bounds in each prober's frame (offset peer - prober), with the peer's
    session's packets mirrored in; with `wander`, on true time and with the
    oscillators' wander added."""
    import numpy as np
    rows: dict[int, list] = {1: [], 2: []}
    for key, tx, rx in stamped_packets(logs, source):
        kind, sender, receiver = key[0], key[1], key[2]
        if kind not in ("forward", "reverse"):
            continue
        t_tx, t_rx = clocks[sender].true_time(tx), clocks[receiver].true_time(rx)
        delay = float(t_rx - t_tx)
        # In the frame of a node n, a packet n -> peer bounds (peer - n)
        # from above by its delay, a packet peer -> n from below by minus
        # it; x is n's own stamp of it (n's fit clock, the agent's x).
        prober = sender if kind == "forward" else receiver
        for n in (sender, receiver):
            x, y = (tx, delay) if n == sender else (rx, -delay)
            if wander is not None:
                x = int(t_tx if n == sender else t_rx)
                y += wander.of(n, x)
            rows[n].append((x, y, n == sender, n == prober))
    out = {}
    for n, r in rows.items():
        r.sort()
        out[n] = Bounds(np.array([a[0] for a in r], dtype=np.int64), np.array([a[1] for a in r]),
                        np.array([a[2] for a in r], dtype=bool), np.array([a[3] for a in r], dtype=bool))
    return out


def max_margin_at(xu, yu, xl, yl, x0: int) -> float:
    """The max-vertical-margin line's value at x0 (docs/estimator.md §2):
    the slope maximises min(upper - a x) - max(lower - a x), a concave
    function of a, by ternary search; the line runs midway."""
    import numpy as np
    if len(xu) == 0 or len(xl) == 0:
        return float("nan")
    du = (xu - x0).astype(float)
    dl = (xl - x0).astype(float)

    def gap(a):
        return np.min(yu - a * du) - np.max(yl - a * dl)
    # 10 ppm: the delays' own slope across a span, far more than any
    a = ternary_max(gap, -1e-5, 1e-5, 120)
    return float((np.min(yu - a * du) + np.max(yl - a * dl)) / 2)


def ternary_max(f, lo: float, hi: float, steps: int) -> float:
    """The maximiser of a concave f on [lo, hi], by ternary search."""
    for _ in range(steps):
        m1, m2 = lo + (hi - lo) / 3, hi - (hi - lo) / 3
        if f(m1) < f(m2):
            lo = m1
        else:
            hi = m2
    return (lo + hi) / 2


def floor_means_at(xu, yu, xl, yl, x0: int, k: int) -> float:
    """The line on the floors' means at x0 (docs/estimator.md §4b): the
    slope maximises the mean of the k smallest upper residuals less the mean
    of the k largest lower ones (concave in the slope), the line runs
    midway; k = 1 is max_margin_at's line."""
    import numpy as np
    if k <= 1:
        return max_margin_at(xu, yu, xl, yl, x0)
    if len(xu) < k or len(xl) < k:
        return float("nan")
    du = (xu - x0).astype(float)
    dl = (xl - x0).astype(float)

    def means(a):
        return (np.partition(yu - a * du, k - 1)[:k].mean(), -np.partition(-(yl - a * dl), k - 1)[:k].mean())

    def gap(a):
        u, lo_ = means(a)
        return u - lo_
    grid = np.linspace(-1e-5, 1e-5, 81)  # concave, but flat-topped stretches make a grid start safer
    i = int(np.argmax([gap(a) for a in grid]))
    u, lo_ = means(ternary_max(gap, grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)], 60))
    return float((u + lo_) / 2)


def floor_means_at_slope(xu, yu, xl, yl, x0: int, k: int, a: float) -> float:
    """The line of slope a on the floors' means (docs/estimator.md §4c: an
    agent's line that leaned on its edge's recent drift), at x0."""
    import numpy as np
    if len(xu) < k or len(xl) < k:
        return float("nan")
    ru = yu - a * (xu - x0).astype(float)
    rl = yl - a * (xl - x0).astype(float)
    return float((np.partition(ru, k - 1)[:k].mean() - np.partition(-rl, k - 1)[:k].mean()) / 2)


def start_span_ns(window_ns: int, shortest_ns: int, longest_ns: int) -> int:
    """FitSpanChooser::StartSpan: the longest span, in whole windows from the
    shortest (agents before 2026-12-06 started at the span whose worst ratio
    to the shortest and the longest was least: 6 s of 4-10 s)."""
    if longest_ns <= shortest_ns:
        return shortest_ns
    return shortest_ns + (longest_ns - shortest_ns) // window_ns * window_ns


def model_variance(evidence: dict, window_ns: int, span_ns: int) -> float:
    """FitSpanChooser::SpanVariance: n^2 W / S + 0.15 w^2 S, for the wander
    beyond doubt (wander_lower_ns_per_sqrt_s; the estimate itself in records
    of agents before 2026-12-06, which chose on it)."""
    n = evidence["window_noise_ns"]
    w = evidence.get("wander_lower_ns_per_sqrt_s", evidence["wander_ns_per_sqrt_s"])
    return n * n * window_ns / span_ns + 0.15 * w * w * span_ns / NS_PER_S


def chosen_span_ns(evidence: dict | None, window_ns: int, longest_ns: int, start_ns: int = 0) -> int:
    """The span agent/estimate/fit_span_chooser.cc's model errs least at, in
    whole windows from two to longest_ns, for a window's fit_span_evidence;
    while a window has none, start_ns or the chooser's start span. The
    chooser's hysteresis is hysteresis_spans'."""
    shortest = min(2 * window_ns, longest_ns)
    if not evidence:
        return start_ns or start_span_ns(window_ns, shortest, longest_ns)
    return min(range(shortest, longest_ns + 1, window_ns), key=lambda s: model_variance(evidence, window_ns, s))


def hysteresis_spans(windows: list[dict], window_ns: int, longest_ns: int, confirm: int, start_ns: int = 0,
                     gain: float = 1.1) -> dict[tuple[int, int], int]:
    """The span in force at each window, (node, x0_ns) -> ns, as
    FitSpanChooser::Add moves it: from the start span, to the model's pick
    once that errs `gain` times less than the span in force, in `confirm`
    windows in a row each wanting the same way; a window's fit takes the
    span in force before its own evidence (edges.jsonl records that
    evidence with the window)."""
    shortest = min(2 * window_ns, longest_ns)
    out = {}
    for node in sorted({w["node"] for w in windows}):
        span, wanting = start_ns or start_span_ns(window_ns, shortest, longest_ns), 0
        for w in sorted((w for w in windows if w["node"] == node), key=lambda w: w["x0_ns"]):
            out[(node, w["x0_ns"])] = span
            e = w.get("chooser_evidence", w.get("span_evidence"))
            if not e:
                continue
            best = chosen_span_ns(e, window_ns, longest_ns)
            if not model_variance(e, window_ns, span) > gain * model_variance(e, window_ns, best):
                wanting = 0
                continue
            way = 1 if best > span else -1
            wanting = wanting + way if wanting * way > 0 else way
            if wanting * way >= confirm:
                span, wanting = best, 0
    return out


@dataclass
class Policy:
    name: str
    span_s: float | None  # None: the agent's span (or the chooser's, with chooser_max_s)
    trailing_s: float | None  # None: centred on the window; else the span ends this long after the window
    both_sessions: bool
    floor_points: int | None = 1  # None: the agent's (edges.jsonl floor_points)
    chooser_max_s: float | None = None  # the span chooser's pick up to this, reaching back past the run's centred longest
    chooser_confirm: int = 0  # > 0: moved to as the chooser does, in this many windows in a row
    chooser_start_s: float = 0  # > 0: the span before any evidence (else the chooser's start span)
    slope: str = "agent"  # agent | own | median | gain (the line's slope: DRIFT_SLOPES)
    later_half: bool = False  # +half: the mean of the span's line and its later half's, as the agent's rule

    @classmethod
    def parse(cls, text: str) -> "Policy":
        policy = cls._parse(text)
        if text.count("/") == 3:
            policy.slope = text.rsplit("/", 1)[1]
        return policy

    @classmethod
    def _parse(cls, text: str) -> "Policy":
        span = text.split("/", 1)[0]
        if span.endswith("+half") and span != "agent+half":
            policy = cls._parse(text.replace("+half", "", 1))
            policy.name, policy.later_half = text, True
            return policy
        try:
            span, packets, *rest = text.split("/")
            if packets not in ("own", "both") or len(rest) > 2:
                raise ValueError(f"packets must be own or both, not {packets!r}")
            slope = rest.pop() if len(rest) == 2 else "agent"  # set by parse
            if slope not in DRIFT_SLOPES:
                raise ValueError(f"the slope must be one of {', '.join(DRIFT_SLOPES)}, not {slope!r}")
            floor = 1
            if rest:
                floor = None if rest[0] == "agent" else int(rest[0])
                if floor is not None and not 1 <= floor <= 64:
                    raise ValueError("K must be 1..64 or agent")
            if span == "agent":
                return cls(text, None, None, packets == "both", floor)
            if span.startswith("chooser:"):
                chooser, _, start_text = span.partition("@")
                longest_text, _, confirm_text = chooser.split(":", 1)[1].partition(":")
                longest, confirm = float(longest_text), int(confirm_text) if confirm_text else 0
                start = float(start_text) if start_text else 0.0
                if not 0 < longest <= 60:
                    raise ValueError("the chooser's longest span must be in (0, 60] s")
                if confirm_text and not 1 <= confirm <= 64:
                    raise ValueError("the chooser's windows in a row must be 1..64")
                if start_text and not 0 < start <= longest:
                    raise ValueError("the chooser's start span must be in (0, M] s")
                return cls(text, None, None, packets == "both", floor, longest, confirm, start)
            s, _, d = span.partition("@")
            p = cls(text, float(s), float(d) if d else None, packets == "both", floor)
            if not p.span_s > 0 or (p.trailing_s is not None and p.trailing_s < 0):
                raise ValueError("the span must be > 0 s and the trailing delay >= 0 s")
            return p
        except ValueError as e:
            raise ValueError(f"policy {text!r}: {e} (SPAN[+half]/PACKETS[/K]: agent|S|S@D|chooser:M[:C][@S0] / "
                             f"own|both / 1..64|agent)") from None

    def agents_slope(self) -> bool:
        """The agent's own policy (its spans and floor points) takes the
        slope the agent's line took where it leaned on its edge's drift
        (edges.jsonl drift_prior_taken); every other policy fits its own."""
        return (self.slope == "agent" and self.span_s is None and self.chooser_max_s is None
                and self.floor_points is None)

    def span(self, window: dict, window_ns: int) -> tuple[int, int]:
        if self.chooser_max_s is not None:
            # Centred up to the run's longest centred span; a longer one ends
            # where that one ends (agent/estimate/fit_span_range.h).
            s = window.get("chooser_span_ns") or chosen_span_ns(window.get("chooser_evidence",
                                                                            window.get("span_evidence")), window_ns,
                                                                 int(self.chooser_max_s * NS_PER_S),
                                                                 int(self.chooser_start_s * NS_PER_S))
            centred = min(s, window["centred_span_ns"])
            end = window["x0_ns"] + centred // 2
            return end - s, end
        if self.span_s is None:
            return window["fit_start_ns"], window["fit_end_ns"]
        s = int(self.span_s * NS_PER_S)
        if self.trailing_s is None:
            return window["x0_ns"] - s // 2, window["x0_ns"] + s // 2
        end = window["x0_ns"] + window_ns // 2 + int(self.trailing_s * NS_PER_S)
        return end - s, end


def later_half_span(policy: Policy, w: dict, lo: int, hi: int, window_ns: int) -> tuple[int, int, float | None] | None:
    """The later half a window's line is averaged with, and the agent's
    pull on its slope: the agent's record's (its spans), or the agent's rule
    for a +half policy (agent/estimate/fit_span_range.h LaterHalfNs: half
    the span in whole windows, at least the longest centred span, for spans
    over that one). The span is on true time with --wander: a few ppm off
    whole windows, hence the tolerance."""
    if policy.span_s is None and policy.chooser_max_s is None:
        h = w.get("later_half")
        return (h["fit_start_ns"], h["fit_end_ns"], h["drift_pull"]) if h else None
    centred = w["centred_span_ns"]
    if not policy.later_half or hi - lo <= centred * (1 + 1e-4):
        return None
    half = max(centred, int((hi - lo) / 2 / window_ns + 1e-3) * window_ns)
    return hi - half, hi, None


def lines_apart_in_bands(r: dict) -> dict:
    """How far a record's lines lie from each other at x0, in their bands
    (uncertainty_ns): the later half's from the span's over the two bands,
    where the record carries the half's band (since 2026-12-06, afternoon;
    the span's line is twice the mean less the half's), and the floors'
    line from the hard one (floor_shift_ns) over the band. Over 1, the two
    cannot both be separators (EdgeWindows refuses such a half, the fit
    such a floors' line: floors_refused, since 2026-12-06 evening)."""
    out = {"half_refused": bool(r.get("later_half_refused")), "floors_refused": bool(r.get("floors_refused"))}
    h = r.get("later_half")
    if h and h.get("uncertainty_ns") is not None and r.get("beta_ns") is not None:
        span_beta = 2 * r["beta_ns"] - h["beta_ns"]
        out["half_apart"] = abs(h["beta_ns"] - span_beta) / (h["uncertainty_ns"] + r["uncertainty_ns"])
    if r.get("floor_shift_ns") is not None and r.get("uncertainty_ns"):
        out["floors_apart"] = abs(r["floor_shift_ns"]) / r["uncertainty_ns"]
    return out


def lines_apart_summary(windows: list[dict]) -> str | None:
    """What lines_apart_in_bands gives over the windows, a line to print."""
    import numpy as np
    parts = []
    for key, what in (("half_apart", "the later half's line from the span's, over the two bands"),
                      ("floors_apart", "the floors' line from the hard one, over the band")):
        v = np.array([w[key] for w in windows if key in w])
        if len(v):
            parts.append(f"{what}: p99 {np.percentile(v, 99):.3f}, max {v.max():.3f} ({len(v)} windows)")
    if not parts:
        return None
    return "; ".join(parts) + (f"; halves refused {sum(w.get('half_refused', False) for w in windows)}"
                               f", floors' lines refused {sum(w.get('floors_refused', False) for w in windows)}")


def half_rule_against_agent(windows: list[dict], window_ns: int) -> tuple[int, int, int]:
    """The +half rule (later_half_span) on each of the agent's own spans,
    on its node's clock, against the half its record says it took: windows
    where the two agree (both none, or the same span), where the rule gives
    a half and the record none (the agent's half had no max-margin fit, as
    a thin half may not), and where they disagree otherwise, which is the
    rule's copy gone wrong. The replay's one check against the C++ rule
    (FitSpanRange::LaterHalfNs)."""
    rule = Policy.parse("20@2+half/both")
    agree = thin = wrong = 0
    for w in windows:
        if not w.get("half_recorded", True):
            continue  # an agent from before the half: its records have no later_half
        mine, theirs = later_half_span(rule, w, w["fit_start_ns"], w["fit_end_ns"], window_ns), w.get("later_half")
        if theirs is None and mine is None or theirs and mine and mine[:2] == (theirs["fit_start_ns"],
                                                                              theirs["fit_end_ns"]):
            agree += 1
        elif theirs is None:
            thin += 1
        else:
            wrong += 1
    return agree, thin, wrong


def line_error(b: Bounds, w: dict, lo: int, hi: int, policy: Policy, pull: float | None, history: list[float],
               window_ns: int) -> float:
    """The error at w's x0 of the policy's line over the bounds in [lo, hi)."""
    i, j = b.x.searchsorted(lo), b.x.searchsorted(hi)
    keep = slice(i, j)
    sel = b.own[keep] | policy.both_sessions
    up, x, y = b.upper[keep] & sel, b.x[keep], b.y[keep]
    low = ~b.upper[keep] & sel
    wanted = w.get("floor_points", 1) if policy.floor_points is None else policy.floor_points
    k = max(1, min(wanted, min(int(up.sum()), int(low.sum())) // BOUNDS_PER_FLOOR_POINT))
    if pull is None and policy.slope not in ("median", "gain"):
        return floor_means_at(x[up], y[up], x[low], y[low], w["x0_ns"], k)
    own_at = [floor_means_at(x[up], y[up], x[low], y[low], w["x0_ns"] + d, k) for d in (0, NS_PER_S)]
    own = (own_at[1] - own_at[0]) / NS_PER_S
    if pull is not None:
        # The replay's frame has the true offset taken out: its own slope
        # is the agent's less the true drift, so the agent's pull toward
        # its edge's drift (alpha - own_alpha) moves it alike.
        slope = own + pull
    else:
        # The gain from the evidence the agent's chooser held when it fitted
        # the window (EdgeWindows::Estimate runs before the window feeds the
        # chooser, whose evidence its record then carries).
        slope = drift_slope(history, own, policy.slope, w.get("drift_evidence", w.get("span_evidence")), hi - lo,
                            window_ns)
    return floor_means_at_slope(x[up], y[up], x[low], y[low], w["x0_ns"], k, slope)


def replay(bounds: dict[int, Bounds], windows: list[dict], policy: Policy, window_ns: int) -> list[float]:
    """The policy's error at each window's x0 (the path's part alone, or
    with the clocks' wander where the windows carry it: in_true_time)."""
    out = []
    held = {}
    history: dict[int, list[float]] = {}  # per prober: its windows' own slopes, for median and gain
    if policy.chooser_confirm:
        held = hysteresis_spans(windows, window_ns, int(policy.chooser_max_s * NS_PER_S), policy.chooser_confirm,
                                int(policy.chooser_start_s * NS_PER_S))
    for w in windows:
        b = bounds[w["node"]]
        lo, hi = policy.span({**w, "chooser_span_ns": held.get((w["node"], w["x0_ns"]))}, window_ns)
        agents = policy.agents_slope()
        drift = history.setdefault(w["node"], [])
        before = list(drift)  # the half leans on the drift as it was before the whole's slope joined it
        error = line_error(b, w, lo, hi, policy, w.get("drift_pull") if agents else None, drift, window_ns)
        half = later_half_span(policy, w, lo, hi, window_ns)
        if half is not None:
            error = (error + line_error(b, w, half[0], half[1], policy, half[2] if agents else None, before,
                                        window_ns)) / 2
        out.append(error - w.get("wander_ns", 0.0))
    return out


def drift_slope(history: list[float], own: float, how: str, evidence: dict | None, span_ns: int,
                window_ns: int) -> float:
    """The slope a window's line takes under a drift policy, as the agent's
    EdgeDriftHistory gives it (docs/estimator.md §4c): the median of the node's
    last 20 own slopes from the fifth on, moved toward its own by the gain
    w²S² / (w²S² + 12σ²W) from the chooser's evidence (gain), or not at all
    (median); its own slope before that, or without evidence (gain). The
    agent also restarts the history at a clock step, which this does not
    see. Feeds `own` to the history."""
    import numpy as np
    slope = own
    if len(history) >= DRIFT_MIN_WINDOWS:
        median = float(np.median(history[-DRIFT_WINDOWS:]))
        if how == "median":
            slope = median
        elif evidence:
            s, w = span_ns / NS_PER_S, window_ns / NS_PER_S
            change = evidence["wander_ns_per_sqrt_s"] ** 2 * s * s
            noise = 12 * evidence["window_noise_ns"] ** 2 * w
            if change + noise > 0:
                slope = median + change / (change + noise) * (own - median)
    history.append(own)
    return slope


CHOOSER_LAGS = (1, 2, 4, 8)  # agent/estimate/fit_span_chooser.cc
CHOOSER_HISTORY, CHOOSER_MIN_HISTORY, CHOOSER_MIN_SAMPLES_PER_LAG = 128, 16, 8


def chooser_evidence(betas: list[float | None], window_ns: int, doubt_sigmas: float) -> dict | None:
    """FitSpanChooser::Estimate on one-window offsets, one per window in a
    row (None: no fit): the noise, the wander, and the wander less
    doubt_sigmas standard errors of the line's slope."""
    import numpy as np
    b = np.array([np.nan if v is None else v for v in betas], dtype=float)
    lags = []
    for m in CHOOSER_LAGS:
        d2 = np.abs(b[2 * m:] - 2 * b[m:-m] + b[:-2 * m]) if len(b) > 2 * m else np.array([])
        d2 = d2[np.isfinite(d2)]
        if len(d2) < CHOOSER_MIN_SAMPLES_PER_LAG:
            continue
        # FitSpanChooser's ClippedVariance: the clip from the element at n/2
        # of the sorted values (the upper middle for an even count).
        clip = 4 * float(np.sort(d2)[len(d2) // 2]) / 0.6745
        v = float(np.mean(np.minimum(d2, clip) ** 2))
        lags.append((m, v, len(d2), len(d2) / max(v * v, 1e-12)))
    if len(lags) < 2:
        return None
    sw = sum(w for *_, w in lags)
    sm = sum(w * m for m, _, _, w in lags)
    sv = sum(w * v for _, v, _, w in lags)
    smm = sum(w * m * m for m, _, _, w in lags)
    smv = sum(w * m * v for m, v, _, w in lags)
    det = sw * smm - sm * sm
    slope = (sw * smv - sm * sv) / det
    b_pos = max(0.0, slope)
    a = max(0.0, (sv - b_pos * sm) / sw)
    var = sum((w * (sw * m - sm) / det) ** 2 * 2 * v * v * m / n for m, v, n, w in lags)
    two_w = 2 * window_ns / NS_PER_S
    return {"window_noise_ns": float(np.sqrt(a / 6)), "wander_ns_per_sqrt_s": float(np.sqrt(b_pos / two_w)),
            "wander_lower_ns_per_sqrt_s": float(np.sqrt(max(0.0, slope - doubt_sigmas * np.sqrt(var)) / two_w))}


def print_chooser_evidence(path: str) -> int:
    """--chooser-evidence: the evidence of each sequence in a file, printed
    to 17 significant digits for a comparison with the agent's chooser."""
    try:
        with open(path) as f:
            cases = [json.loads(line) for line in f if line.strip()]
        for c in cases:
            e = chooser_evidence(c["betas"], int(c["window_ns"]), float(c["doubt_sigmas"]))
            print("none" if e is None else " ".join(f"{e[k]:.17g}" for k in (
                "window_noise_ns", "wander_ns_per_sqrt_s", "wander_lower_ns_per_sqrt_s")), flush=True)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"fit_replay: --chooser-evidence {path}: {e}", file=sys.stderr)
        return 2
    return 0


def chooser_against_agent(scenario_dir: str) -> dict | None:
    """Rebuilds each node's span chooser (FitSpanChooser::Add) from its
    records' own-window offsets (own_window_beta_ns, since 2026-12-06
    evening), on the straight frame of the fit clocks' bends the agent knew
    when it closed each window, as it keeps its history, and compares the
    evidence with the
    fit_span_evidence each record says: windows compared, how many agree
    to 1e-6 of their size (1e-3 ns at least), and the first that does
    not (node, x0, rebuilt and recorded wander). None for runs without
    the field."""
    import sigma_replay
    import truth
    records = {}
    for n in (1, 2):
        path = os.path.join(scenario_dir, f"agent-n{n}", "edges.jsonl")
        with open(path) as f:
            records[n] = [r for r in map(json.loads, filter(str.strip, f)) if r.get("timestamp_source") == "kernel"]
    if not any("own_window_beta_ns" in r for rs in records.values() for r in rs):
        return None
    bends = {n: truth.fit_clock_bends(rs) for n, rs in records.items()}
    out = {"compared": 0, "agree": 0, "first_disagreement": None}
    for n, rs in records.items():
        fits: list[tuple[int, float]] = []  # (x0, the offset as its record reads it)
        evidence = None
        for r in sorted(rs, key=lambda r: r["x0_ns"]):
            x0, window_ns = int(r["x0_ns"]), int(r["window_end_ns"]) - int(r["window_start_ns"])
            if r.get("clock_step"):
                fits = []  # AfterClockStep: the history starts again, the evidence stays
            elif r.get("own_window_beta_ns") is not None:
                if fits and not (0 < x0 - fits[-1][0] <= 4 * window_ns and (x0 - fits[-1][0]) % window_ns == 0):
                    fits = []
                fits = (fits + [(x0, float(r["own_window_beta_ns"]))])[-CHOOSER_HISTORY:]
                if len(fits) >= CHOOSER_MIN_HISTORY:
                    # The history on the straight frame of the bends the agent knew when it closed
                    # this window, about the end of its span (a peer's, on the peer's clock there).
                    end, beta_end = int(r["fit_end_ns"]), float(r.get("beta_ns") or 0.0)
                    own = [b for b in bends[n] if b[0] < end]
                    peers = [b for b in bends[int(r["peer"])] if b[0] < end + beta_end]
                    slots: list[float | None] = [None] * ((fits[-1][0] - fits[0][0]) // window_ns + 1)
                    for fx, fb in fits:
                        slots[(fx - fits[0][0]) // window_ns] = sigma_replay.straight_beta(own, peers, fx, fb)
                    evidence = chooser_evidence(slots, window_ns, 2)
            said = r.get("fit_span_evidence")
            if said is None or evidence is None:
                continue
            out["compared"] += 1
            keys = ("window_noise_ns", "wander_ns_per_sqrt_s", "wander_lower_ns_per_sqrt_s")
            if all(abs(evidence[k] - said[k]) <= max(1e-3, 1e-6 * abs(said[k])) for k in keys):
                out["agree"] += 1
            elif out["first_disagreement"] is None:
                out["first_disagreement"] = (n, x0, evidence["wander_ns_per_sqrt_s"], said["wander_ns_per_sqrt_s"])
    return out


def rechosen_evidence(bounds: dict[int, Bounds], windows: list[dict], window_ns: int,
                      doubt_sigmas: float) -> None:
    """Sets each window's chooser_evidence as the agent's chooser would have
    it from the replayed one-window fits (each window's own probes, both
    sessions, its own slope), with the wander's doubt given: what the
    chooser policies then choose on. The drift gain keeps the evidence the
    agent recorded (span_evidence). Windows of the warm-up, which the agent
    also fed its chooser, are not in the replay."""
    own = replay(bounds, windows, Policy.parse("2/both/agent/own"), window_ns)
    for node in sorted({w["node"] for w in windows}):
        rows = sorted(((w, e) for w, e in zip(windows, own) if w["node"] == node), key=lambda r: r[0]["x0_ns"])
        slots: list[float | None] = []
        last_x0 = None
        for w, e in rows:
            if last_x0 is not None:
                slots.extend([None] * (round((w["x0_ns"] - last_x0) / window_ns) - 1))
            last_x0 = w["x0_ns"]
            slots.append(e + w.get("wander_ns", 0.0) if e == e else None)  # the offset the chooser sees
            slots = slots[-CHOOSER_HISTORY:]
            fits = sum(v is not None for v in slots)
            w["chooser_evidence"] = (chooser_evidence(slots, window_ns, doubt_sigmas)
                                     if fits >= CHOOSER_MIN_HISTORY else None)


def in_true_time(windows: list[dict], clocks: dict, wander: Wander) -> list[dict]:
    """The windows with x0 and span on true time, and the wander at x0."""
    out = []
    for w in windows:
        c = clocks[w["node"]]
        t = {k: int(c.true_time(w[k])) for k in ("x0_ns", "fit_start_ns", "fit_end_ns")}
        if w.get("later_half"):
            h = w["later_half"]
            t["later_half"] = {**h, **{k: int(c.true_time(h[k])) for k in ("fit_start_ns", "fit_end_ns")}}
        out.append({**w, **t, "wander_ns": wander.of(w["node"], t["x0_ns"])})
    return out


def agent_windows(scenario_dir: str, longest_centred_ns: int = 0) -> tuple[list[dict], int]:
    """The agent's kernel windows in the measured span, with their spans and
    the errors results.json gives them; and the window length. The chooser
    policies centre spans up to the run's longest centred one, or up to
    longest_centred_ns where given (what --fit-span-max-s gives the agent)."""
    path = os.path.join(os.path.dirname(os.path.abspath(scenario_dir)), "results.json")
    name = os.path.basename(os.path.normpath(scenario_dir))
    with open(path) as f:
        res = json.load(f)
    scenario = next((s for s in res.get("scenarios", []) if s.get("scenario") == name), None)
    if scenario is None:
        raise ValueError(f"{path}: no scenario {name}")
    measured = {(w["node"], w["x0_ns"]): w["error_ns"] for w in scenario.get("windows", [])
                if w.get("source") == "kernel" and w.get("error_ns") is not None}
    windows, window_ns = [], 0
    for n in (1, 2):
        before = None  # the evidence the agent's chooser held when it fitted the window: the previous window's
        with open(os.path.join(scenario_dir, f"agent-n{n}", "edges.jsonl")) as f:
            for line in f:
                r = json.loads(line)
                if r.get("timestamp_source") != "kernel":
                    continue
                drift_evidence, before = before, r.get("fit_span_evidence")
                if (n, r["x0_ns"]) not in measured:
                    continue
                window_ns = r["window_end_ns"] - r["window_start_ns"]
                half, alpha = r.get("later_half"), r.get("alpha")
                lines_apart = lines_apart_in_bands(r)
                if half:
                    # alpha is the mean of the whole span's line and the half's.
                    alpha = 2 * alpha - half["alpha"]
                    half = {"fit_start_ns": half["fit_start_ns"], "fit_end_ns": half["fit_end_ns"],
                            "drift_pull": (half["alpha"] - half["own_alpha"]) if half["drift_prior_taken"] else None}
                windows.append({"node": n, "x0_ns": r["x0_ns"], "fit_start_ns": r["fit_start_ns"],
                                "fit_end_ns": r["fit_end_ns"], "agent_error_ns": measured[(n, r["x0_ns"])],
                                "peer_session": (r.get("tuples_peer_session") or 0) > 0,
                                "floor_points": r.get("floor_points") or 1,
                                "drift_pull": (alpha - r["own_alpha"]) if r.get("drift_prior_taken") else None,
                                "later_half": half, "half_recorded": "later_half" in r,
                                "span_evidence": r.get("fit_span_evidence"), "drift_evidence": drift_evidence,
                                **lines_apart})
    if not windows:
        raise ValueError(f"{scenario_dir}: no kernel window of the measured span")
    # Every span the agent took ended at most half its longest centred one past x0.
    centred = longest_centred_ns or 2 * max(w["fit_end_ns"] - w["x0_ns"] for w in windows)
    for w in windows:
        w["centred_span_ns"] = centred
    return windows, window_ns


def evidence_summary(windows: list[dict]) -> dict | None:
    """What the agent's span chooser saw over the measured span: the
    medians of its evidence (fit_span_evidence) over the windows that carry
    it; None where none does (a fixed span, or too short a run)."""
    import numpy as np
    ev = [w["span_evidence"] for w in windows if w.get("span_evidence")]
    if not ev:
        return None
    wander = [e["wander_ns_per_sqrt_s"] for e in ev]
    return {"windows": len(ev), "window_noise_ns": float(np.median([e["window_noise_ns"] for e in ev])),
            "wander_ns_per_sqrt_s": float(np.median(wander)),
            "wander_min_ns_per_sqrt_s": float(min(wander)), "wander_max_ns_per_sqrt_s": float(max(wander))}


def summary(windows: list[dict], errors: list[float]) -> dict:
    import numpy as np
    e = np.array(errors)
    ok = np.isfinite(e)
    by_node = {n: float(np.median(e[[w["node"] == n for w in windows] & ok])) for n in (1, 2)
               if any(w["node"] == n for w in windows)}
    a = np.abs(e[ok])
    return {"windows": int(ok.sum()), "p50_ns": percentile(sorted(a), 50), "p99_ns": percentile(sorted(a), 99),
            "max_ns": float(a.max()) if len(a) else float("nan"), "median_signed_ns": by_node}


def format_row(name: str, s: dict) -> str:
    signed = ", ".join(f"node {n} {v:+.1f}" for n, v in s["median_signed_ns"].items())
    return (f"{name:<14} |error| p50 {s['p50_ns']:6.1f}  p99 {s['p99_ns']:6.1f}  max {s['max_ns']:6.1f} ns "
            f"({s['windows']} windows); median signed: {signed}")


def selftest() -> int:
    """Generated packets on two clocks with known delays: a prober's packets
    slower than its responder's replies lean its own fit by half the
    difference, in each prober's own direction, and a fit on both sessions
    does not lean; flat floors give the true offset exactly."""
    import random
    from truth import VClock
    check = SelfTestChecks()

    t0 = 1_800_000_000 * NS_PER_S
    clocks = {1: VClock.make(0, "0", t0), 2: VClock.make(3_700_000, "45", t0)}
    rng = random.Random(7)
    lean = 40  # a prober's forward packets meet this much more floor than the replies

    def make_logs(jitter: bool) -> dict[int, dict]:
        logs: dict[int, dict] = {1: {}, 2: {}}
        for prober in (1, 2):
            peer = 3 - prober
            for seq in range(1, 401):  # 20 s at one pair per 50 ms
                send = t0 + seq * 50_000_000
                for index in (0, 1):
                    for kind, a, b, extra in (("forward", prober, peer, lean), ("reverse", peer, prober, 0)):
                        delay = 1000 + extra + (int(rng.expovariate(1 / 300)) if jitter else 0)  # whole ns: exact
                        key = (kind, a, b, f"s{prober}", seq, index)
                        logs[a][key + ("tx",)] = {SOURCE: int(clocks[a].at(send))}
                        logs[b][key + ("rx",)] = {SOURCE: int(clocks[b].at(send + delay))}
                        send += 5000
        return logs

    windows_for = lambda n: [{"node": n, "x0_ns": int(clocks[n].at(t0 + s * NS_PER_S)),
                              "fit_start_ns": int(clocks[n].at(t0 + (s - 2) * NS_PER_S)),
                              "fit_end_ns": int(clocks[n].at(t0 + (s + 2) * NS_PER_S))} for s in range(4, 17, 2)]
    windows = windows_for(1) + windows_for(2)
    flat = link_bounds(make_logs(jitter=False), clocks)
    own = replay(flat, windows, Policy.parse("agent/own"), 2 * NS_PER_S)
    check(all(abs(e - lean / 2) <= 1.5 for e in own),
          f"flat floors: each prober's own fit leans by half its packets' extra floor, {lean / 2:.0f} ns "
          f"(got {min(own):.1f} to {max(own):.1f})")
    both = replay(flat, windows, Policy.parse("agent/both"), 2 * NS_PER_S)
    check(all(abs(e) <= 1.5 for e in both), f"flat floors, both sessions: no lean (got {min(both):.1f} to {max(both):.1f})")
    noisy_logs = make_logs(jitter=True)
    noisy = link_bounds(noisy_logs, clocks)
    s_own = summary(windows, replay(noisy, windows, Policy.parse("agent/own"), 2 * NS_PER_S))
    s_both = summary(windows, replay(noisy, windows, Policy.parse("agent/both"), 2 * NS_PER_S))
    check(all(v > 10 for v in s_own["median_signed_ns"].values()),
          f"queued packets: both probers still lean their own way ({s_own['median_signed_ns']})")
    check(all(abs(v) < 10 for v in s_both["median_signed_ns"].values()),
          f"queued packets, both sessions: the lean is gone ({s_both['median_signed_ns']})")
    # +half: the mean of the span's line and its later half's (whole
    # windows, at least the longest centred span), each fitted alone.
    late = [{**w, "centred_span_ns": 4 * NS_PER_S} for w in windows if w["x0_ns"] >= clocks[w["node"]].at(t0 + 12 * NS_PER_S)]
    halves = replay(noisy, late, Policy.parse("8@1+half/both/8"), 2 * NS_PER_S)
    whole = replay(noisy, late, Policy.parse("8@1/both/8"), 2 * NS_PER_S)
    later = replay(noisy, late, Policy.parse("4@1/both/8"), 2 * NS_PER_S)
    check(all(abs(h - (a + b) / 2) < 1e-6 for h, a, b in zip(halves, whole, later)) and any(a != b for a, b in zip(whole, later)),
          "8@1+half: the mean of 8@1's line and 4@1's (its later half), which differ")
    # The drift's gain takes the evidence the agent held before the window
    # (drift_evidence, the previous record's), not the window's own record's.
    ev_no_noise = {"wander_ns_per_sqrt_s": 9.0, "window_noise_ns": 0.0}
    ev_no_wander = {"wander_ns_per_sqrt_s": 0.0, "window_noise_ns": 9.0}
    every = [{**w, "centred_span_ns": 4 * NS_PER_S} for w in windows]
    held_before = replay(noisy, [{**w, "span_evidence": ev_no_wander, "drift_evidence": ev_no_noise} for w in every],
                         Policy.parse("8@1/both/8/gain"), 2 * NS_PER_S)
    own_record = replay(noisy, [{**w, "span_evidence": ev_no_wander} for w in every],
                        Policy.parse("8@1/both/8/gain"), 2 * NS_PER_S)
    own_slopes = replay(noisy, every, Policy.parse("8@1/both/8/own"), 2 * NS_PER_S)
    def near(a: list[float], b: list[float], tol: float) -> bool:
        return all(abs(x - y) <= tol for x, y in zip(a, b))

    check(near(held_before, own_slopes, 1e-6) and not near(own_record, own_slopes, 1e-3),
          "the drift's gain from the evidence held before the window (there: no noise, its own slope), where a "
          "record says so")
    check(replay(noisy, late, Policy.parse("4@1+half/both/8"), 2 * NS_PER_S) == later,
          "a span up to the longest centred one takes no half")
    check(later_half_span(Policy.parse("20@2+half/both"), {"centred_span_ns": 6 * NS_PER_S}, 0, 14 * NS_PER_S - 3000,
                          2 * NS_PER_S) == (8 * NS_PER_S - 3000, 14 * NS_PER_S - 3000, None)
          and later_half_span(Policy.parse("20@2+half/both"), {"centred_span_ns": 6 * NS_PER_S}, 0, 20 * NS_PER_S - 3000,
                              2 * NS_PER_S)[0] == 10 * NS_PER_S - 3000,
          "the half: whole windows (a few ppm short of them still counts), at least the longest centred span")
    rec = {"later_half": {"fit_start_ns": 5, "fit_end_ns": 9, "drift_pull": 1e-7}}
    check(later_half_span(Policy.parse("agent/both/agent"), rec, 0, 9, 2) == (5, 9, 1e-7)
          and later_half_span(Policy.parse("agent/both/agent"), {}, 0, 9, 2) is None,
          "the agent's spans: its record's half, where it took one")
    apart = lines_apart_in_bands({"beta_ns": -314_352.0, "uncertainty_ns": 1_345.0, "floor_shift_ns": 269.0,
                                  "later_half": {"beta_ns": -333_422.0, "uncertainty_ns": 13_700.0}})
    check(abs(apart["half_apart"] - 38_140 / 15_045) < 1e-9 and abs(apart["floors_apart"] - 0.2) < 1e-9
          and not apart["half_refused"] and not apart["floors_refused"]
          and lines_apart_in_bands({"floors_refused": True})["floors_refused"] and "half_apart" not in lines_apart_in_bands({"later_half": {"beta_ns": 1}}),
          "lines apart in their bands: the span's line twice the mean less the half's; none without the half's band")
    c6 = 6 * NS_PER_S
    agents = [{"centred_span_ns": c6, "fit_start_ns": 0, "fit_end_ns": 20 * NS_PER_S,
               "later_half": {"fit_start_ns": 10 * NS_PER_S, "fit_end_ns": 20 * NS_PER_S}},
              {"centred_span_ns": c6, "fit_start_ns": 0, "fit_end_ns": c6, "later_half": None},
              {"centred_span_ns": c6, "fit_start_ns": 0, "fit_end_ns": 20 * NS_PER_S, "later_half": None},
              {"centred_span_ns": c6, "fit_start_ns": 0, "fit_end_ns": 14 * NS_PER_S,
               "later_half": {"fit_start_ns": 7 * NS_PER_S, "fit_end_ns": 14 * NS_PER_S}}]
    check(half_rule_against_agent(agents, 2 * NS_PER_S) == (2, 1, 1)
          and half_rule_against_agent([dict(agents[2], half_recorded=False)], 2 * NS_PER_S) == (0, 0, 0),
          "the rule against the agent's halves: agreed, thin, and a half of 7 s where whole windows give 6; "
          "records from before the half not counted")
    w = {"x0_ns": 10 * NS_PER_S, "fit_start_ns": 0, "fit_end_ns": 0}
    check(Policy.parse("12@1/own").span(w, 2 * NS_PER_S) == (0, 12 * NS_PER_S)
          and Policy.parse("4/own").span(w, 2 * NS_PER_S) == (8 * NS_PER_S, 12 * NS_PER_S),
          "a trailing span ends D s after the window's end; a centred one is centred on x0")
    g = 2 * NS_PER_S
    check([start_span_ns(g, 2 * g, n * g) for n in (2, 3, 5)] == [2 * g, 3 * g, 5 * g]
          and start_span_ns(g, 2 * g, 11 * g // 2) == 5 * g,
          "the start span, as FitSpanChooser::StartSpan's test has it")
    # The chooser's hysteresis: two windows none, then wander beyond doubt
    # (wants 4 s), noise alone (wants 10 s, breaking the run), then wander
    # again; wander the estimate alone shows moves nothing.
    noise = {"window_noise_ns": 30.0, "wander_ns_per_sqrt_s": 0.0, "wander_lower_ns_per_sqrt_s": 0.0}
    wander = {"window_noise_ns": 1.0, "wander_ns_per_sqrt_s": 20.0, "wander_lower_ns_per_sqrt_s": 15.0}
    doubt = {"window_noise_ns": 1.0, "wander_ns_per_sqrt_s": 20.0, "wander_lower_ns_per_sqrt_s": 0.0}
    ev = [None, None, wander, noise, doubt, wander, wander, wander]
    held = hysteresis_spans([{"node": 1, "x0_ns": k * g, "span_evidence": e} for k, e in enumerate(ev)],
                            g, 10 * NS_PER_S, 2)
    check([held[(1, k * g)] // NS_PER_S for k in range(len(ev))] == [10, 10, 10, 10, 10, 10, 10, 4],
          f"chooser:10:2 moves after two windows in a row want it, from the next window on "
          f"(got {[held[(1, k * g)] // NS_PER_S for k in range(len(ev))]})")
    # The chooser's evidence, as FitSpanChooser::Estimate: a walk of 40
    # ns/sqrt(s) under 5 ns of noise is beyond doubt after 96 windows, 25 ns
    # of noise alone is not, and a gap leaves the lags their holes.
    import numpy as np
    rng = np.random.default_rng(7)
    walk = list(np.cumsum(40 * np.sqrt(2) * rng.standard_normal(96)) + 5 * rng.standard_normal(96))
    e_walk = chooser_evidence(walk, g, 2)
    e_noise = chooser_evidence(list(25 * rng.standard_normal(96)), g, 2)
    check(e_walk is not None and 20 < e_walk["wander_ns_per_sqrt_s"] < 80
          and 5 < e_walk["wander_lower_ns_per_sqrt_s"] <= e_walk["wander_ns_per_sqrt_s"]
          and chooser_evidence(walk, g, 0)["wander_lower_ns_per_sqrt_s"] == e_walk["wander_ns_per_sqrt_s"],
          f"a wandering clock's wander is beyond doubt ({e_walk})")
    check(e_noise is not None and e_noise["wander_lower_ns_per_sqrt_s"] == 0 and 15 < e_noise["window_noise_ns"] < 40,
          f"noise alone shows no wander beyond doubt ({e_noise})")
    check(chooser_evidence([1.0] * 10 + [None] * 20, g, 2) is None, "one lag with 8 second differences: no evidence")
    check(Policy.parse("chooser:10:2/both/agent").chooser_confirm == 2
          and Policy.parse("chooser:10/both/agent").chooser_confirm == 0, "chooser:M:C parses C")
    p4 = Policy.parse("chooser:10:4@4/both/agent")
    check(p4.chooser_confirm == 4 and p4.chooser_start_s == 4
          and p4.span({"x0_ns": 100 * NS_PER_S, "centred_span_ns": 6 * NS_PER_S, "span_evidence": None},
                      2 * NS_PER_S) == (98 * NS_PER_S, 102 * NS_PER_S),
          "chooser:M:C@S0 starts at S0 (4 s, centred)")
    # The floors' line (docs/estimator.md §4b): floors at +-1000 ns, every 7th
    # bound on its floor, one forward packet 80 ns under it at x0: the hard
    # line moves by half its lead, the mean of 8 by a sixteenth.
    import numpy as np
    ks = np.arange(320)
    above = np.where(ks % 7 == 0, 0, 50 + (ks % 13) * 10)
    xu = np.append(ks * 1000, 160_000).astype(np.int64)
    yu = np.append(1000.0 + above, 920.0)
    xl, yl = (ks * 1000 + 500).astype(np.int64), -1000.0 - above
    hard, floors = floor_means_at(xu, yu, xl, yl, 160_000, 1), floor_means_at(xu, yu, xl, yl, 160_000, 8)
    check(abs(hard + 40) < 0.01 and abs(floors + 5) < 0.01,
          f"one packet 80 ns under the floor: the hard line moves 40 ns, the floors' (k = 8) 5 ns "
          f"(got {hard:.3f}, {floors:.3f})")
    # --wander on linear clocks: nothing a straight line leaves, so on true
    # time the replay errs as on the clocks' own stamps.
    wander = Wander(clocks, t0, t0 + 21 * NS_PER_S)
    plain = replay(noisy, windows, Policy.parse("agent/both/8"), 2 * NS_PER_S)
    on_true = replay(link_bounds(noisy_logs, clocks, wander=wander),
                     in_true_time(windows, clocks, wander), Policy.parse("agent/both/8"), 2 * NS_PER_S)
    worst = max(abs(a - b) for a, b in zip(plain, on_true))
    check(abs(wander.of(1, t0 + 7 * NS_PER_S)) < 1e-3 and worst < 0.5,
          f"--wander on linear clocks: no wander, the same errors on true time (differ by {worst:.3f} ns)")

    # The true wander's rate: 0 on linear clocks; a walk of 10 ns/sqrt(s)
    # between two oscillators reads 10 within a quarter.
    class Walk:
        def __init__(self, steps):
            self.steps = steps

        def at(self, t):
            return t + self.steps[min(len(self.steps) - 1, max(0, int(t // NS_PER_S)))]

    rng_w = np.random.default_rng(3)
    walk = Wander({1: Walk(np.zeros(2001)), 2: Walk(np.cumsum(10 * rng_w.standard_normal(2001)))}, 0,
                  2000 * NS_PER_S)
    rate = walk.rate_ns_per_sqrt_s(0, 2000 * NS_PER_S, 2 * NS_PER_S)
    check(wander.rate_ns_per_sqrt_s(t0, t0 + 21 * NS_PER_S, 2 * NS_PER_S) < 1e-3 and 7.5 < rate < 12.5,
          f"the true wander's rate: none on linear clocks, 10 ns/sqrt(s) read as {rate:.2f}")
    # chooser:M: the model's span, centred up to the run's centred longest, reaching back past it.
    w_ev = {"x0_ns": 100 * NS_PER_S, "centred_span_ns": 6 * NS_PER_S,
            "span_evidence": {"window_noise_ns": 30.0, "wander_ns_per_sqrt_s": 0.0}}
    check(Policy.parse("chooser:10/both/agent").span(w_ev, 2 * NS_PER_S) == (93 * NS_PER_S, 103 * NS_PER_S),
          "chooser: noise and no wander take the longest span, ending where the centred 6 s one ends")
    w_ev["span_evidence"] = {"window_noise_ns": 1.0, "wander_ns_per_sqrt_s": 20.0}
    check(Policy.parse("chooser:10/both/agent").span(w_ev, 2 * NS_PER_S) == (98 * NS_PER_S, 102 * NS_PER_S),
          "chooser: wander keeps the shortest span, centred")
    w_ev["span_evidence"] = {"window_noise_ns": 30.0, "wander_ns_per_sqrt_s": 0.0}
    check(Policy.parse("chooser:10/both/agent").span({**w_ev, "centred_span_ns": 10 * NS_PER_S}, 2 * NS_PER_S)
          == (95 * NS_PER_S, 105 * NS_PER_S), "--longest-centred-s 10: the longest span centred")
    check(Policy.parse("chooser:10/both/agent").span({**w_ev, "span_evidence": None}, 2 * NS_PER_S)
          == (93 * NS_PER_S, 103 * NS_PER_S),
          "chooser: no evidence yet, the start span (the longest, 10 s of 4-10 s), ending with the centred 6 s")
    ev = evidence_summary([{"span_evidence": {"window_noise_ns": v, "wander_ns_per_sqrt_s": v / 10}}
                           for v in (10.0, 30.0, 20.0)] + [{"span_evidence": None}])
    check(ev == {"windows": 3, "window_noise_ns": 20.0, "wander_ns_per_sqrt_s": 2.0, "wander_min_ns_per_sqrt_s": 1.0,
                 "wander_max_ns_per_sqrt_s": 3.0} and evidence_summary([]) is None,
          "the chooser's evidence: medians over the windows that carry it, and the wander's range")
    check(Policy.parse("agent/both/8").floor_points == 8 and Policy.parse("agent/both/agent").floor_points is None
          and Policy.parse("12/own").floor_points == 1, "K parses: a count, agent, or absent (1: the hard margin)")
    check(Policy.parse("agent/both/agent").agents_slope() and Policy.parse("agent/both/agent/gain").slope == "gain"
          and not Policy.parse("agent/both/agent/own").agents_slope() and not Policy.parse("agent/both/8").agents_slope(),
          "the slope parses: the agent's on its own policy, own/median/gain as asked")
    # The gain's ends: none before five slopes; the median where the
    # evidence says no wander; the window's own where it says no noise.
    hist: list[float] = []
    firsts = [drift_slope(hist, a, "gain", {"wander_ns_per_sqrt_s": 0, "window_noise_ns": 9}, 6 * NS_PER_S,
                          2 * NS_PER_S) for a in (1e-6, 3e-6, 2e-6, 5e-6, 4e-6)]
    check(firsts == [1e-6, 3e-6, 2e-6, 5e-6, 4e-6], "own slopes until five are kept")
    check(drift_slope(list(hist), 9e-6, "gain", {"wander_ns_per_sqrt_s": 0, "window_noise_ns": 9}, 6 * NS_PER_S,
                      2 * NS_PER_S) == 3e-6
          and drift_slope(list(hist), 9e-6, "gain", {"wander_ns_per_sqrt_s": 9, "window_noise_ns": 0}, 6 * NS_PER_S,
                          2 * NS_PER_S) == 9e-6
          and drift_slope(list(hist), 9e-6, "median", None, 6 * NS_PER_S, 2 * NS_PER_S) == 3e-6,
          "the gain: the median without wander, its own without noise; median alone")
    for bad in ("12", "12/all", "0/own", "x/own", "12@-1/own", "agent/both/0", "agent/both/x", "agent/both/8/1",
                "agent/both/8/sideways", "agent/both/8/own/1",
                "chooser:0/both", "chooser:x/both", "chooser:10:0/both", "chooser:10:x/both",
                "chooser:10@12/both", "chooser:10@x/both", "agent+half/both", "12+halves/both"):
        try:
            Policy.parse(bad)
            check(False, f"policy {bad!r} refused")
        except ValueError:
            check(True, f"policy {bad!r} refused")
    return check.result()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Replay the window fits of an accuracy_bench --stamp-logs scenario "
                                             "with other spans and packet sets, against the true delays")
    ap.add_argument("scenario_dir", nargs="?", help="OUT/<scenario> of accuracy_bench --stamp-logs")
    ap.add_argument("--policy", action="append", help="SPAN/PACKETS (repeatable; default: "
                    + ", ".join(DEFAULT_POLICIES) + ")")
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--wander", action="store_true",
                    help="add the oscillators' wander (what no straight line follows) to every bound, on true "
                         "time: the replay then errs as the agent did, not by the path alone")
    ap.add_argument("--longest-centred-s", type=float, default=0.0,
                    help="replay the chooser policies as if the agent's longest centred span were this many "
                         "seconds (its --fit-span-max-s), not the run's: e.g. 10 centres every span up to 10 s")
    ap.add_argument("--rechoose-doubt", type=float, default=None, metavar="SIGMAS",
                    help="the chooser policies choose on evidence recomputed from the replayed one-window fits, "
                         "the wander taken SIGMAS standard errors low (the agent's rule since 2026-12-06: 2; 0: "
                         "the estimate itself, as before); the drift gain keeps the agent's recorded evidence")
    ap.add_argument("--selftest", action="store_true", help="check the replay on generated packets and exit")
    ap.add_argument("--chooser-evidence", metavar="FILE",
                    help="print chooser_evidence for each line of FILE ({\"betas\": [ns or null, ...], "
                         "\"window_ns\": N, \"doubt_sigmas\": K}), one line each: noise, wander and wander "
                         "less its doubt, or 'none' (what tests compare with FitSpanChooser's), and exit")
    a = ap.parse_args(argv)
    try:
        import numpy  # noqa: F401
    except ImportError:
        print("fit_replay: needs numpy (apt-get install python3-numpy; run with /usr/bin/python3)", file=sys.stderr)
        return 2
    if a.selftest:
        return selftest()
    if a.chooser_evidence:
        return print_chooser_evidence(a.chooser_evidence)
    if not a.scenario_dir:
        ap.error("give a scenario directory (or --selftest)")
    if not 0 <= a.longest_centred_s <= 60:
        ap.error(f"--longest-centred-s {a.longest_centred_s:g} is not in [0, 60] s")
    try:
        policies = [Policy.parse(p) for p in (a.policy or DEFAULT_POLICIES)]
        windows, window_ns = agent_windows(a.scenario_dir, int(a.longest_centred_s * NS_PER_S))
        agree, thin, wrong = half_rule_against_agent(windows, window_ns)
        if agree + thin + wrong:
            print(f"+half's rule on the agent's own spans gives the half its records took in {agree} of "
                  f"{agree + thin + wrong} windows; a half the agent could not fit in {thin}; a different half in "
                  f"{wrong}", flush=True)
        rebuilt = chooser_against_agent(a.scenario_dir)
        if rebuilt:
            first = rebuilt["first_disagreement"]
            print(f"span chooser rebuilt from the records' own-window offsets: its evidence is the agent's in "
                  f"{rebuilt['agree']} of {rebuilt['compared']} windows"
                  + (f"; first apart: node {first[0]} at x0 {first[1]}, wander {first[2]:.2f} rebuilt against "
                     f"{first[3]:.2f} ns/sqrt(s) recorded" if first else ""), flush=True)
        apart = lines_apart_summary(windows)
        if apart:
            print(apart, flush=True)
        evidence = evidence_summary(windows)
        if evidence:  # before the stamp logs: a run without them still says what its edges showed
            print(f"span chooser's evidence, median over {evidence['windows']} windows: a window's own fit errs "
                  f"{evidence['window_noise_ns']:.1f} ns, wander {evidence['wander_ns_per_sqrt_s']:.2f} ns/sqrt(s) "
                  f"(from {evidence['wander_min_ns_per_sqrt_s']:.1f} to {evidence['wander_max_ns_per_sqrt_s']:.1f})",
                  flush=True)
        logs = {n: read_stamp_log(os.path.join(a.scenario_dir, f"agent-n{n}", "stamps.jsonl")) for n in (1, 2)}
        clocks = scenario_clocks(a.scenario_dir)
    except (OSError, ValueError, KeyError) as e:
        print(f"fit_replay: {e} (run accuracy_bench with --stamp-logs)", file=sys.stderr)
        return 2
    wander, true_wander = None, None
    if a.wander:
        xs = [clocks[w["node"]].true_time(w[k]) for w in windows for k in ("fit_start_ns", "fit_end_ns")]
        wander = Wander(clocks, min(xs) - 30 * NS_PER_S, max(xs) + 30 * NS_PER_S)
        windows = in_true_time(windows, clocks, wander)
        true_wander = wander.rate_ns_per_sqrt_s(min(xs), max(xs), window_ns)
        print(f"the oscillators' true wander, one against the other (their clocks' files): "
              f"{true_wander:.2f} ns/sqrt(s)", flush=True)
    bounds = link_bounds(logs, clocks, wander=wander)
    if a.rechoose_doubt is not None:
        if not 0 <= a.rechoose_doubt <= 10:
            ap.error(f"--rechoose-doubt {a.rechoose_doubt:g} is not in [0, 10]")
        rechosen_evidence(bounds, windows, window_ns, a.rechoose_doubt)
    import numpy as np
    agent = summary(windows, [w["agent_error_ns"] for w in windows])
    # The agent's own policy: its spans, and the peer's session where its
    # records say its fits took it (tuples_peer_session, --fit-probes link).
    as_run = ("agent/both" if sum(w["peer_session"] for w in windows) * 2 > len(windows) else "agent/own") + "/agent"
    replayed = {as_run: replay(bounds, windows, Policy.parse(as_run), window_ns)}
    gap = np.abs(np.array(replayed[as_run]) - np.array([w["agent_error_ns"] for w in windows]))
    gap = gap[np.isfinite(gap)]
    print(format_row("the agent", agent))
    print(f"  its replay ({as_run}{', with the wander' if wander else ''}) stands |replay - agent| p50 "
          f"{percentile(sorted(gap), 50):.1f} / p99 {percentile(sorted(gap), 99):.1f} ns from it: "
          + ("its soft margin, and spans a re-anchor cut" if wander else
             "clock wander the agent's line followed (--wander adds it), and its soft margin"))
    out = {"agent": agent, "agent_policy": as_run, "span_evidence": evidence, "true_wander_ns_per_sqrt_s": true_wander,
           "replay_gap_ns": {"p50": percentile(sorted(gap), 50), "p99": percentile(sorted(gap), 99)},
           "policies": {}}
    for p in policies:
        s = summary(windows, replayed.get(p.name) or replay(bounds, windows, p, window_ns))
        out["policies"][p.name] = s
        print(format_row(p.name, s), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
