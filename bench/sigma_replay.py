#!/usr/bin/env python3
"""Replay the agent's window sigma over saved accuracy_bench runs.

The agent's sigma_ns (agent/estimate/window_scatter.h, docs/estimator.md §8)
has factors calibrated on the test bed. This recomputes it, for each factor
setting asked, from the beta_ns, uncertainty_ns and margin_ns that the runs'
edges.jsonl recorded, against the truth of their injected clocks, and prints
per scenario the 3-sigma coverage and the median sigma over the median
|error| (issue 12's targets: >= 99 % and <= 3), then how many scenarios met
each. No root, no agent: only saved runs (accuracy_bench --out DIR).

    bench/sigma_replay.py out/accuracy-* [--setting mad:1.2:1.0 --setting mad:1.2:1.0:0.5:3]

A setting is SCATTER:TAIL:EXCESS[:OWN[:FLOOR]]: SCATTER `rms`
(sqrt(RSS / (n - 2)), the agent before 2026-11-26) or `mad` (median
|residual| x 1.4826, the agent now), TAIL the factor on it, EXCESS the
weight on the window's uncertainty_ns - margin_ns, OWN the weight on the
window's own |residual| from its edge's line (default 0, as the agent),
FLOOR the floor in ns (default 5, as the agent). Windows are kernel-stamp
max_margin windows in each run's measured span, every window feeding a
12-window history (the agent's defaults).
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
from truth import VClock  # noqa: E402

HISTORY, MIN_HISTORY, FLOOR_NS = 12, 5, 5.0
WINDOW_NS = 2_000_000_000


def residuals(x0s: list[int], betas: list[float]) -> list[float]:
    """The windows' residuals from their least-squares line, as the agent computes them."""
    n = len(x0s)
    x = [(v - x0s[-1]) / 1e9 for v in x0s]
    y = [b - betas[-1] for b in betas]
    mx, my = sum(x) / n, sum(y) / n
    sxx = sum((a - mx) ** 2 for a in x)
    slope = sum((a - mx) * (b - my) for a, b in zip(x, y)) / sxx if sxx > 0 else 0.0
    return [(b - my) - slope * (a - mx) for a, b in zip(x, y)]


def scatter(x0s: list[int], betas: list[float], kind: str) -> float:
    """The windows' scatter about their least-squares line."""
    res = residuals(x0s, betas)
    if kind == "rms":
        return math.sqrt(sum(r * r for r in res) / (len(res) - 2))
    return 1.4826 * statistics.median(abs(r) for r in res)


def sigmas(windows: list[dict], kind: str, tail: float, excess: float, own: float = 0.0,
           floor: float = FLOOR_NS) -> dict[int, float | None]:
    out: dict[int, float | None] = {}
    for i, w in enumerate(windows):
        # A span longer than two windows stretches the line in proportion
        # (window_scatter.cc): overlapping spans' offsets move together.
        span = w.get("fit_span_ns") or 0
        history = round(HISTORY * max(1.0, span / (2 * WINDOW_NS)))
        hist = windows[max(0, i - history + 1):i + 1]
        if len(hist) < MIN_HISTORY:
            out[w["x0_ns"]] = None
            continue
        x0s, betas = [h["x0_ns"] for h in hist], [h["beta_ns"] for h in hist]
        s = tail * scatter(x0s, betas, kind)
        e = excess * max(0.0, w["uncertainty_ns"] - w["margin_ns"])
        o = own * abs(residuals(x0s, betas)[-1]) if own else 0.0
        out[w["x0_ns"]] = math.sqrt(s * s + e * e + o * o + floor ** 2)
    return out


