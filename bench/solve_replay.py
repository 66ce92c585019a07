#!/usr/bin/env python3
"""Solve a saved cluster run's edges again with each window's sigma
recomputed under another setting: what a sigma setting does to the solved
offsets, whose weights the sigmas are.

A cluster run is a chronolink-demo output directory (its summary.json,
clocks/ and nodeN/edges.jsonl). For each setting (bench/sigma_replay.py's
SCATTER:TAIL:EXCESS[:OWN[:FLOOR[:SHIFT[:HALF]]]]) every kernel window's
sigma_ns is recomputed from its record as sigma_replay recomputes it, the
edges are solved with the leader's offline twin (chronolink-solve, as the
demo's "network effect" step runs it), and the solved offsets are compared
with the nodes' exact clocks: p50 / p99 / max |solved - true| and the 3-sigma
coverage, over the instants after the first --skip-windows. The records as
written are solved first, then the agent's own setting recomputed, which
says how near the replay stands to the agent (its sigmas' p99 distance and
the solve's). Use SCATTER `rec` (the recorded scatter, runs from 2026-12-05
on) to change the band, shift and half terms alone, exactly.

    bench/solve_replay.py RUN [--setting rec:1.3:0.5:0:5:0.5:1 ...] [--node-bias-floor-ns 4 ...]

With --node-bias-floor-ns B every setting is solved again with the solver's
node bias floor at B (chronolink-solve --node-bias-floor-ns).

sigma_shared_ns (the part of a window's sigma the link's other direction
shares) follows as the agent writes it: the whole sigma where the window
fitted the peer's probes too, else the floor's part, moved from the agent's
floor to the setting's. No root, no agent: only the saved run.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools", "testbed"))
import node_clocks  # noqa: E402
import sigma_replay as sr  # noqa: E402
import truth  # noqa: E402

DEFAULT_SOLVE = os.path.join(ROOT, "build", "tools", "chronolink-solve")
REFERENCE = 1  # the demo's leader and the solve's reference


def load_cluster_run(run: str) -> dict:
    """The run's nodes, start, truths and each node's edges.jsonl lines."""
    path = os.path.join(run, "summary.json")
    try:
        with open(path) as f:
            summary = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: {e} (not a chronolink-demo output directory?)") from e
    nodes = int(summary["nodes"])
    clocks = {}
    for n in range(1, nodes + 1):
        described = dict(summary["clocks"][str(n)])
        if described.get("state_file"):  # the run may have moved since
            moved = os.path.join(run, "clocks", os.path.basename(described["state_file"]))
            if os.path.exists(moved):
                described["state_file"] = moved
        clocks[n] = node_clocks.described_node_clock(n, described).truth()
    lines = {}
    for n in range(1, nodes + 1):
        with open(os.path.join(run, f"node{n}", "edges.jsonl")) as f:
            lines[n] = [json.loads(line) for line in f if line.strip()]
    window_ns = next(r["window_end_ns"] - r["window_start_ns"] for rs in lines.values() for r in rs)
    return {"run": run, "nodes": nodes, "t0_ns": int(summary["t0_ns"]), "clocks": clocks, "lines": lines,
            "window_ns": window_ns}


def recomputed_sigmas(c: dict, setting: tuple) -> dict[tuple[int, int, int], float | None]:
    """Each kernel window's sigma under a setting, by (node, peer, x0)."""
    out = {}
    for (node, peer), ws in sr.edge_windows(list(c["lines"].values())).items():
        for x0, s in sr.sigmas(ws, *setting).items():
            out[(node, peer, x0)] = s
    return out


def rewritten(r: dict, sigma: float | None, floor_ns: float, written_floor_ns: float = sr.FLOOR_NS) -> dict:
    """A record with its sigma (None: none yet, as the agent writes it
    before its history has grown) and the shared part that follows it, its
    floor moved from the one the run's agent wrote with to `floor_ns`."""
    r = dict(r)
    if sigma is None:
        r["sigma_ns"] = r["sigma_shared_ns"] = r["sigma_scatter_ns"] = None
        return r
    if (r.get("tuples_peer_session") or 0) > 0:
        shared = sigma
    else:
        old = r.get("sigma_shared_ns") or written_floor_ns
        shared = math.sqrt(max(0.0, old * old - written_floor_ns ** 2 + floor_ns * floor_ns))
    r["sigma_ns"], r["sigma_shared_ns"] = sigma, shared
    return r


