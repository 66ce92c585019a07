#!/usr/bin/env python3
"""Replay the agent's window sigma over saved accuracy_bench runs.

The agent's sigma_ns (agent/estimate/window_scatter.h, docs/estimator.md §8)
has weights calibrated on the test bed. This recomputes it, for each
setting asked, from what the runs' edges.jsonl recorded (beta_ns,
uncertainty_ns - margin_ns, floor_shift_ns, and sigma_scatter_ns where the
run has it), against the errors accuracy_bench gave each window
(results.json, on the run's own truth), and prints per scenario the 3-sigma
coverage and the median sigma over the median |error| (issue 31's targets:
>= 99 % and <= 3), then how many scenarios met each. It first says how far
the agent's own setting, recomputed, stands from the sigma_ns the agent
wrote: the replay's validity on those runs. No root, no agent: only saved
runs (accuracy_bench --out DIR).

    bench/sigma_replay.py OUT... [--setting mad:1.2:0.5:0:5:0.5 --setting rec:1.2:1.0]

A setting is SCATTER:TAIL:EXCESS[:OWN[:FLOOR[:SHIFT[:HALF[:MEMORY[:STRETCH]]]]]]: SCATTER `quad`
(median |residual| about a least-squares parabola x 1.4826, the agent's
since the evening of 2026-12-05), `mad` (the same about a straight line, the
agent's from 2026-11-26), `rms` (sqrt(RSS / (n - 2)) about the line, the
agent's before) or `rec` (the agent's own, as recorded in
sigma_scatter_ns, runs from 2026-12-05 on: exact), TAIL the
factor on it, EXCESS the weight on the window's uncertainty_ns - margin_ns,
OWN the weight on the window's own |residual| from its edge's trend (default
0, as the agent), FLOOR the floor in ns (default 4, as the agent since 2026-12-06; 5 before), SHIFT the
weight on the window's |floor_shift_ns| (default 0; the agent's 0.5 since
2026-12-05), HALF the factor on the band's and shift's weights of a window
averaged with its later half (the agent's 0.5), MEMORY (default 0; the
agent's 0.75 since the night of 2026-12-06) a floor on each window's sigma
of that many times the median of its edge's last 16 windows' own sigmas
(from 4; stalled windows left out; docs/estimator.md §8), STRETCH (default 1;
the agent's 0.75 since later that night) the power of (span / two windows)
by which a span longer than two windows stretches the trend's 12 windows
(WindowScatterOptions::history_span_power). The scatter is
recomputed as the agent computes it: each
edge's fitted kernel windows in order, a parabola (`quad`, from 6
windows) or a line (from 5) through the last 12 (more for spans over two
windows, by STRETCH), started again at a clock step or a gap of more than 4 windows
(a run of stalled windows is none).
Which setting the run's agent had is told apart by replaying both it and
the line's of before: the nearer one is named.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tools", "testbed"))
import accuracy_bench as ab  # noqa: E402
import truth  # noqa: E402

HISTORY, FLOOR_NS = 12, 4.0  # the agent's floor; 5.0 until 2026-12-06 (FLOOR_BEFORE_NS)
FLOOR_BEFORE_NS = 5.0
WINDOW_NS = 2_000_000_000


def trend_degree(kind: str) -> int:
    """The trend a scatter kind is taken about: 2, a parabola (`quad`); 1, a line."""
    return 2 if kind == "quad" else 1


def min_history(kind: str) -> int:
    """Windows before a sigma: three degrees of freedom about the trend (WindowScatter)."""
    return trend_degree(kind) + 4


def residuals(x0s: list[int], betas: list[float], degree: int = 1) -> list[float]:
    """The windows' residuals from their least-squares trend of this degree,
    as the agent computes them (x centred, in seconds from the newest)."""
    import numpy as np
    x = np.array([(v - x0s[-1]) / 1e9 for v in x0s])
    x -= x.mean()
    y = np.array(betas) - betas[-1]
    design = np.vander(x, degree + 1, increasing=True)
    coef = np.linalg.lstsq(design, y, rcond=None)[0]
    return list(y - design @ coef)


def scatter(x0s: list[int], betas: list[float], kind: str) -> float:
    """The windows' scatter about their least-squares trend."""
    res = residuals(x0s, betas, trend_degree(kind))
    if kind == "rms":
        return math.sqrt(sum(r * r for r in res) / (len(res) - 2))
    return 1.4826 * statistics.median(abs(r) for r in res)


