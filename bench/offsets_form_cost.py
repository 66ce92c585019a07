#!/usr/bin/env python3
"""What offsets.jsonl costs to store per day, rows against columns
(docs/formats.md), on generated solutions with realistic digits.

coordination_load_bench prints the cost of the leader's own file, but its
simulated summaries give drifts of a few 1e-12, whose columns compress
better than a real cluster's would. Here every node has an offset within
+-50 ms, a drift within +-D ppm, 20 ns of noise on its offset and 1e-10 on
its drift per instant, and sigmas and residuals of 5-25 ns; each form is
written as the leader writes it and compressed with gzip -6 (zlib level 6),
as a rotation stores it.

  bench/offsets_form_cost.py [--nodes 10000] [--instants 12] [--drift-ppm 1 100]
"""
import argparse
import json
import random
import zlib

INSTANTS_PER_DAY = 86400 // 2  # 2 s windows


def forms(nodes, instants, drift_ppm, rng):
    base = [rng.uniform(-50e6, 50e6) for _ in range(nodes)]
    drift = [rng.uniform(-drift_ppm, drift_ppm) * 1e-6 for _ in range(nodes)]
    rows, columns = [], []
    for i in range(instants):
        t = 1796240253000000000 + i * 2000000000
        offset, slope, sigma, residual = [], [], [], []
        for n in range(nodes):
            offset.append(base[n] + drift[n] * i * 2e9 + rng.gauss(0, 20))
            slope.append(drift[n] + rng.gauss(0, 1e-10))
            sigma.append(abs(rng.gauss(15, 5)))
            residual.append(abs(rng.gauss(12, 5)))
            rows.append(json.dumps({"schema": "chronolink.offset.v1", "node": n, "reference": "mean", "t_ns": t,
                                    "offset_ns": offset[-1], "drift": slope[-1], "uncertainty_ns": sigma[-1],
                                    "residual_ns": residual[-1], "reachable": True, "component": 0,
                                    "edges_used": 12, "leader": 1}, separators=(",", ":")))
        columns.append(json.dumps({"schema": "chronolink.offset_columns.v1", "reference": "mean", "t_ns": t,
                                   "leader": 1, "node_delta": [0] + [1] * (nodes - 1),
                                   "offset_ps": [round(x * 1e3) for x in offset],
                                   "drift_ps_per_s": [round(x * 1e12) for x in slope],
                                   "uncertainty_ps": [round(x * 1e3) for x in sigma],
                                   "residual_ps": [round(x * 1e3) for x in residual],
                                   "component": [0] * nodes, "edges_used": [12] * nodes}, separators=(",", ":")))
    return ("\n".join(rows) + "\n").encode(), ("\n".join(columns) + "\n").encode()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=10000)
    p.add_argument("--instants", type=int, default=12)
    p.add_argument("--drift-ppm", type=float, nargs="+", default=[1.0, 100.0])
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    if a.nodes < 1 or a.instants < 1:
        p.error("--nodes and --instants must be at least 1")
    solutions = a.nodes * a.instants
    for d in a.drift_ppm:
        rows, columns = forms(a.nodes, a.instants, d, random.Random(a.seed))
        line = [f"{a.nodes} nodes, drift within +-{d:g} ppm:"]
        for name, text in (("rows", rows), ("columns", columns)):
            raw = len(text) / solutions
            gz = len(zlib.compress(text, 6)) / solutions
            line.append(f"{name} {raw:.1f} B per node per instant, {gz:.1f} B gzip -6, "
                        f"{gz * a.nodes * INSTANTS_PER_DAY / 1e9:.1f} GB a day gzipped;")
        print(" ".join(line))


if __name__ == "__main__":
    main()