def load_run(rundir: str) -> list[tuple[str, dict, set]]:
    """Per scenario: the kernel max_margin windows by directed edge (with
    their errors and fit fields), and the (node, x0) pairs in the measured span."""
    res = json.load(open(os.path.join(rundir, "results.json")))
    out = []
    for sc in res["scenarios"]:
        name = sc["scenario"]
        inspan = {(w["node"], w["x0_ns"]) for w in sc.get("windows", []) if w.get("source") == "kernel"}
        recs: list[dict] = []
        for entry in sorted(os.listdir(os.path.join(rundir, name))):
            path = os.path.join(rundir, name, entry, "edges.jsonl")
            if entry.startswith("agent-n") and os.path.exists(path):
                recs += ab.read_edges(path)[0]
        clocks = {}
        fit = {}
        for r in recs:
            v = r.get("test_virtual_clock")
            if v:
                clocks[int(r["node"])] = VClock.make(v["offset_ns"], v["drift_ppm"], v["t0_ns"])
            if r.get("timestamp_source") == "kernel" and r.get("margin_ns") is not None:
                span = r["fit_end_ns"] - r["fit_start_ns"] if r.get("fit_start_ns") is not None else 0
                fit[(int(r["node"]), r["x0_ns"])] = (float(r["uncertainty_ns"]), float(r["margin_ns"]), span)
        edges: dict = {}
        for w in ab.window_errors(recs, clocks)[0]:
            key = (w["node"], w["x0_ns"])
            if w["source"] != "kernel" or w["estimator"] != "max_margin" or key not in fit:
                continue
            w["uncertainty_ns"], w["margin_ns"], w["fit_span_ns"] = fit[key]
            edges.setdefault((w["node"], w["peer"]), []).append(w)
        for ws in edges.values():
            ws.sort(key=lambda w: w["x0_ns"])
        out.append((name, edges, inspan))
    return out


def score(scenario: tuple[str, dict, set], *setting) -> tuple[int, float, float]:
    _, edges, inspan = scenario
    pairs = []
    for ws in edges.values():
        sig = sigmas(ws, *setting)
        for w in ws:
            s = sig[w["x0_ns"]]
            if (w["node"], w["x0_ns"]) in inspan and s is not None:
                pairs.append((abs(w["error_ns"]), s))
    if not pairs:
        return 0, float("nan"), float("nan")
    cover = sum(1 for e, s in pairs if e <= 3 * s) / len(pairs)
    median_err = statistics.median(e for e, _ in pairs)
    ratio = statistics.median(s for _, s in pairs) / median_err if median_err > 0 else float("inf")
    return len(pairs), cover, ratio


def parse_setting(text: str) -> tuple:
    try:
        parts = text.split(":")
        if len(parts) not in (3, 4, 5) or parts[0] not in ("rms", "mad"):
            raise ValueError
        kind, tail, excess = parts[0], float(parts[1]), float(parts[2])
        own = float(parts[3]) if len(parts) > 3 else 0.0
        floor = float(parts[4]) if len(parts) > 4 else FLOOR_NS
        if min(tail, excess, own, floor) < 0 or not all(map(math.isfinite, (tail, excess, own, floor))):
            raise ValueError
        return kind, tail, excess, own, floor
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"setting '{text}' is not SCATTER:TAIL:EXCESS[:OWN[:FLOOR]] with SCATTER rms or mad and "
            "factors >= 0 (e.g. mad:1.2:1.0 or mad:1.2:1.0:0.5:3)")


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
    try:
        parse_setting("huber:1:1")
        check(False, "a bad setting is refused")
    except argparse.ArgumentTypeError:
        pass
    check(parse_setting("mad:1.2:0.5") == ("mad", 1.2, 0.5, 0.0, FLOOR_NS), "a setting parses")
    check(parse_setting("mad:1:1:0.5:3") == ("mad", 1.0, 1.0, 0.5, 3.0), "own weight and floor parse")
    for bad_text in ("mad:1:1:-1", "mad:1:1:0:nan", "mad:1", "mad:1:1:0:1:9"):
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
                    help="SCATTER:TAIL:EXCESS[:OWN[:FLOOR]] (repeatable; default mad:1.2:1.0, the agent's, "
                         "and mad:1.2:1.0:0.5, with half the own residual)")
    a = ap.parse_args(argv)
    if a.selftest:
        return selftest()
    if not a.runs:
        ap.error("give at least one accuracy_bench output directory")
    settings = a.setting or [("mad", 1.2, 1.0, 0.0, FLOOR_NS), ("mad", 1.2, 1.0, 0.5, FLOOR_NS)]
    scenarios = []
    for run in a.runs:
        if not os.path.exists(os.path.join(run, "results.json")):
            print(f"sigma_replay: {run}: no results.json (not an accuracy_bench output directory)", file=sys.stderr)
            return 2
        scenarios += [(run, sc) for sc in load_run(run)]
    met = {s: [0, 0, 0] for s in settings}
    for run, sc in scenarios:
        cells = []
        for s in settings:
            n, cover, ratio = score(sc, *s)
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