def write_edges(c: dict, outdir: str, sigmas: dict | None, floor_ns: float,
                written_floor_ns: float = sr.FLOOR_NS) -> list[str]:
    paths = []
    for n, rs in c["lines"].items():
        os.makedirs(os.path.join(outdir, f"node{n}"), exist_ok=True)
        path = os.path.join(outdir, f"node{n}", "edges.jsonl")
        with open(path, "w") as f:
            for r in rs:
                key = (int(r["node"]), int(r["peer"]), int(r["x0_ns"]))
                if sigmas is not None and r.get("timestamp_source") == "kernel" and key in sigmas \
                        and r.get("beta_ns") is not None:
                    r = rewritten(r, sigmas[key], floor_ns, written_floor_ns)
                f.write(json.dumps(r) + "\n")
        paths.append(path)
    return paths


def solve(c: dict, edges: list[str], outdir: str, solve_bin: str, timeout_s: float,
          node_bias_floor_ns: float | None = None) -> str:
    """The offline solve of the edges; the path of its offsets.jsonl."""
    timebases = [p for p in (os.path.join(c["run"], f"node{n}", "timebase.jsonl") for n in c["lines"])
                 if os.path.exists(p)]
    out = os.path.join(outdir, "offsets.jsonl")
    cmd = [solve_bin, "--edges", *edges, "--reference", str(REFERENCE), "--every-s", repr(c["window_ns"] / 1e9),
           "--method", "global", "--format", "rows", "--out", out] + (["--timebase", *timebases] if timebases else [])
    if node_bias_floor_ns is not None:
        cmd += ["--node-bias-floor-ns", repr(node_bias_floor_ns)]
    cp = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if cp.returncode != 0:
        raise RuntimeError(f"chronolink-solve failed ({cp.returncode}): {cp.stderr.strip()}")
    return out


def score(c: dict, offsets: str, skip_windows: int) -> dict:
    """|solved - true| and the 3-sigma coverage over the reachable offsets of
    the instants after the first skip_windows (the demo's rule), read as
    accuracy_bench reads a leader's (the last line of an instant wins)."""
    ref = c["clocks"][REFERENCE]
    since = int(ref.true_time(ref.at(c["t0_ns"]) + skip_windows * c["window_ns"]))
    solved = sr.ab.solved_errors(offsets, c["clocks"], since, 2**63 - 1)
    errors = sorted(abs(e["error_ns"]) for e in solved)
    if not errors:
        return {"n": 0}

    def q(p: float) -> float:  # the demo's percentile
        return errors[min(len(errors) - 1, int(p * len(errors)))]
    return {"n": len(errors), "p50_ns": q(0.5), "p99_ns": q(0.99), "max_ns": errors[-1],
            "sigma": truth.sigma_coverage([(e["error_ns"], e["sigma_ns"]) for e in solved])}


def format_score(name: str, s: dict) -> str:
    if not s.get("n"):
        return f"{name:<28} no solved offset after the skipped windows"
    c = s["sigma"]
    cover = f"3σ {100 * c['cover_3s']:5.1f} % at {c['width_ratio']:.2f}×" if c else "no σ"
    return (f"{name:<28} solved |error| p50 {s['p50_ns']:6.1f}  p99 {s['p99_ns']:6.1f}  max {s['max_ns']:6.1f} ns;"
            f" {cover} ({s['n']} offsets)")


def sigma_gap(c: dict, sigmas: dict) -> tuple[int, float]:
    """How far recomputed sigmas stand from the written ones: windows, p99 ns."""
    gaps = sorted(abs(sigmas[(int(r["node"]), int(r["peer"]), int(r["x0_ns"]))] - r["sigma_ns"])
                  for rs in c["lines"].values() for r in rs
                  if r.get("timestamp_source") == "kernel" and r.get("sigma_ns") is not None
                  and sigmas.get((int(r["node"]), int(r["peer"]), int(r["x0_ns"]))) is not None)
    return len(gaps), (gaps[min(len(gaps) - 1, int(0.99 * len(gaps)))] if gaps else float("nan"))