AGENT_SETTING = ("quad", 1.3, 0.5, 0.0, FLOOR_NS, 0.5, 0.5, 0.75, 0.75)  # window_scatter.h WindowScatterOptions
LINE_SETTING = ("mad", 1.2, 0.5, 0.0, FLOOR_BEFORE_NS, 0.5, 1.0, 0.0, 1.0)  # the agent's until the evening of 2026-12-05
HALF_BEFORE_SETTING = ("quad", 1.3, 0.5, 0.0, FLOOR_BEFORE_NS, 0.5, 1.0, 0.0, 1.0)  # the agent's until 2026-12-06
MEMORY_BEFORE_SETTING = ("quad", 1.3, 0.5, 0.0, FLOOR_BEFORE_NS, 0.5, 0.5, 0.0, 1.0)  # until 2026-12-06 night
STRETCH_BEFORE_SETTING = ("quad", 1.3, 0.5, 0.0, FLOOR_BEFORE_NS, 0.5, 0.5, 0.75, 1.0)  # until later that night
FLOOR_BEFORE_SETTING = ("quad", 1.3, 0.5, 0.0, FLOOR_BEFORE_NS, 0.5, 0.5, 0.75, 0.75)  # until 2026-12-06, late
MAX_GAP_WINDOWS = 4
MEMORY_WINDOWS, MEMORY_MIN = 16, 4


def sigmas(windows: list[dict], kind: str, tail: float, excess: float, own: float = 0.0,
           floor: float = FLOOR_NS, shift: float = 0.0, half: float = 1.0, memory: float = 0.0,
           stretch: float = 1.0, recorded_tail: float = AGENT_SETTING[1]) -> dict[int, float | None]:
    """Each window's sigma by a setting; `rec` rescales the recorded scatter
    from the tail it was written with (the run's agent's) to the setting's.
    A window averaged with its later half's line takes `half` of the band's
    and the shift's weights (WindowScatterOptions::later_half_factor)."""
    out: dict[int, float | None] = {}
    hist: list[dict] = []  # the agent's history: WindowScatter's windows_
    guard = StalledBandGuard()
    recent: list[float] = []  # the last windows' own sigmas, for `memory`
    last_x0 = None  # the last window fed, a stalled one included (a run of them is no gap)
    for w in windows:
        if w.get("step"):
            out[w["x0_ns"]] = None
            hist = []  # the history starts again (WindowScatter::Reset)
            recent = []
            last_x0 = None
            continue
        stalled = guard.stalled(w["uncertainty_ns"])
        if last_x0 is not None and not 0 < w["x0_ns"] - last_x0 <= MAX_GAP_WINDOWS * WINDOW_NS:
            hist = []  # a gap
            recent = []
        last_x0 = w["x0_ns"]
        # A span longer than two windows stretches the line in proportion
        # (window_scatter.cc): overlapping spans' offsets move together. The
        # history is trimmed to each window's length in turn, so after a
        # shorter span it holds fewer until it has grown again.
        span = w.get("fit_span_ns") or 0
        history = round(HISTORY * max(1.0, span / (2 * WINDOW_NS)) ** stretch)
        own_hist = (hist + [w])[-history:]
        # A stalled path's window: its own sigma sees it, the next windows' trends do not.
        hist = own_hist[:-1] if stalled else own_hist
        if len(own_hist) < min_history(kind):
            out[w["x0_ns"]] = None
            continue
        x0s, betas = [h["x0_ns"] for h in own_hist], [h["beta_ns"] for h in own_hist]
        if kind == "rec":
            if w.get("scatter_ns") is None:
                out[w["x0_ns"]] = None
                continue
            s = tail / recorded_tail * w["scatter_ns"]
        else:
            s = tail * scatter(x0s, betas, kind)
        averaged = half if w.get("later_half") else 1.0
        e = averaged * excess * max(0.0, w["uncertainty_ns"] - w["margin_ns"])
        o = own * abs(residuals(x0s, betas, trend_degree(kind))[-1]) if own else 0.0
        h = averaged * shift * abs(w.get("floor_shift_ns") or 0.0)
        v = math.sqrt(s * s + e * e + o * o + h * h + floor ** 2)
        if memory > 0 and len(recent) >= MEMORY_MIN:
            v = max(v, memory * statistics.median(recent[-MEMORY_WINDOWS:]))
        if not stalled:
            recent.append(math.sqrt(s * s + e * e + o * o + h * h + floor ** 2))
        out[w["x0_ns"]] = v
    return out


