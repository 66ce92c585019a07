#!/usr/bin/env python3
"""Probe loss on the test bed: two agents, a fraction of their probes dropped.

For each fraction, a routed two-node test bed; the probe-loss tc filter
(chronolink-probe-loss, docs/testbed.md "Probe loss") on both nodes' veth
egress, so forward and reverse probes are both lost; two agents with
test-mode virtual clocks (node 2 +3.7 ms, +45 ppm against node 1) for
--seconds. It prints, per fraction: windows written and how many were
estimated, the error of each estimated full window against the exact truth
(p50/p99, and the share whose uncertainty band holds the truth), the agents'
tuple counts (complete, TX stamps missing, lost) and packet counts, and the
drop filter's own counters. docs/PERFORMANCE.md "Probe loss" quotes it.

Needs root, the agent and chronolink-probe-loss (build*/ of this checkout).
    sudo nice -n 19 bench/probe_loss_bench.py            # 0, 10 and 30 % loss, 20 s each
    sudo bench/probe_loss_bench.py --probe-interval-us 0 --window-s 2 --seconds 60   # the agent's defaults
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.realpath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tools", "testbed"))
import testbed as tbm  # noqa: E402
import truth  # noqa: E402

KEY_HEX = "5c1e0f7a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6"


def _find_agent(explicit: str | None) -> str:
    cands = [explicit] + [os.path.join(REPO, d, "agent", "chronolink-agent")
                          for d in sorted(os.listdir(REPO)) if d.startswith("build")]
    for c in cands:
        if c and os.access(c, os.X_OK):
            return c
    raise SystemExit("chronolink-agent not found: build it or pass --agent-bin")


def percentile(xs: list[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not xs:
        return None
    s = sorted(xs)
    k = (len(s) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def read_jsonl(path: str) -> list[dict]:
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                rows.append(json.loads(line))
    return rows


def run_fraction(a: argparse.Namespace, fraction: float, outdir: str) -> dict:
    t0 = time.time_ns()
    clocks = {1: truth.VClock.make(0, 0, t0), 2: truth.VClock.make(3_700_000, 45, t0)}
    res: dict = {"fraction": fraction}
    with tbm.Testbed(a.name, nodes=2, topology="routed") as tb:
        cluster = os.path.join(outdir, "cluster.json")
        with open(cluster, "w") as f:
            json.dump({"cluster_id": 7, "nodes": [{"id": n.index, "address": n.address, "port": 7319}
                                                  for n in tb.nodes]}, f)
        key = os.path.join(outdir, "key.hex")
        with open(key, "w") as f:
            f.write(KEY_HEX + "\n")
        os.chmod(key, 0o600)
        for n in (1, 2):
            tb.probe_loss(n, fraction, loader=a.loader)
        procs = {}
        for n in (1, 2):
            c = clocks[n]
            argv = [a.agent_bin, "--node-id", str(n), "--cluster-file", cluster, "--key-file", key,
                    "--output-dir", os.path.join(outdir, f"node{n}"),
                    "--duration-s", str(a.seconds), "--window-s", str(a.window_s),
                    *cadence_args(a),
                    "--test-mode", "--virtual-offset-ns", str(c.offset_ns),
                    "--virtual-drift-ppm", str(c.drift_ppm), "--virtual-t0-ns", str(c.t0_ns)]
            logf = open(os.path.join(outdir, f"agent{n}.log"), "wb")
            env = {k: v for k, v in os.environ.items() if not k.startswith("CHRONOLINK_")}
            procs[n] = tb.popen(n, argv, stdout=logf, stderr=subprocess.STDOUT, env=env)
        for n, p in procs.items():
            p.wait(timeout=a.seconds + 30)
            if p.returncode != 0:
                raise SystemExit(f"agent {n} exited with {p.returncode}; see {outdir}/agent{n}.log")
        loss = {n: tb.probe_loss_stats(n) for n in (1, 2)}

    res["nodes"] = {}
    for n, peer in ((1, 2), (2, 1)):
        rows = [r for r in read_jsonl(os.path.join(outdir, f"node{n}", "edges.jsonl"))
                if r["timestamp_source"] == "kernel"]
        with open(os.path.join(outdir, f"node{n}", "agent_stats.json")) as f:
            stats = json.load(f)
        full = rows[1:-1]  # the agent started in the first window and stopped in the last
        errors, bands, covered = [], [], 0
        for r in full:
            if r["estimator"] == "none":
                continue
            err = float(r["beta_ns"]) - float(truth.true_beta(r["x0_ns"], clocks[n], clocks[peer]))
            errors.append(abs(err))
            bands.append(float(r["uncertainty_ns"]))
            covered += abs(err) <= float(r["uncertainty_ns"])
        pc = stats["peers"][str(peer)]
        lf = loss[n]
        res["nodes"][n] = {
            "windows_written": len(rows),
            "full_windows": len(full),
            "estimated": len(errors),
            "estimators": {k: sum(1 for r in full if r["estimator"] == k)
                           for k in sorted({r["estimator"] for r in full})},
            "abs_error_ns_p50": percentile(errors, 0.5),
            "abs_error_ns_p99": percentile(errors, 0.99),
            "truth_in_band": covered,
            "uncertainty_ns_p50": percentile(bands, 0.5),
            "pairs_sent": sum(r["pairs_sent"] for r in rows),
            "tuples_complete": sum(r["tuples_complete"] for r in rows),
            "tx_stamps_missing": sum(r["tx_stamps_missing"] for r in rows),
            "lost": sum(r["lost"] for r in rows),
            "packets_sent": pc["packets_sent"],
            "packets_received": pc["packets_received"],
            "forward_pairs_incomplete": pc["forward_pairs_incomplete"],
            # probes only (the agent counts pilots apart)
            "filter_seen": sum(lf["by_type"][t]["seen"] for t in ("forward", "reverse", "followup")),
            "filter_dropped": sum(lf["by_type"][t]["dropped"]
                                  for t in ("forward", "reverse", "followup")),
            "filter_by_type": lf["by_type"],
        }
    return res


def cadence_args(a: argparse.Namespace) -> list[str]:
    """A fixed cadence, or none: the agent's own default (adaptive)."""
    if a.probe_interval_us == 0:
        return []
    return ["--probe-interval-us", str(a.probe_interval_us), "--probe-adaptive", "off"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fractions", default="0,0.1,0.3")
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--window-s", type=float, default=1.0)
    ap.add_argument("--probe-interval-us", type=int, default=2000,
                    help="one pair per this, adaptive cadence off (0: the agent's default cadence, adaptive)")
    ap.add_argument("--agent-bin")
    ap.add_argument("--loader", help="chronolink-probe-loss (default: found in build*/tools)")
    ap.add_argument("--name", default="clplb")
    ap.add_argument("--keep", help="keep the agents' output under this directory")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    a = ap.parse_args()
    a.agent_bin = _find_agent(a.agent_bin)
    a.loader = tbm.probe_loss_loader(a.loader)
    results = []
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
    for f in (float(x) for x in a.fractions.split(",")):
        outdir = tempfile.mkdtemp(prefix=f"chronolink-loss{f:g}-", dir=a.keep)
        os.chmod(outdir, 0o755)  # the agent drops to an unprivileged user that must reach it
        results.append(run_fraction(a, f, outdir))
        if not a.keep:
            shutil.rmtree(outdir, ignore_errors=True)
    if a.json:
        print(json.dumps(results, indent=2))
        return 0
    cadence = f"one pair per {a.probe_interval_us} us" if a.probe_interval_us else "the agent's default cadence"
    print(f"# {a.seconds} s per run, {a.window_s:g} s windows, {cadence}, loss on both nodes' egress (all types)")
    print("loss  node  windows  full  estimated  in band  |err| p50  |err| p99  band p50  pairs"
          "  complete  tx_missing  lost  probes sent  filter seen/dropped  peer received")
    for r in results:
        for n, x in r["nodes"].items():
            peer = r["nodes"][2 if n == 1 else 1]
            p50 = f"{x['abs_error_ns_p50']:.0f} ns" if x["abs_error_ns_p50"] is not None else "-"
            p99 = f"{x['abs_error_ns_p99']:.0f} ns" if x["abs_error_ns_p99"] is not None else "-"
            band = f"{x['uncertainty_ns_p50']:.0f} ns" if x["uncertainty_ns_p50"] is not None else "-"
            print(f"{r['fraction']:4.0%}  {n:4d}  {x['windows_written']:7d}  {x['full_windows']:4d}  "
                  f"{x['estimated']:9d}  {x['truth_in_band']:7d}  {p50:>9}  {p99:>9}  {band:>8}  "
                  f"{x['pairs_sent']:5d}  {x['tuples_complete']:8d}  {x['tx_stamps_missing']:10d}  "
                  f"{x['lost']:4d}  {x['packets_sent']:11d}  {x['filter_seen']:11d}/{x['filter_dropped']:<7d}  "
                  f"{peer['packets_received']:13d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