def selftest() -> int:
    ok = True

    def check(cond: bool, what: str) -> None:
        nonlocal ok
        ok &= cond
        print(f"{'ok:  ' if cond else 'FAIL:'} {what}")
    r = {"sigma_ns": 20.0, "sigma_shared_ns": 5.0, "tuples_peer_session": 0}
    w = rewritten(r, 10.0, 5.0, 5.0)
    check(w["sigma_ns"] == 10.0 and w["sigma_shared_ns"] == 5.0 and r["sigma_ns"] == 20.0,
          "a window on its own probes keeps its shared part, and the record read is not changed")
    check(abs(rewritten(r, 10.0, 3.0, 5.0)["sigma_shared_ns"] - 3.0) < 1e-12, "the shared floor follows the setting's")
    check(abs(rewritten({**r, "sigma_shared_ns": 4.0}, 10.0, 4.0)["sigma_shared_ns"] - 4.0) < 1e-12
          and abs(rewritten(r, 10.0, 4.0, 5.0)["sigma_shared_ns"] - 4.0) < 1e-12,
          "the floor is moved from the one the run's agent wrote with (today's 4 ns, or 5 ns before)")
    check(rewritten({**r, "tuples_peer_session": 4}, 10.0, 5.0)["sigma_shared_ns"] == 10.0,
          "a window on the peer's probes too shares its whole sigma")
    check(rewritten(r, None, 5.0)["sigma_ns"] is None, "no sigma yet stays none")
    print("selftest:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("run", nargs="?", help="a chronolink-demo output directory")
    ap.add_argument("--setting", action="append", type=sr.parse_setting, default=[],
                    help="SCATTER:TAIL:EXCESS[:OWN[:FLOOR[:SHIFT[:HALF[:MEMORY[:STRETCH]]]]]], as bench/sigma_replay.py's "
                         "(repeatable)")
    ap.add_argument("--node-bias-floor-ns", type=float, action="append", default=[], metavar="NS",
                    help="also solve every setting with this node bias floor (repeatable; docs/solver.md "
                         "\"A node's own bias\"; default: the solver's own)")
    ap.add_argument("--skip-windows", type=int, default=5, help="instants left out at the start (the demo's 5)")
    ap.add_argument("--solve-bin", default=DEFAULT_SOLVE, help="chronolink-solve (default: %(default)s)")
    ap.add_argument("--timeout-s", type=float, default=300, help="limit on each solve (default %(default)s s)")
    ap.add_argument("--selftest", action="store_true", help="check the record rewriting and exit")
    a = ap.parse_args(argv)
    if a.selftest:
        return selftest()
    if not a.run:
        ap.error("give a chronolink-demo output directory")
    if not os.access(a.solve_bin, os.X_OK):
        print(f"solve_replay: {a.solve_bin}: not an executable (build first: scripts/build.sh)", file=sys.stderr)
        return 2
    try:
        c = load_cluster_run(a.run)
    except (OSError, ValueError, KeyError) as e:
        print(f"solve_replay: {a.run}: {e}", file=sys.stderr)
        return 2
    print(f"{a.run}: {c['nodes']} nodes, {c['window_ns'] / 1e9:g} s windows, reference node {REFERENCE}")
    # Which setting the run's agent wrote with: today's, the one before the
    # memory, or the one before the later half's factor, whichever
    # recomputes nearer its sigma_ns.
    found = []
    for s in (sr.AGENT_SETTING, sr.FLOOR_BEFORE_SETTING, sr.STRETCH_BEFORE_SETTING, sr.MEMORY_BEFORE_SETTING,
              sr.HALF_BEFORE_SETTING):
        setting = ("rec",) + s[1:]
        sigmas = recomputed_sigmas(c, setting)
        found.append((sigma_gap(c, sigmas), setting, sigmas))
    (windows, gap), agent, agent_sigmas = min(found, key=lambda f: f[0][1])
    print(f"the run's agent's setting ({sr.setting_name(agent)}) recomputed stands p99 {gap:.3f} ns from the "
          f"written sigma_ns ({windows} windows)")
    work = tempfile.mkdtemp(prefix="solve_replay.")
    try:
        cases = [("as written", None, agent[4])] + [(sr.setting_name(s), s, s[4])
                                                            for s in [agent] + [s for s in a.setting if s != agent]]
        cases += [(f"{name}, node bias floor {b:g} ns", setting, floor_ns, b)
                  for b in a.node_bias_floor_ns for name, setting, floor_ns in cases[1:]]
        for n, (name, setting, floor_ns, *bias) in enumerate(cases):
            sigmas = None if setting is None else agent_sigmas if setting == agent else recomputed_sigmas(c, setting)
            outdir = os.path.join(work, str(n))
            offsets = solve(c, write_edges(c, outdir, sigmas, floor_ns, agent[4]), outdir, a.solve_bin, a.timeout_s,
                            bias[0] if bias else None)
            print(format_score(name, score(c, offsets, a.skip_windows)), flush=True)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print(f"solve_replay: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