class StalledBandGuard:
    """agent/estimate/stalled_band.h: a window whose fit's band is over 8
    times the median of the last 16 windows' (at least 4) is a stalled
    path's; kept in those 16 either way."""
    FACTOR, HISTORY, MIN_HISTORY = 8.0, 16, 4

    def __init__(self) -> None:
        self.bands: list[float] = []

    def ratio(self, band: float) -> float | None:
        """The band over the median of the ones before it (None before
        MIN_HISTORY of them, or with a median of 0); keeps it."""
        if not math.isfinite(band):
            return None
        out = None
        if len(self.bands) >= self.MIN_HISTORY:
            median = sorted(self.bands)[len(self.bands) // 2]
            out = band / median if median > 0 else None
        self.bands = (self.bands + [band])[-self.HISTORY:]
        return out

    def stalled(self, band: float) -> bool:
        r = self.ratio(band)
        return r is not None and r > self.FACTOR


def band_ratios(scenario: tuple[str, dict, dict]) -> tuple[int, float, int]:
    """Over the measured windows of a scenario (those results.json gives an
    error), each fit's band over the median of its edge's last 16: windows,
    the largest ratio, and how many were over StalledBandGuard.FACTOR."""
    _, edges, errors = scenario
    ratios = []
    for ws in edges.values():
        guard = StalledBandGuard()
        for w in ws:
            if w.get("step"):
                continue
            r = guard.ratio(w["uncertainty_ns"])
            if r is not None and (w["node"], w["x0_ns"]) in errors:
                ratios.append(r)
    return len(ratios), max(ratios, default=float("nan")), sum(r > StalledBandGuard.FACTOR for r in ratios)


def straight_beta(node_bends, peer_bends, x0_ns: int, beta_ns: float) -> float:
    """A window's offset (peer - node at x0) on both clocks' straight frames
    (EdgeWindows keys it by x0 and holds the offset at the straightened x0)."""
    if not node_bends and not peer_bends:
        return beta_ns
    peer = x0_ns + round(beta_ns)
    return float(truth.straighten(peer_bends, peer) - truth.straighten(node_bends, x0_ns)) + (beta_ns - round(beta_ns))


def load_run(rundir: str) -> list[tuple[str, dict, dict]]:
    """Per scenario: each directed edge's kernel windows in order, as the
    agent's scatter saw them (fitted max-margin windows, and the clock steps
    that restart it), and the errors results.json gives the windows of the
    measured span, by (node, x0)."""
    res = json.load(open(os.path.join(rundir, "results.json")))
    out = []
    for sc in res["scenarios"]:
        name = sc["scenario"]
        errors = {(w["node"], w["x0_ns"]): w["error_ns"] for w in sc.get("windows", [])
                  if w.get("source") == "kernel" and w.get("error_ns") is not None}
        records = []
        for entry in sorted(os.listdir(os.path.join(rundir, name))):
            path = os.path.join(rundir, name, entry, "edges.jsonl")
            if entry.startswith("agent-n") and os.path.exists(path):
                records.append(ab.read_edges(path)[0])
        out.append((name, edge_windows(records), errors))
    return out


def edge_windows(records: list[list[dict]]) -> dict[tuple[int, int], list[dict]]:
    """Each directed edge's kernel windows in order, as the agent's scatter
    saw them (fitted max-margin windows, and the clock steps that restart
    it), from each node's edges.jsonl records (one list per node)."""
    edges: dict = {}
    # The agent's scatter holds offsets on the straight frame across a fit
    # clock's bend (either node's): so does the replay.
    bends = {int(r["node"]): truth.fit_clock_bends(rs) for rs in records for r in rs[:1]}
    for rs in records:
        for r in rs:
            if r.get("timestamp_source") != "kernel":
                continue
            w = {"node": int(r["node"]), "x0_ns": int(r["x0_ns"]), "step": bool(r.get("clock_step"))}
            if not w["step"]:
                if r.get("estimator") not in ("max_margin", "max_margin_pure") or r.get("margin_ns") is None:
                    continue
                w.update(beta_ns=straight_beta(bends.get(w["node"], []), bends.get(int(r["peer"]), []),
                                               w["x0_ns"], float(r["beta_ns"])),
                         uncertainty_ns=float(r["uncertainty_ns"]),
                         margin_ns=float(r["margin_ns"]),
                         floor_shift_ns=float(r.get("floor_shift_ns") or 0.0),
                         later_half=r.get("later_half") is not None,
                         fit_span_ns=int(r["fit_end_ns"]) - int(r["fit_start_ns"])
                         if r.get("fit_start_ns") is not None else 0,
                         sigma_ns=float(r["sigma_ns"]) if r.get("sigma_ns") is not None else None,
                         scatter_ns=float(r["sigma_scatter_ns"]) if r.get("sigma_scatter_ns") is not None
                         else None)
            edges.setdefault((w["node"], int(r["peer"])), []).append(w)
    for ws in edges.values():
        ws.sort(key=lambda w: w["x0_ns"])
    return edges


def validity(scenario: tuple[str, dict, dict], setting: tuple = AGENT_SETTING) -> tuple[int, float]:
    """How far a setting of the agent's, recomputed, stands from the
    sigma_ns it wrote: windows compared, and the p99 of |recomputed -
    written| (ns)."""
    _, edges, _ = scenario
    gaps = []
    for ws in edges.values():
        sig = sigmas(ws, *setting)
        gaps += [abs(sig[w["x0_ns"]] - w["sigma_ns"]) for w in ws
                 if not w["step"] and w.get("sigma_ns") is not None and sig[w["x0_ns"]] is not None]
    gaps.sort()
    return len(gaps), (gaps[min(len(gaps) - 1, int(0.99 * len(gaps)))] if gaps else float("nan"))


def agents_setting(scenario: tuple[str, dict, dict]) -> tuple[tuple, int, float]:
    """The agent's setting now, before the later half's factor, or the
    line's of before, whichever its recomputed sigma stands nearer the run's
    own; with that validity. (Before the later half, the first two are one.)"""
    found = [(s, *validity(scenario, s))
             for s in (AGENT_SETTING, FLOOR_BEFORE_SETTING, STRETCH_BEFORE_SETTING, MEMORY_BEFORE_SETTING,
                       HALF_BEFORE_SETTING, LINE_SETTING)]
    usable = [f for f in found if f[1]]
    return min(usable, key=lambda f: f[2]) if usable else found[0]


def score(scenario: tuple[str, dict, dict], setting: tuple, recorded_tail: float) -> tuple[int, float, float]:
    """A setting's 3-sigma coverage and median ratio on a scenario; `rec`
    rescales from recorded_tail, the tail the run's agent wrote with."""
    _, edges, errors = scenario
    pairs = []
    for ws in edges.values():
        sig = sigmas(ws, *setting, recorded_tail=recorded_tail)
        for w in ws:
            s = sig[w["x0_ns"]]
            e = errors.get((w["node"], w["x0_ns"]))
            if e is not None and s is not None:
                pairs.append((abs(e), s))
    c = truth.sigma_coverage(pairs)  # what accuracy_bench prints, by the same rule
    if c is None:
        return 0, float("nan"), float("nan")
    return c["n"], c["cover_3s"], c["width_ratio"]


def parse_setting(text: str) -> tuple:
    try:
        parts = text.split(":")
        if len(parts) not in (3, 4, 5, 6, 7, 8, 9) or parts[0] not in ("rms", "mad", "quad", "rec"):
            raise ValueError
        kind, tail, excess = parts[0], float(parts[1]), float(parts[2])
        own = float(parts[3]) if len(parts) > 3 else 0.0
        floor = float(parts[4]) if len(parts) > 4 else FLOOR_NS
        shift = float(parts[5]) if len(parts) > 5 else 0.0
        half = float(parts[6]) if len(parts) > 6 else 1.0
        memory = float(parts[7]) if len(parts) > 7 else 0.0
        stretch = float(parts[8]) if len(parts) > 8 else 1.0
        factors = (tail, excess, own, floor, shift, half, memory, stretch)
        if min(factors) < 0 or not all(map(math.isfinite, factors)):
            raise ValueError
        return kind, tail, excess, own, floor, shift, half, memory, stretch
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"setting '{text}' is not SCATTER:TAIL:EXCESS[:OWN[:FLOOR[:SHIFT[:HALF[:MEMORY[:STRETCH]]]]]] with "
            "SCATTER quad, mad, rms or rec and factors >= 0 (e.g. quad:1.3:0.5:0:4:0.5:0.5:0.75:0.75, the agent's)")


