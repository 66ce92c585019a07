#!/usr/bin/env python3
"""End to end: simulated GPUs on a skewed test-bed cluster, aligned onto cluster time.

A 4-node routed test bed; every node runs chronolink-agent with a virtual
clock (offsets over ±50 ms, drifts over ±100 ppm, node 1 the reference) and
`chronolink-collect run` with the same virtual host clock and a simulated
backend of two GPUs whose counters run at their own rates, rate errors and
drifts (different per node and device), with read jitter and occasional slow
reads. Each collector writes its node's XSpace (device planes, clock plane)
and the simulation's truth: every record's true start and end. Then, with the
leader's offsets.jsonl, `chronolink-trace align --annotate-events` rewrites
the run, and every GPU event's aligned start and end minus its true instant
must have p99 <= 1 µs and lie within the event's own reported bound
(`chronolink_bound_ns`: the correction's bound plus the collector's GPU ->
host bound) for >= 99 % of events. The collectors also read their agent's
clock page: each must have seen it "ok" and never lapse, and `align --recorded-mapping`
(no offsets file: the page mappings each collector recorded, one per window)
must keep p99 <= 1 µs and >= 99 % within the bound, as the offsets do.

Prints the figures. Needs root (network namespaces). Exit 0 pass, 1 fail, 77
skip (not root): under CI (env CI set) a skip is a failure.

  sudo tests/integration/collector_e2e.py --build build [--keep DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools", "testbed"))
sys.path.insert(0, HERE)

import testbed as tbm  # noqa: E402
import trace_truth as tt  # noqa: E402
import trace_workload as tw  # noqa: E402
from trace_alignment_e2e import (NODES, check, offsets_rows, run, skip, start_agents,  # noqa: E402
                                 stop_agents, summarize, wait_for_instants)

RUN = "2026_11_25_12_00_00"
GPUS = 2


def sim_settings(node: int) -> str:
    """Each node's simulated GPUs: their own seed, so their own rates and drifts."""
    return (f"devices={GPUS},seed={node * 7919},rate_hz=100000000,rate_error_ppm={20 * node - 50},"
            "drift_ppm_per_s=0.05,jitter_ns=300,slow_read_prob=0.02,slow_read_ns=80000,"
            "kernel_interval_us=2000,kernel_us=150,streams=2")


def start_collectors(tb, a, out, clocks, seconds):
    procs = {}
    for n, c in clocks.items():
        argv = [a.collect, "run", "--backend", "simulated", "--backend-settings", sim_settings(n),
                "--test-mode", *c.agent_args(), "--node-id", n, "--host", f"node{n}",
                "--sample-period-ms", 50, "--logdir", os.path.join(out, "gpu"), "--run", RUN,
                "--duration-s", seconds, "--checkpoint-s", 0,
                "--truth", os.path.join(out, f"truth{n}.jsonl"),
                "--status-json", os.path.join(out, f"collect{n}.json")]
        log = open(os.path.join(out, f"collect{n}.log"), "w")
        procs[n] = tb.popen(n, [str(x) for x in argv], stdout=log, stderr=log)
    return procs


def wait_collectors(procs, timeout_s, failures):
    deadline = time.monotonic() + timeout_s
    for n, p in procs.items():
        try:
            rc = p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            rc = "timeout"
        check(rc == 0, f"collector on node {n} exited 0 ({rc})", failures)