def setting_name(s: tuple) -> str:
    return ":".join(f"{v:g}" if isinstance(v, float) else v for v in s)


def selftest() -> int:
    """The replay's arithmetic against cases window_scatter_test.cc also checks."""
    fails = []

    def check(ok: bool, what: str) -> None:
        if not ok:
            fails.append(what)

    x0s = [k * 2_000_000_000 for k in range(12)]
    line = [100.0 + 3e-6 * x for x in x0s]
    check(abs(scatter(x0s, line, "mad")) < 1e-6 and abs(scatter(x0s, line, "rms")) < 1e-6, "a line has no scatter")
    bad = [10.0, -10, 10, -10, 10, 400, 10, -10, 10, -10, 10, -10]
    check(scatter(x0s, bad, "mad") * 1.2 < 80 < scatter(x0s, bad, "rms") * 1.4, "one bad window: mad narrow, rms wide")
    ws = [{"x0_ns": x, "beta_ns": 0.0, "uncertainty_ns": 1000.0, "margin_ns": 1000.0} for x in x0s[:6]]
    ws[-1]["uncertainty_ns"] = 1240.0
    sig = sigmas(ws, "mad", 1.2, 0.5)
    check(sig[x0s[3]] is None and abs(sig[x0s[4]] - FLOOR_NS) < 1e-9, "no sigma before 5 windows, then the floor")
    check(abs(sig[x0s[5]] - math.hypot(120.0, FLOOR_NS)) < 1e-9, "half the band's excess over the margin")
    # A stalled path's window (its band 300 times the others'): its own sigma
    # sees its offset, the next windows' trends leave it out, as if it were
    # not there (WindowScatter.AStalledPathsWindowIsLeftOutOfTheNextTrends).
    calm = [{"x0_ns": k * 2_000_000_000, "beta_ns": 10.0 * (-1) ** k, "uncertainty_ns": 1000.0 + k,
             "margin_ns": 1000.0} for k in range(16)]
    stall = [dict(w) for w in calm]
    stall[10].update(beta_ns=8e5, uncertainty_ns=3e5, margin_ns=1e5)
    with_stall, without = sigmas(stall, "quad", 1.3, 0.5), sigmas(calm[:10] + calm[11:], "quad", 1.3, 0.5)
    check(with_stall[stall[10]["x0_ns"]] > 1e5
          and all(abs(with_stall[w["x0_ns"]] - without[w["x0_ns"]]) < 1e-9 for w in calm[11:]),
          "a stalled path's window is left out of the next windows' trends")
    long_stall = [dict(w) for w in calm]
    for w in long_stall[7:13]:
        w.update(uncertainty_ns=1e6)  # six stalled windows in a row
    check(sigmas(long_stall, "quad", 1.3, 0.5)[calm[13]["x0_ns"]] is not None,
          "a run of stalled windows is no gap in the trend (WindowScatter.AStalledWindowsSigmaIsNoMemoryForTheNext)")
    # A 20 s span's trend: 40 windows at STRETCH 0.75, 60 in proportion
    # (WindowScatter.ALongSpansTrendReachesBackFortyWindows).
    step = [{"x0_ns": k * 2_000_000_000, "beta_ns": 1000.0 if k < 20 else 0.0, "uncertainty_ns": 0.0,
             "margin_ns": 0.0, "fit_span_ns": 20_000_000_000} for k in range(60)]
    check(abs(sigmas(step, "quad", 1.3, 0.5, stretch=0.75)[step[-1]["x0_ns"]] - FLOOR_NS) < 1e-6
          and sigmas(step, "quad", 1.3, 0.5, stretch=1.0)[step[-1]["x0_ns"]] > 50,
          "a long span's trend reaches back 12 x (span / two windows)^STRETCH windows")
    g = StalledBandGuard()
    check([g.stalled(b) for b in (1.0, 1.0, 1.0, 1.0, 8.0, 8.01, 1e3)] == [False] * 5 + [True, True],
          "a stall: over 8 times the median of at least 4 bands before")
    try:
        parse_setting("huber:1:1")
        check(False, "a bad setting is refused")
    except argparse.ArgumentTypeError:
        pass
    check(parse_setting("mad:1.2:0.5") == ("mad", 1.2, 0.5, 0.0, FLOOR_NS, 0.0, 1.0, 0.0, 1.0), "a setting parses")
    check(parse_setting("mad:1:1:0.5:3") == ("mad", 1.0, 1.0, 0.5, 3.0, 0.0, 1.0, 0.0, 1.0), "own weight and floor parse")
    check(parse_setting("rec:1.2:0.5:0:5:0.5") == ("rec", 1.2, 0.5, 0.0, 5.0, 0.5, 1.0, 0.0, 1.0),
          "the recorded scatter, a shift")
    check(parse_setting("quad:1.3:0.5:0:5:0.5:0.5")[6] == 0.5, "the later half's factor parses")
    check(parse_setting("quad:1.3:0.5:0:4:0.5:0.5:0.75:0.75") == AGENT_SETTING
          and parse_setting("quad:1.3:0.5:0:5:0.5:0.5:0.75:0.75") == FLOOR_BEFORE_SETTING,
          "the agent's setting parses, and the one before its 4 ns floor")
    # The memory (WindowScatter.ASigmaKeepsThreeQuartersOfTheRecentMedian): a window whose own sigma dips
    # far below the last 16 windows' keeps `memory` times their median.
    wide = [{"x0_ns": k * 2_000_000_000, "beta_ns": 0.0, "uncertainty_ns": 1200.0, "margin_ns": 1000.0}
            for k in range(12)]
    wide[-1]["uncertainty_ns"] = 1000.0
    plain, kept = sigmas(wide, "quad", 1.3, 0.5), sigmas(wide, "quad", 1.3, 0.5, memory=0.75)
    check(abs(plain[wide[-1]["x0_ns"]] - FLOOR_NS) < 1e-9
          and abs(kept[wide[-1]["x0_ns"]] - 0.75 * math.hypot(100.0, FLOOR_NS)) < 1e-9
          and all(plain[w["x0_ns"]] == kept[w["x0_ns"]] for w in wide[:-1]),
          "a dip keeps the memory's share of the recent sigmas, and nothing else changes")
    for bad_text in ("mad:1:1:-1", "mad:1:1:0:nan", "mad:1", "mad:1:1:0:1:9:1:1:1:1", "mad:1:1:0:1:-1",
                     "mad:1:1:0:1:1:-1", "mad:1:1:0:1:1:1:-1"):
        try:
            parse_setting(bad_text)
            check(False, f"'{bad_text}' is refused")
        except argparse.ArgumentTypeError:
            pass
    # A window off a line of +/-10 ns: its own residual widens its sigma alone.
    off = [{"x0_ns": x, "beta_ns": 10.0 * (-1) ** k, "uncertainty_ns": 1.0, "margin_ns": 1.0}
           for k, x in enumerate(x0s)]
    off[-1]["beta_ns"] = 200.0
    plain, with_own = sigmas(off, "mad", 1.2, 1.0), sigmas(off, "mad", 1.2, 1.0, 0.5, 0.0)
    check(with_own[x0s[-1]] * 3 >= 200 > plain[x0s[-1]] * 3, "half the own residual covers a window off its line")
    # Half the floors' shift, in quadrature; a step starts the history again;
    # the recorded scatter is taken as written, rescaled by its tail.
    shifted = [dict(w, floor_shift_ns=0.0) for w in ws[:5]] + [dict(ws[4], x0_ns=x0s[5], floor_shift_ns=-80.0)]
    check(abs(sigmas(shifted, "mad", 1.2, 0.0, 0.0, 0.0, 0.5)[x0s[5]] - 40) < 1e-9, "half the floors' shift")
    stepped = [dict(w) for w in off]
    stepped[3] = {"x0_ns": x0s[3], "step": True}
    after = sigmas(stepped, "mad", 1.2, 1.0)
    check(after[x0s[3]] is None and after[x0s[7]] is None and after[x0s[8]] is not None,
          "a clock step: no sigma for five windows after it")
    # A parabola has no scatter about a parabola, and needs a sixth window;
    # about a line its bend is scatter.
    bend = [{"x0_ns": x, "beta_ns": 0.5 * (x / 1e9) ** 2, "uncertainty_ns": 1.0, "margin_ns": 1.0} for x in x0s]
    check(scatter(x0s, [w["beta_ns"] for w in bend], "quad") < 1e-6 < scatter(x0s, [w["beta_ns"] for w in bend], "mad"),
          "a bend: scatter about the line, none about the parabola")
    by_parabola = sigmas(bend, "quad", 1.3, 0.0)
    check(by_parabola[x0s[4]] is None and abs(by_parabola[x0s[5]] - FLOOR_NS) < 1e-6,
          "the parabola's sigma from six windows, then the floor alone for a bend")
    # A bend of either clock (40 ppm faster from x0 = 7 windows): the
    # records' offsets bend, the straight frame's do not.
    at, rate = x0s[7], 40_000_000_000
    bent = [0.0 if x < at else -(x - at) * 4e-5 for x in x0s]
    straight = [straight_beta([(at, 0, rate)], [], x, b) for x, b in zip(x0s, bent)]
    check(scatter(x0s, straight, "mad") < 1e-3 < scatter(x0s, bent, "mad"), "a bend: straightened, a line again")
    records = [{"fit_clock": {"raw_ns": 0, "realtime_ns": 0, "rate_fine": 7_000_000_000}},
               {"fit_clock": {"raw_ns": 10**10, "realtime_ns": 10**10 + 70_000, "rate_fine": rate}},
               {"fit_clock": {"raw_ns": 2 * 10**10, "realtime_ns": 5 * 10**10, "rate_fine": 0}}]
    check(truth.fit_clock_bends(records) == [(10**10 + 70_000, 7_000_000_000, rate)],
          "a bend where an anchor starts at its predecessor's F, a step where it does not")
    # A window averaged with its later half: the band's and the shift's
    # weights at the factor, the scatter and the floor as they were.
    halved = [dict(w, later_half=True) for w in shifted]
    check(abs(sigmas(halved, "mad", 1.2, 0.0, 0.0, 0.0, 0.5, 0.5)[x0s[5]] - 20) < 1e-9
          and abs(sigmas(halved, "mad", 1.2, 0.0, 0.0, 0.0, 0.5, 1.0)[x0s[5]] - 40) < 1e-9,
          "the later half's factor on the shift")
    check(abs(sigmas([dict(w, later_half=True) for w in ws], "mad", 1.2, 0.5, 0.0, FLOOR_NS, 0.0, 0.5)[x0s[5]]
              - math.hypot(60.0, FLOOR_NS)) < 1e-9, "the later half's factor on the band")
    rec = [dict(w, scatter_ns=12.0) for w in ws]
    check(abs(sigmas(rec, "rec", 0.6, 0.0, 0.0, 0.0, recorded_tail=1.2)[x0s[5]] - 6.0) < 1e-9,
          "the recorded scatter, at half the tail it was written with")
    for f in fails:
        print(f"selftest: FAIL {f}")
    print("selftest: " + ("FAIL" if fails else "PASS"))
    return 1 if fails else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("runs", nargs="*", help="accuracy_bench output directories")
    ap.add_argument("--selftest", action="store_true", help="check the arithmetic and exit")
    ap.add_argument("--setting", action="append", type=parse_setting,
                    help="SCATTER:TAIL:EXCESS[:OWN[:FLOOR[:SHIFT[:HALF[:MEMORY[:STRETCH]]]]]] (repeatable; default "
                         "quad:1.3:0.5:0:4:0.5:0.5:0.75:0.75, the agent's)")
    a = ap.parse_args(argv)
    if a.selftest:
        return selftest()
    if not a.runs:
        ap.error("give at least one accuracy_bench output directory")
    settings = a.setting or [AGENT_SETTING]
    scenarios = []
    for run in a.runs:
        if not os.path.exists(os.path.join(run, "results.json")):
            print(f"sigma_replay: {run}: no results.json (not an accuracy_bench output directory)", file=sys.stderr)
            return 2
        scenarios += [(run, sc) for sc in load_run(run)]
    met = {s: [0, 0, 0] for s in settings}
    agents = [agents_setting(sc) for _, sc in scenarios]
    for (run, sc), (setting, n_valid, gap) in zip(scenarios, agents):
        if n_valid:
            print(f"{os.path.basename(run.rstrip('/')):22} {sc[0]:13} the agent's setting ({setting_name(setting)}) "
                  f"recomputed stands p99 {gap:.3f} ns from its sigma_ns ({n_valid} windows)")
        n_bands, top, stalled = band_ratios(sc)
        if n_bands:
            print(f"{os.path.basename(run.rstrip('/')):22} {sc[0]:13} a fit's band over its edge's median of the last "
                  f"16: max {top:.2f} over {n_bands} windows; {stalled} over {StalledBandGuard.FACTOR:g} (a stall's)")
    for (run, sc), (agent_setting, _, _) in zip(scenarios, agents):
        cells = []
        for s in settings:
            n, cover, ratio = score(sc, s, recorded_tail=agent_setting[1])
            met[s][0] += cover >= 0.99
            met[s][1] += ratio <= 3
            met[s][2] += cover >= 0.99 and ratio <= 3
            cells.append(f"{setting_name(s)} {100 * cover:5.1f} % {ratio:5.2f}x")
        print(f"{os.path.basename(run.rstrip('/')):22} {sc[0]:13} n={n:3}  " + "  |  ".join(cells))
    for s, (c, r, both) in met.items():
        print(f"{setting_name(s)}: 3 sigma covers >= 99 % in {c} of {len(scenarios)} scenarios, "
              f"median sigma <= 3x median |error| in {r}, both in {both}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