def compare(pb, out, clocks, failures, aligned="aligned", name="GPU events (simulated, 2 per node)",
            p99_limit_ns=1000.0):
    errs, before, unknown = [], [], 0
    for n in clocks:
        g = tt.gpu_errors(pb, os.path.join(out, f"truth{n}.jsonl"),
                          os.path.join(out, "gpu", "plugins", "profile", RUN, f"node{n}.xplane.pb"),
                          os.path.join(out, aligned, "plugins", "profile", RUN, f"node{n}.xplane.pb"))
        check(g["recorded"] >= 100, f"node {n}: the collector wrote GPU events ({g['recorded']})", failures)
        check(g["aligned"] == g["recorded"],
              f"node {n}: every GPU event is in the aligned file ({g['aligned']}/{g['recorded']})", failures)
        errs += g["errors"]
        before += g["before"]
        unknown += g["unknown"]
    check(unknown == 0, f"every aligned GPU event has a truth record ({unknown} without)", failures)
    if before and aligned == "aligned":
        before.sort()
        print(f"  before alignment: GPU event |host time - true| p50 {before[len(before) // 2] / 1e6:.3f} ms")
    return summarize(name, errs, failures, p99_limit_ns=p99_limit_ns)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--keep", default=None, help="keep outputs in this directory")
    p.add_argument("--seconds", type=float, default=12)
    a = p.parse_args(argv)
    a.agent = os.path.join(a.build, "agent", "chronolink-agent")
    a.trace = os.path.join(a.build, "tools", "chronolink-trace")
    a.collect = os.path.join(a.build, "collector", "chronolink-collect")
    if os.geteuid() != 0:
        return skip("needs root for network namespaces")
    for b in (a.agent, a.trace, a.collect):
        if not os.access(b, os.X_OK):
            print(f"FAIL: {b} not built")
            return 1
    out = a.keep or tempfile.mkdtemp(prefix="chronolink-collector-e2e-")
    os.makedirs(out, exist_ok=True)
    os.chmod(out, 0o755)  # the agents write below it as `nobody`
    failures: list[str] = []
    clocks = tw.default_clocks(NODES, time.clock_gettime_ns(time.CLOCK_REALTIME))
    print(f"GPU collector end to end: {NODES} nodes x {GPUS} simulated GPUs, outputs in {out}")
    for n, c in clocks.items():
        print(f"  node {n}: host offset {c.offset_ns / 1e6:+.1f} ms, drift {c.drift_ppm:+.0f} ppm; GPUs {sim_settings(n)}")

    with tbm.Testbed(f"clc{os.getpid() % 10000}", nodes=NODES, topology="routed") as tb:
        agents = start_agents(tb, a, out, clocks)
        try:
            wait_for_instants(out, agents, 3, timeout_s=60)
            collectors = start_collectors(tb, a, out, clocks, a.seconds)
            wait_collectors(collectors, a.seconds + 60, failures)
            wait_for_instants(out, agents, len({r["t_ns"] for r in offsets_rows(out)}) + 3, timeout_s=30)
        finally:
            stop_agents(agents)

    for n in clocks:
        st_path = os.path.join(out, f"collect{n}.json")
        if os.path.exists(st_path):
            st = json.load(open(st_path))
            check(st.get("clock_page") == "ok", f"node {n}: the collector read its agent's clock page "
                  f"({st.get('clock_page')})", failures)
            # The agents ran throughout: their pages must never have gone stale between solves.
            check(st.get("clock_page_lapses") == 0, f"node {n}: the clock page never lapsed while its agent ran "
                  f"({st.get('clock_page_lapses')} lapses)", failures)
            # One mapping per window the collector ran (1 s windows).
            check(st.get("clock_page_mappings", 0) >= a.seconds / 2,
                  f"node {n}: the collector recorded a page mapping per window "
                  f"({st.get('clock_page_mappings')} in {a.seconds:.0f} s)", failures)
        # The page trails by the solve's lag: the collector waits for a mapping
        # of the run's stop, so that the recorded path interpolates its end.
        with open(os.path.join(out, f"collect{n}.log")) as f:
            check("the run's end is mapped" in f.read(),
                  f"node {n}: the collector waited until its page mapped the run's stop", failures)
    offsets = [pth for pth in (os.path.join(out, f"node{i}", "offsets.jsonl") for i in range(1, NODES + 1))
               if os.path.exists(pth) and os.path.getsize(pth) > 0]
    hosts = []
    for n in clocks:
        hosts += ["--host", f"{n}=node{n}"]
    cp = run([a.trace, "align", os.path.join(out, "gpu"), "--offsets", *offsets, *hosts, "--annotate-events",
              "--out", os.path.join(out, "aligned")])
    print(cp.stdout)
    check(cp.returncode == 0, f"align ran ({cp.stderr.strip()[:300]})", failures)
    pb = tt.load_xplane_module(out)
    figures = {"offsets": compare(pb, out, clocks, failures) if cp.returncode == 0 else {}}
    # Without offsets files: each host's own record of its clock page, one
    # mapping per window it saw, made into a correction as the offsets are.
    cp = run([a.trace, "align", os.path.join(out, "gpu"), "--recorded-mapping", "--annotate-events",
              "--out", os.path.join(out, "aligned-recorded")])
    print(cp.stdout)
    check(cp.returncode == 0, f"align --recorded-mapping ran ({cp.stderr.strip()[:300]})", failures)
    if cp.returncode == 0:
        figures["recorded_mapping"] = compare(pb, out, clocks, failures, aligned="aligned-recorded",
                                              name="GPU events, recorded clock page mappings")
    with open(os.path.join(out, "e2e.json"), "w") as f:
        json.dump(figures, f, indent=1)
    print("PASS" if not failures else f"FAIL: {len(failures)} check(s)")
    return 0 if not failures else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (tbm.TestbedError, RuntimeError, AssertionError) as e:
        print(f"FAIL: {e}")
        sys.exit(1)
