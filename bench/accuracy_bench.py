#!/usr/bin/env python3
"""chronolink accuracy benchmark: chronolink next to chronyd and ptp4l,
on the same test-bed paths, at the same time.

Scenarios (each --seconds long, default 60, after a warm-up):
  direct-idle    two namespaces joined by one veth pair
  routed-idle    two nodes through a router namespace, tbf 200mbit/32kbit/20ms
                 on the router's egress veths
  routed-50pct   as routed-idle, iperf3 UDP 100 Mbit/s in both directions
  routed-90pct   as routed-idle, iperf3 UDP 180 Mbit/s in both directions

In each: two chronolink agents (node 1: offset 0, drift 0; node 2: by
default +3.7 ms, +45 ppm) probe each other with --estimate-sources
kernel,userspace, while chronyd (interleaved, per sample) and ptp4l (per
Sync) run between the same two namespaces. The nodes' clocks are test-only
clocks with exact truth (--clock-model; docs/testbed.md §5b): by default
wandering crystals that a real chronyd disciplines, on which the agents
and the baseline daemons (through the discipline shim) all stamp, so every
method is compared with the same true offset between the two clocks. On
linear clocks, which only the agents apply, the daemons run on the kernel
clock every namespace shares and their true offset is 0.

chronyd has two rows: its raw samples (measurements.log) and its own
filtered estimate of the server (statistics.log's "Est offset", one per
accumulated sample; bench/baselines.py says why the client stays noselect).

Prints one table (|error| in µs: samples, p50, p99, max; baselines' p99
divided by chronolink-kernel's p99), then per-agent CPU per probed edge and
probe bytes/s per edge (in the loaded scenarios with the cross traffic on
its own CPU, --load-cpu: this kernel charges a softirq to the task it
interrupts), the daemons' CPU over the same span (chronyd server
and client, ptp4l master and slave), and per scenario one "accuracy per
CPU" line (p99 next to the CPU of both ends of the link). Writes everything, including every window's error,
to OUT/results.json.

  sudo python3 bench/accuracy_bench.py [--agent-bin build/agent/chronolink-agent]
        [--seconds 60 | --quick] [--scenarios direct-idle,routed-90pct] [--out DIR]
  python3 bench/accuracy_bench.py --selftest      # ground-truth and percentile checks, no root
  python3 bench/accuracy_bench.py --report OUT    # the summary of an earlier run again, no root
  sudo python3 bench/accuracy_bench.py --skip-agent --quick   # baselines only
  sudo python3 bench/accuracy_bench.py --scenarios routed-90pct --stamp-logs --out DIR
        # every 2-node scenario's summary then also gives its path's floor
        # asymmetry; python3 bench/path_floor.py DIR/routed-90pct gives the rest
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as _dt
import decimal
import json
import math
import os
import random
import re
import secrets
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from typing import Any, Iterable, Sequence

_HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(_HERE)
sys.path.insert(0, _HERE)
sys.path.insert(0, os.path.join(REPO, "tools", "testbed"))
import baselines as bl  # noqa: E402
import clock_discipline  # noqa: E402
import node_clocks  # noqa: E402
import page_accuracy  # noqa: E402
import path_floor  # noqa: E402
import testbed as tbm  # noqa: E402
from baselines import CLK_TCK, percentile, proc_cpu_ticks, summarize_abs_us  # noqa: E402
from truth import (VClock, clock_quantum_ns, error_shape, format_error_shape,  # noqa: E402
                   FitClockTruth, fit_clock_truth, format_sigma_coverage, quantum_from_steps, sigma_coverage, true_alpha,
                   true_beta)
from truth import offset_rows  # noqa: E402
from truth import to_fraction as _frac  # noqa: E402

DEFAULT_AGENT = os.path.join(REPO, "build", "agent", "chronolink-agent")
AGENT_PORT = 7319
BASELINE_NTP_PORT = 11123    # the baseline chronyd's server, beside a discipline's on 123
TBF = {"rate": "200mbit", "burst": "32kbit", "latency": "20ms"}
PAYLOAD_BYTES = 144          # probe payload
PILOT_BYTES = 16             # pilot payload, sent ahead of each forward pair
UDP_IP_OVERHEAD = 28         # UDP (8) + IPv4 (20)


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    topology: str
    tbf: dict | None
    load: str | None   # iperf3 rate per direction


SCENARIOS = [
    Scenario("direct-idle", "direct", None, None),
    Scenario("routed-idle", "routed", TBF, None),
    Scenario("routed-50pct", "routed", TBF, "100M"),
    Scenario("routed-90pct", "routed", TBF, "180M"),
]


# --------------------------------------------------------------------------
# edges.jsonl -> per-window errors

def read_edges(path: str) -> tuple[list[dict], list[str]]:
    """Records of an agent's edges.jsonl; numbers parsed exactly (int / Decimal).
    Returns (records, problems)."""
    recs, problems = [], []
    try:
        f = open(path)
    except OSError as e:
        return [], [f"{path}: {e}"]
    with f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line, parse_float=decimal.Decimal)
            except ValueError as e:
                problems.append(f"{path}:{n}: bad JSON ({e})")  # e.g. a torn last line
                continue
            if not isinstance(r, dict) or r.get("schema") != "chronolink.edge.v1":
                continue
            recs.append(r)
    return recs, problems


def window_errors(records: Iterable[dict], clocks: dict[int, VClock], *,
                  since_ns: int | None = None, until_ns: int | None = None) -> tuple[list[dict], dict]:
    """One dict per estimated window (estimator != "none") with its error.

    since/until (shared-clock ns) keep windows lying wholly inside the span.
    Returns (errors, counts of skipped records by reason)."""
    out: list[dict] = []
    skipped: dict[str, int] = {}

    def skip(why: str) -> None:
        skipped[why] = skipped.get(why, 0) + 1

    for r in records:
        if r.get("estimator", "none") == "none":
            skip("estimator none")
            continue
        try:
            node, peer = int(r["node"]), int(r["peer"])
            own, other = clocks[node], clocks[peer]
            x0 = r["x0_ns"]
            beta = r["beta_ns"]
        except (KeyError, TypeError, ValueError):
            skip("missing field or unknown node")
            continue
        if not isinstance(x0, int):
            skip("x0_ns not an integer")
            continue
        if beta is None:
            skip("beta_ns null")
            continue
        if since_ns is not None or until_ns is not None:
            try:
                ws = own.true_time(int(r["window_start_ns"]))
                we = own.true_time(int(r["window_end_ns"]))
            except (KeyError, TypeError, ValueError):
                ws = we = own.true_time(x0)
            if since_ns is not None and ws < since_ns:
                skip("outside measurement span")
                continue
            if until_ns is not None and we > until_ns:
                skip("outside measurement span")
                continue
        tb = true_beta(x0, own, other)
        ta = true_alpha(own, other, own.true_time(x0))
        err = _frac(beta) - tb
        e: dict[str, Any] = {
            "node": node, "peer": peer,
            "source": str(r.get("timestamp_source", "unknown")),
            "estimator": str(r.get("estimator")),
            "window_start_ns": r.get("window_start_ns"), "window_end_ns": r.get("window_end_ns"),
            "x0_ns": x0, "beta_ns": float(beta), "true_beta_ns": float(tb), "error_ns": float(err),
        }
        if r.get("alpha") is not None:
            e["alpha"] = float(r["alpha"])
            e["true_alpha"] = float(ta)
            e["alpha_error_ppb"] = float((_frac(r["alpha"]) - ta) * 10**9)
        if r.get("sigma_ns") is not None:
            e["sigma_ns"] = float(r["sigma_ns"])
        if r.get("uncertainty_ns") is not None:
            e["uncertainty_ns"] = float(r["uncertainty_ns"])
            e["within_uncertainty"] = abs(float(err)) <= float(r["uncertainty_ns"])
        for k in ("pairs_sent", "tuples_in_class", "pure_forward", "pure_reverse", "tx_ts_missing", "lost"):
            if k in r:
                e[k] = r[k] if isinstance(r[k], int) else float(r[k])
        out.append(e)
    return out, skipped


# --------------------------------------------------------------------------
# agent process accounting (CPU ticks: baselines.proc_cpu_ticks)

_COUNTER_KEYS = {
    "tx_bytes": re.compile(r"\b(?:probe_)?(?:tx|sent)_bytes\"?\s*[=:]\s*(\d+)"),
    "rx_bytes": re.compile(r"\b(?:probe_)?(?:rx|recv|received)_bytes\"?\s*[=:]\s*(\d+)"),
    "pairs_sent": re.compile(r"\bpairs_sent\"?\s*[=:]\s*(\d+)"),
}


def agent_log_counters(path: str) -> dict:
    """Counters the agent prints on exit (last value of each key found)."""
    try:
        text = open(path, errors="replace").read()
    except OSError:
        return {}
    out = {}
    for k, rx in _COUNTER_KEYS.items():
        m = rx.findall(text)
        if m:
            out[k] = int(m[-1])
    return out


def read_agent_stats(path: str) -> dict:
    """The agent's agent_stats.json (schema chronolink.agent_stats.v1), or {}."""
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError):
        return {}
    return d if isinstance(d, dict) else {}


def probe_bytes_per_edge(counters: dict, windows: list[dict], wall_s: float, edges: int,
                         probe_interval_us: float, stats: dict | None = None) -> tuple[float, str]:
    """Probe bytes/s on the wire (payload + UDP/IPv4) per probed edge, both
    directions of the exchange (forward Pt pairs and the reverse Pr pairs
    that answer them), and where the figure comes from.

    Two agents probing each other: what one agent sends plus what it receives
    is the traffic of two directed edges, hence the division by 2."""
    per_pkt = PAYLOAD_BYTES + UDP_IP_OVERHEAD
    peers = (stats or {}).get("peers")
    up = (stats or {}).get("uptime_s")
    if isinstance(peers, dict) and peers and isinstance(up, (int, float)) and up > 0:
        tot = 0.0
        for pc in peers.values():
            # Pilots are counted apart, and only by their sender (the receiver's
            # socket filter drops them unread): the two agents probe each other
            # alike, so what one receives is what the other sends.
            pilots = 2 * pc.get("pilots_sent", 0)
            tot += (pc.get("bytes_sent", 0) + pc.get("bytes_received", 0)
                    + UDP_IP_OVERHEAD * (pc.get("packets_sent", 0) + pc.get("packets_received", 0))
                    + (PILOT_BYTES + UDP_IP_OVERHEAD) * pilots)
        return tot / up / 2 / len(peers), "agent_stats.json (sent+received)/2, whole run"
    if counters.get("tx_bytes") and wall_s > 0:
        b = counters["tx_bytes"] + counters.get("rx_bytes", counters["tx_bytes"])
        return b / wall_s / max(1, edges) / 2, "agent exit counters (tx+rx)/2"
    # pairs_sent per window: rate = pairs / window time, per source class
    # (the kernel and userspace windows describe the same probes: take one)
    best = 0.0
    for src in {w["source"] for w in windows}:
        pairs = dur = 0.0
        for w in windows:
            if w["source"] != src or not isinstance(w.get("pairs_sent"), (int, float)):
                continue
            try:
                d = (int(w["window_end_ns"]) - int(w["window_start_ns"])) / 1e9
            except (KeyError, TypeError, ValueError):
                continue
            if d > 0:
                pairs += w["pairs_sent"]
                dur += d
        if dur > 0:
            best = max(best, pairs / dur)
    if best > 0:
        # pairs and durations were summed over all edges' windows: a per-edge rate
        return best * 4 * per_pkt, "edges.jsonl pairs_sent"
    if probe_interval_us > 0:
        return 1e6 / probe_interval_us * 4 * per_pkt, f"cadence estimate (1 pair / {probe_interval_us:g} µs)"
    return math.nan, "unknown"


# --------------------------------------------------------------------------
# one scenario

class AgentMissing(RuntimeError):
    pass


def _write_cluster(tb: tbm.Testbed, path: str, cluster_id: int) -> None:
    with open(path, "w") as f:
        json.dump({"cluster_id": cluster_id,
                   "nodes": [{"id": n.index, "address": n.address, "port": AGENT_PORT} for n in tb.nodes]},
                  f, indent=2)


def _write_key(path: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")


def cpu_split(load_cpu: str, ncpu: int | None = None) -> tuple[list[int] | None, list[int] | None]:
    """(the cross traffic's CPUs, the agents' CPUs) for --load-cpu.

    This VM's kernel (like any without CONFIG_IRQ_TIME_ACCOUNTING) charges a
    softirq to whichever task it interrupts: beside iperf3's 2 x 180 Mbit/s the
    agents' /proc figures included the load's packets (1.2 % of a core per
    edge at 90 % load, 0.8 % with the load on its own CPU; 0.75 % idle). So by
    default the load runs on the last CPU and the agents on the others;
    'none' leaves every process free (as every figure before 2026-12-04)."""
    ncpu = ncpu or os.cpu_count() or 1
    if load_cpu == "none":
        return None, None
    if load_cpu != "auto" and not load_cpu.isdigit():
        raise ValueError(f"--load-cpu {load_cpu!r}: give auto, none or a CPU number")
    cpu = ncpu - 1 if load_cpu == "auto" else int(load_cpu)
    if ncpu < 2:
        return None, None  # nowhere else to put it
    if not 0 <= cpu < ncpu:
        raise ValueError(f"--load-cpu {cpu}: this machine has CPUs 0..{ncpu - 1}")
    return [cpu], [c for c in range(ncpu) if c != cpu]


def run_scenario(sc: Scenario, a: argparse.Namespace, outdir: str, log=print) -> dict:
    res: dict[str, Any] = {"scenario": sc.name, "topology": sc.topology, "tbf": sc.tbf, "load": sc.load,
                           "seconds": a.seconds, "methods": {}, "agents": {}, "cross_traffic": []}
    os.makedirs(outdir, exist_ok=True)
    t0_ns = time.time_ns()
    # drift as typed: exact for the agent's parser
    node_clock = {n: node_clocks.make_node_clock(
        a.clock_model, n, off, drift, t0_ns, state_dir=outdir,
        duration_s=a.warmup_s + a.seconds + 600, white_fm_adev=a.white_fm_adev,
        random_walk_fm_adev=a.random_walk_fm_adev, seed=a.clock_seed + n - 1)
        for n, off, drift in ((1, 0, "0"), (2, a.node2_offset_ns, str(a.node2_drift_ppm)))}
    res["virtual_clocks"] = {str(n): c.describe() for n, c in node_clock.items()}
    agents: dict[int, dict] = {}
    with tbm.Testbed(f"{a.name}", nodes=2, topology=sc.topology, tbf=sc.tbf) as tb, \
            contextlib.ExitStack() as stack:
        if a.clock_model in node_clocks.DISCIPLINED:
            log(f"  starting {a.clock_model} on every node (it disciplines the node clocks)")
            stack.enter_context(clock_discipline.ClockDiscipline(
                tb, 1, {n: c.state_file for n, c in node_clock.items()}, os.path.join(outdir, "discipline"),
                client=a.clock_model))
        load_cpus, agent_cpus = cpu_split(a.load_cpu) if sc.load else (None, None)
        res["agent_cpus"] = agent_cpus
        if sc.load:
            for s, d in ((1, 2), (2, 1)):
                ct = stack.enter_context(tb.cross_traffic(s, d, sc.load, cpus=load_cpus))
                res["cross_traffic"].append(ct)
        baselines: list[Any] = []
        if not a.no_baselines:
            # On the nodes' own clocks (every model but linear, whose clocks
            # only the agent applies) the daemons stamp on them too, through
            # the shim (bench/baselines.py); the discipline's server has 123.
            states = {n: c.state_file for n, c in node_clock.items() if c.state_file}
            for kind in ("chrony", "ptp"):
                label = "chronyd xleave per-sample" if kind == "chrony" else "ptp4l per-Sync"
                try:
                    if kind == "chrony":
                        b = bl.ChronyBaseline(tb, 1, 2, os.path.join(outdir, "chrony"), clock_states=states,
                                              ntp_port=BASELINE_NTP_PORT if states else 123)
                    else:
                        b = bl.PtpBaseline(tb, 1, 2, os.path.join(outdir, "ptp"), clock_states=states)
                    b.start()
                    baselines.append((label, b))
                except (bl.BaselineError, tbm.TestbedError, OSError) as e:
                    res["methods"][label] = {"error": str(e)}
                    log(f"  {label}: failed: {e}")
        if not a.skip_agent:
            cluster = os.path.join(outdir, "cluster.json")
            key = os.path.join(outdir, "cluster.key")
            _write_cluster(tb, cluster, a.cluster_id)
            _write_key(key)
            for n in tb.nodes:
                c = node_clock[n.index]
                adir = os.path.join(outdir, f"agent-n{n.index}")
                os.makedirs(adir, exist_ok=True)
                argv = [a.agent_bin, "--node-id", str(n.index), "--cluster-file", cluster,
                        "--key-file", key, "--output-dir", adir,
                        "--peers", ",".join(str(m.index) for m in tb.nodes if m.index != n.index),
                        "--window-s", str(a.window_s), "--estimate-sources", "kernel,userspace",
                        "--reference", "1",  # the leader's offsets against node 1 (solved coverage)
                        "--duration-s", str(int(a.warmup_s + a.seconds + 60)),
                        "--log-level", a.log_level, "--test-mode"] + c.agent_args + a.agent_arg
                if a.stamp_logs:  # every probe's stamps, for bench/path_floor.py
                    argv += ["--stamp-log", os.path.join(adir, "stamps.jsonl")]
                # beside the output directory, not in it: started as root the agent
                # hands that directory to its unprivileged user, and only if it holds
                # nothing but the agent's own files (docs/deployment.md)
                alog = os.path.join(outdir, f"agent-n{n.index}.log")
                logf = open(alog, "wb")
                stack.callback(logf.close)
                # settings come only from this command line, not from CHRONOLINK_* variables
                env = {k: v for k, v in os.environ.items() if not k.startswith("CHRONOLINK_")}
                pin = ["taskset", "-c", ",".join(map(str, agent_cpus))] if agent_cpus else []
                p = tb.popen(n.index, pin + argv, stdout=logf, stderr=subprocess.STDOUT, env=env)
                agents[n.index] = {"proc": p, "dir": adir, "argv": argv, "spawn_mono": time.monotonic(),
                                   "log": alog}
            time.sleep(0.5)
            for i, ag in agents.items():
                if ag["proc"].poll() is not None:
                    raise RuntimeError(f"agent on node {i} exited at once (rc={ag['proc'].returncode}): "
                                       f"{bl._tail(ag['log'], 800)}")
        # warm-up, then the measured span
        time.sleep(a.warmup_s)
        # Node 2's clock page as a profiler there reads it (the agents' default path).
        page_sampler = page_accuracy.PageSampler("/dev/shm/chronolink-2").start() if not a.skip_agent else None
        span_t0 = time.time_ns()
        m0 = time.monotonic()
        ticks0 = {i: proc_cpu_ticks(ag["proc"].pid) for i, ag in agents.items()}
        bticks0 = [b.cpu_ticks() for _, b in baselines]
        end = m0 + a.seconds
        while time.monotonic() < end:
            time.sleep(min(1.0, max(0.0, end - time.monotonic())))
            for i, ag in agents.items():
                if ag["proc"].poll() is not None and "died" not in ag:
                    ag["died"] = f"exited early with status {ag['proc'].returncode}"
                    log(f"  agent node {i} {ag['died']}")
        span_t1 = time.time_ns()
        if page_sampler:
            page_sampler.stop()
        wall = time.monotonic() - m0
        ticks1 = {i: proc_cpu_ticks(ag["proc"].pid) for i, ag in agents.items()}
        bticks1 = [b.cpu_ticks() for _, b in baselines]
        # stop: agents first (they print counters on exit), then baselines
        tb.terminate([ag["proc"] for ag in agents.values()], timeout=10.0)
        for _, b in baselines:
            b.stop()
        for ct in res["cross_traffic"]:
            ct.stop()
        res["cross_traffic"] = [ct.result for ct in res["cross_traffic"]]
        if res["cross_traffic"]:
            log("  cross traffic achieved: " + format_load(res["cross_traffic"]))
    res["span_ns"] = [span_t0, span_t1]
    res["wall_s"] = wall

    # The truth, read now: a discipline's corrections are all in the state files.
    clocks = {n: c.truth() for n, c in node_clock.items()}

    # ---- baselines
    baseline_results(res, baselines, span_t0, span_t1, bticks0, bticks1, wall)

    # ---- agents
    all_windows: list[dict] = []
    edges_read = {i: read_edges(os.path.join(ag["dir"], "edges.jsonl")) for i, ag in agents.items()}
    # Each agent's edges are on the fit clocks (its own and its peers'),
    # the solved offsets on REALTIME.
    fit_clocks = {n: fit_clock_truth(edges_read[n][0] if n in edges_read else [], clocks[n],
                                     node_clock[n].raw_truth()) for n in clocks}
    for i, ag in agents.items():
        recs, problems = edges_read[i]
        wins, skipped = window_errors(recs, fit_clocks, since_ns=span_t0, until_ns=span_t1)
        all_windows += wins
        edges = len({r.get("peer") for r in recs}) or (len(agents) - 1)
        cpu = None
        if ticks0.get(i) is not None and ticks1.get(i) is not None and wall > 0:
            cpu = (ticks1[i] - ticks0[i]) / CLK_TCK / wall * 100.0
        counters = agent_log_counters(ag["log"])
        stats = read_agent_stats(os.path.join(ag["dir"], "agent_stats.json"))
        bps, bps_src = probe_bytes_per_edge(counters, wins, wall, edges, a.probe_interval_us, stats)
        res["agents"][str(i)] = {
            "argv": ag["argv"], "records": len(recs), "windows_in_span": len(wins),
            "skipped": skipped, "problems": problems[:20], "edges": edges,
            "cpu_pct_of_core": cpu, "cpu_pct_per_edge": (cpu / edges) if cpu is not None else None,
            "probe_bytes_per_s_per_edge": bps, "probe_bytes_source": bps_src,
            "log_counters": counters, "agent_stats": stats, "died": ag.get("died"), "returncode": ag["proc"].returncode,
        }
        state = node_clock[i].state_file if i in node_clock else None
        if state:
            res["agents"][str(i)]["timebase"] = timebase_errors(os.path.join(ag["dir"], "timebase.jsonl"), state,
                                                                span_t0, span_t1)
    if agents:
        sources = sorted({w["source"] for w in all_windows},
                         key=lambda s: ({"kernel": 0, "userspace": 1}.get(s, 2), s))
        for s in sources or ["kernel", "userspace"]:
            errs = [w["error_ns"] for w in all_windows if w["source"] == s]
            entry = {"summary": summarize_abs_us(errs)}
            if not errs:
                entry["error"] = "no estimated windows in the measured span"
            res["methods"][f"chronolink {s}"] = entry
        res["windows"] = all_windows
        if page_sampler:
            # The agents' default solution lifetime: the solve's lag (half the
            # longest fit span of three windows, the 0.3 s grace, the 1 s solve
            # delay) and five windows (docs/formats.md "valid_until_ns").
            lifetime = int((1.5 * a.window_s + 1.3 + 5 * a.window_s) * 1e9) if not a.agent_arg else None
            pe = page_accuracy.page_errors(page_sampler.reads, clocks[2], clocks[1], span_t0, span_t1, lifetime)
            res["page"] = dict(pe, summary=summarize_abs_us(pe.pop("abs_errors_ns")),
                               reference_summary=summarize_abs_us(pe.pop("reference_abs_ns")),
                               rest_summary=summarize_abs_us(pe.pop("rest_abs_ns")),
                               rest_followed_summary=summarize_abs_us(pe.pop("rest_followed_abs_ns")),
                               unreadable=page_sampler.unreadable)
        leader_dir = agents[min(agents)]["dir"]
        res["solved"] = solved_errors(os.path.join(leader_dir, "offsets.jsonl"), clocks, span_t0, span_t1)
        if a.clock_model != "linear":
            # Each agent's own timebase.jsonl, and the leader's copy of them all.
            res["trace"] = trace_between_instants(
                os.path.join(leader_dir, "offsets.jsonl"),
                {"timebase": [os.path.join(ag["dir"], "timebase.jsonl") for ag in agents.values()],
                 "cluster timebase": [os.path.join(leader_dir, "cluster-timebase.jsonl")]},
                clocks, span_t0, span_t1, os.path.join(outdir, "trace-check"))
        if a.stamp_logs and sorted(agents) == [1, 2]:
            res["path_floor"] = path_floor_entry(outdir, fit_clocks, span_t0)
    return res


def path_floor_entry(scenario_dir: str, fit_clocks: dict, since_ns: int) -> dict:
    """The path's floor asymmetry over the measured span (bench/path_floor.py),
    the stamps mapped through the fit clocks the windows' errors were read
    on: how far the line through each direction's fastest packets stood off
    for the path's own reasons, which no estimator on those packets sees. A
    run's errors are read against it (docs/estimator.md §10, a rough path)."""
    try:
        logs = {n: path_floor.read_stamp_log(os.path.join(scenario_dir, f"agent-n{n}", "stamps.jsonl"))
                for n in (1, 2)}
        return path_floor.floor_summary(logs, fit_clocks, "socket_software", Fraction(since_ns))
    except (OSError, ValueError) as e:
        return {"error": str(e)}


def format_path_floor(results: list[dict]) -> str:
    """One line per scenario that recorded its path's floor (--stamp-logs, 2 nodes)."""
    lines = []
    for r in results:
        pf = r.get("path_floor")
        if not pf:
            continue
        if pf.get("error") or not pf.get("seconds"):
            lines.append(f"  {r.get('scenario')}: {pf.get('error') or 'no second with packets both ways'}")
            continue
        a = pf["asymmetry_ns"]
        lines.append(f"  {r.get('scenario')}: floor asymmetry per second p50 {a['p50']:.0f} / p90 {a['p90']:.0f} / "
                     f"p99 {a['p99']:.0f} / max {a['max']:.0f} ns over {pf['seconds']} s ({pf.get('source')} stamps)")
    if not lines:
        return ""
    return ("the path (bench/path_floor.py): half the difference of the two directions' fastest packet per second, "
            "true delays\n" + "\n".join(lines))


SETTLED_PAGE_AFTER_NS = 30 * 10**9


def settled_page_errors_ns(rows: list, after_ns: int) -> list[float]:
    """|error| of the page reads (results.json `page.rows`: true instant,
    ns since the page's reference, signed error, ...) from `after_ns` past the
    first read on."""
    if not rows:
        return []
    start = min(row[0] for row in rows)
    return [abs(row[2]) for row in rows if row[0] - start >= after_ns]


DEFAULT_TRACE_TOOL = os.path.join(REPO, "build", "tools", "chronolink-trace")


def trace_between_instants(offsets: str, timebases: dict[str, list[str]], clocks: dict, since_ns: int, until_ns: int,
                           workdir: str, events: int = 2000, seed: int = 7,
                           tool: str = DEFAULT_TRACE_TOOL) -> dict:
    """Node 2's events at random true instants of the measured span, as
    its REALTIME stamped them (a Kineto trace, ns exact), aligned by
    chronolink-trace onto node 1's clock with the leader's offsets: straight
    between solved instants, and following both clocks' discipline
    (--timebase, with each set of files in `timebases`, by label).
    |aligned - node 1's true REALTIME| per event, ns."""
    if not os.path.exists(tool):
        return {"error": f"{tool} is not built"}
    os.makedirs(workdir, exist_ok=True)
    # Between node 2's first and last solved instants (beyond them a trace is
    # extrapolated on the drift, which follows no discipline), within the span.
    solved = [e["t_ns"] for e in solved_errors(offsets, clocks, since_ns, until_ns) if e["node"] == 2]
    if len(solved) < 2:
        return {"error": "fewer than two solved instants of node 2 in the span"}
    lo, hi = int(clocks[1].true_time(min(solved))) + 1, int(clocks[1].true_time(max(solved)))
    rng = random.Random(seed)
    instants = sorted(rng.randrange(lo, hi) for _ in range(events))
    stamps = [int(math.floor(clocks[2].at(t))) for t in instants]
    base = stamps[0] - stamps[0] % 1000
    trace = os.path.join(workdir, "node2.json")
    with open(trace, "w") as f:
        rows = ",".join(f'{{"ph":"X","name":"e{i}","pid":1,"tid":1,"ts":{(x - base) // 1000}.{(x - base) % 1000:03d},'
                        f'"dur":0.001}}' for i, x in enumerate(stamps))
        f.write(f'{{"baseTimeNanoseconds":{base},"traceEvents":[{rows}]}}')
    out: dict = {"events": events}
    variants = [("straight", [])] + [(label, ["--timebase", *files]) for label, files in timebases.items()]
    for label, extra in variants:
        dest = os.path.join(workdir, label.replace(" ", "-"))
        shutil.rmtree(dest, ignore_errors=True)
        # Every event placed, whatever its bound: this measures errors, not bounds.
        cmd = [tool, "align", trace, "--host", "2=node2", "--no-counters", "--max-bound-us", "1e6", "--out", dest,
               "--offsets", offsets, *extra]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            out[label] = {"error": (r.stderr or r.stdout).strip()[-400:]}
            continue
        with open(os.path.join(dest, "node2.json")) as f:
            doc = json.load(f, parse_float=decimal.Decimal)
        aligned_base = int(doc["baseTimeNanoseconds"])
        by_name = {e["name"]: e for e in doc["traceEvents"] if e.get("ph") == "X"}
        errors = []
        for i, t in enumerate(instants):
            e = by_name.get(f"e{i}")
            if e is None:
                continue
            aligned = aligned_base + _frac(e["ts"]) * 1000
            # The event's true instant: when node 2's clock read its (floored) stamp.
            errors.append(abs(float(aligned - clocks[1].at(clocks[2].true_time(stamps[i])))))
        errors.sort()
        out[label] = {"events": len(errors), "p50_ns": errors[len(errors) // 2] if errors else None,
                      "p99_ns": errors[min(len(errors) - 1, int(0.99 * len(errors)))] if errors else None,
                      "max_ns": errors[-1] if errors else None,
                      "stalled_set_aside": stalled_set_aside(r.stdout)}
    return out


def stalled_set_aside(align_stdout: str) -> int:
    """How many solved instants chronolink-trace set aside as a stalled
    agent's (its offsets line says so; docs/trace-correction.md)."""
    m = re.search(r"(\d+) solved instant\(s\) set aside", align_stdout)
    return int(m.group(1)) if m else 0


def _ns(v) -> str:
    return "-" if v is None else f"{v:.1f} ns"


def timebase_errors(path: str, state_file: str, since_ns: int | None = None, until_ns: int | None = None) -> dict:
    """How well the agent's timebase.jsonl (its REALTIME over its RAW, as
    knots) follows the node's clock, against the exact truth of its state
    file: at every knot of the span (true time) and halfway between
    consecutive ones (where a missed rate change would show), |recorded -
    true| REALTIME in ns."""
    from clock_trajectory import NodeClockState
    try:
        state = NodeClockState.load(state_file)
        with open(path) as f:
            knots = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        return {"error": str(e)}
    lo = -math.inf if since_ns is None else since_ns
    hi = math.inf if until_ns is None else until_ns
    knots = [k for k in knots if lo <= state.raw.true_time(k["raw_ns"]) <= hi]
    if not knots:
        return {"error": "no knots"}
    truth = state.realtime()
    errors = []

    def err(raw_ns, rt_ns) -> float:
        t = state.raw.true_time(raw_ns)
        return float(abs(Fraction(rt_ns) - truth.fine_at(t) / 10**15))

    for a, b in zip(knots, knots[1:]):
        errors.append(err(a["raw_ns"], a["realtime_ns"]))
        if b.get("after_step"):
            continue
        mid = (a["raw_ns"] + b["raw_ns"]) // 2
        rt = a["realtime_ns"] + (b["realtime_ns"] - a["realtime_ns"]) * (mid - a["raw_ns"]) // (b["raw_ns"] - a["raw_ns"])
        errors.append(err(mid, rt))
    errors.append(err(knots[-1]["raw_ns"], knots[-1]["realtime_ns"]))
    span_s = (knots[-1]["raw_ns"] - knots[0]["raw_ns"]) / 1e9
    errors.sort()
    return {"knots": len(knots), "span_s": span_s,
            "knots_per_min": len(knots) / span_s * 60 if span_s > 0 else None,
            "p99_abs_error_ns": errors[min(len(errors) - 1, int(0.99 * len(errors)))] if errors else None,
            "max_abs_error_ns": errors[-1] if errors else None}


def solved_errors(path: str, clocks: dict[int, VClock], since_ns: int, until_ns: int) -> list[dict]:
    """(error, one-sigma) of the leader's solved offsets against node 1 (the
    agents run with --reference 1), for instants inside the measured span;
    the last line of a (t_ns, node) wins (re-solves replace)."""
    latest: dict[tuple[int, int], dict] = {}
    try:
        with open(path) as f:
            for line in f:
                try:
                    r = json.loads(line, parse_float=decimal.Decimal)
                except ValueError:
                    continue  # a torn last line
                for row in offset_rows(r):  # rows or columns alike
                    latest[(row.get("t_ns"), row.get("node"))] = row
    except OSError:
        return []
    out = []
    for (t, node), r in sorted(latest.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        if not r.get("reachable") or r.get("reference") != 1 or node == 1 or node not in clocks:
            continue
        if r.get("offset_ns") is None or not isinstance(t, int):
            continue
        tt = clocks[1].true_time(t)
        if tt < since_ns or tt > until_ns:
            continue
        err = _frac(r["offset_ns"]) - true_beta(t, clocks[1], clocks[node])
        u = r.get("uncertainty_ns")
        out.append({"t_ns": t, "node": node, "error_ns": float(err), "sigma_ns": None if u is None else float(u)})
    return out


def baseline_results(res: dict, baselines: list[tuple[str, Any]], span_t0: int, span_t1: int,
                     ticks0: list[dict], ticks1: list[dict], wall: float) -> None:
    """The baselines' rows of res["methods"] over the span (chronyd: raw
    samples and its own filtered estimate), each sample's error against the
    true offset between the two nodes' clocks (0 on the kernel clock), and
    each daemon's CPU over the span in res["baseline_cpu"][name][role]."""
    res.setdefault("baseline_cpu", {})
    span = {"since_ns": span_t0, "until_ns": span_t1}
    for (label, b), k0, k1 in zip(baselines, ticks0, ticks1):
        cpu = {role: bl.cpu_percent(k0.get(role), k1.get(role), wall) for role in k0}
        res["baseline_cpu"][b.name] = cpu
        rows = b.samples(**span)  # a chronyd log is parsed once for both
        errs = b.errors_of(rows)
        entry = {"summary": summarize_abs_us(errs), "errors_ns": errs, "offsets_ns": [r["offset_ns"] for r in rows],
                 "workdir": b.workdir, "clocks": "nodes' own (shim)" if b.clock_states else "kernel"}
        if isinstance(b, bl.PtpBaseline):
            entry["poll_stats"] = dict(b.poll_stats)
        if not errs:
            entry["error"] = "no samples in the measured span"
        res["methods"][label] = entry
        if isinstance(b, bl.ChronyBaseline):
            entry["truth_motion_within_1s"] = b.truth_motion(**span)
            rows = b.filtered_samples(**span)
            fo = b.errors_of(rows)
            fe = {"summary": summarize_abs_us(fo), "errors_ns": fo, "offsets_ns": [r["offset_ns"] for r in rows],
                  "offset_sd_ns": [r["offset_sd_ns"] for r in rows], "source": "statistics.log Est offset",
                  "clocks": entry["clocks"]}
            if not fo:
                fe["error"] = "no statistics.log rows in the measured span"
            res["methods"][CHRONY_FILTERED] = fe


# --------------------------------------------------------------------------
# report

CHRONY_FILTERED = "chronyd xleave filtered"
METHOD_ORDER = ["chronolink kernel", "chronolink userspace", "chronyd xleave per-sample", CHRONY_FILTERED,
                "ptp4l per-Sync"]


format_load = tbm.format_cross_traffic  # soak.py and the table use it under this name


def _fmt(x: float, w: int = 9) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return f"{'-':>{w}}"
    return f"{x:>{w}.3f}" if x < 1000 else f"{x:>{w}.1f}"


def format_table(results: list[dict]) -> str:
    lines = []
    hdr = (f"{'scenario':<14} {'method':<26} {'samples':>7} {'p50 µs':>9} {'p99 µs':>9} {'max µs':>9} "
           f"{'p99/CL-kernel':>13}")
    lines += [hdr, "-" * len(hdr)]
    for r in results:
        meth = r["methods"]
        ref = meth.get("chronolink kernel", {}).get("summary", {}).get("p99_us")
        names = [m for m in METHOD_ORDER if m in meth] + sorted(m for m in meth if m not in METHOD_ORDER)
        if r.get("error"):
            lines.append(f"{r['scenario']:<14} failed: {r['error']}")
        for m in names:
            e = meth[m]
            if "error" in e and not e.get("summary", {}).get("samples"):
                lines.append(f"{r['scenario']:<14} {m:<26} failed: {e['error']}")
                continue
            s = e["summary"]
            ratio = ""
            if not m.startswith("chronolink") and ref and not math.isnan(ref) and ref > 0:
                ratio = f"{s['p99_us'] / ref:>12.1f}x"
            lines.append(f"{r['scenario']:<14} {m:<26} {s['samples']:>7} {_fmt(s['p50_us'])} "
                         f"{_fmt(s['p99_us'])} {_fmt(s['max_us'])} {ratio:>13}")
    return "\n".join(lines)


def format_costs(results: list[dict], quantum_ns: int | None = None) -> str:
    lines = []
    for r in results:
        if r.get("cross_traffic"):
            lines.append(f"{r['scenario']:<14} cross traffic: {format_load(r['cross_traffic'])}")
    for r in results:
        for node, ag in sorted(r.get("agents", {}).items()):
            cpu = ag.get("cpu_pct_per_edge")
            bps = ag.get("probe_bytes_per_s_per_edge")
            lines.append(f"{r['scenario']:<14} agent n{node}: edges {ag['edges']}, CPU "
                         f"{'-' if cpu is None else f'{cpu:.2f}'} % of a core per edge"
                         + (f" (on CPU {','.join(map(str, r['agent_cpus']))})" if r.get("agent_cpus") else "")
                         + ", probes "
                         f"{'-' if bps is None or math.isnan(bps) else f'{bps / 1e3:.1f}'} kB/s per edge "
                         f"({ag['probe_bytes_source']})" + (f"  [{ag['died']}]" if ag.get("died") else ""))
            mismatches = (ag.get("agent_stats") or {}).get("floor_candidate_mismatches")
            if mismatches is not None:  # the floors' fast path against every bound, each fit (estimator §4b)
                lines.append(f"{r['scenario']:<14} agent n{node}: floors' fast path fell back to the simple one "
                             f"{mismatches} times")
            tb = ag.get("timebase")
            if tb and "error" not in tb:
                rate = "" if tb["knots_per_min"] is None else f" ({tb['knots_per_min']:.1f}/min)"
                lines.append(f"{r['scenario']:<14} agent n{node}: timebase.jsonl {tb['knots']} knots{rate}, "
                             f"|REALTIME error| at knots and between them "
                             f"p99 {_ns(tb['p99_abs_error_ns'])}, max {_ns(tb['max_abs_error_ns'])}")
            elif tb:
                lines.append(f"{r['scenario']:<14} agent n{node}: timebase.jsonl: {tb['error']}")
    for r in results:
        pg = r.get("page")
        if pg and pg["reads"]:
            sm = pg["summary"]
            lines.append(f"{r['scenario']:<14} clock page of node 2 ({pg['reads']} reads every 37 ms, "
                         f"{pg['stale']} stale): |cluster - true| p50 {sm['p50_us'] * 1e3:.0f} ns, "
                         f"p99 {sm['p99_us'] * 1e3:.0f} ns, max {sm['max_us'] * 1e3:.0f} ns; "
                         f"{100 * pg['within_uncertainty']:.1f} % within its uncertainty")
            rs, rest = pg.get("reference_summary"), pg.get("rest_summary")
            if rs and rs["samples"]:
                lines.append(f"{r['scenario']:<14}   of which node 1's own discipline since the solved instant "
                             f"(no page can know it): p50 {rs['p50_us'] * 1e3:.0f} ns, p99 {rs['p99_us'] * 1e3:.0f} ns; "
                             f"the rest p50 {rest['p50_us'] * 1e3:.0f} ns, p99 {rest['p99_us'] * 1e3:.0f} ns")
            # The start's solutions are the worst a page extrapolates, and a
            # line through the last 30 s of them needs five instants first
            # (docs/leader.md "The page's drift"): the reads after it apart.
            settled = settled_page_errors_ns(pg.get("rows", []), SETTLED_PAGE_AFTER_NS)
            if settled:
                sm = summarize_abs_us(settled)
                lines.append(f"{r['scenario']:<14}   from {SETTLED_PAGE_AFTER_NS // 10**9} s after the span's start "
                             f"({sm['samples']} reads): p50 {sm['p50_us'] * 1e3:.0f} ns, "
                             f"p99 {sm['p99_us'] * 1e3:.0f} ns, max {sm['max_us'] * 1e3:.0f} ns")
            fol = pg.get("rest_followed_summary")
            if fol and fol["samples"]:
                lines.append(f"{r['scenario']:<14}   the rest where the page was republished within a second "
                             f"({fol['samples']} reads): p50 {fol['p50_us'] * 1e3:.0f} ns, "
                             f"p99 {fol['p99_us'] * 1e3:.0f} ns, max {fol['max_us'] * 1e3:.0f} ns")
        elif pg:
            lines.append(f"{r['scenario']:<14} clock page of node 2: no valid read in the span "
                         f"({pg['stale']} stale, {pg['unreadable']} unreadable)")
    for r in results:
        tr = r.get("trace")
        for label in ("straight", "timebase", "cluster timebase"):
            t = (tr or {}).get(label)
            if not t:
                continue
            if "error" in t:
                lines.append(f"{r['scenario']:<14} trace events between solved instants ({label}): {t['error']}")
                continue
            lines.append(f"{r['scenario']:<14} trace events between solved instants, {label} "
                         f"({t['events']} events of node 2 on node 1's clock): |aligned - true| p50 "
                         f"{_ns(t['p50_ns'])}, p99 {_ns(t['p99_ns'])}, max {_ns(t['max_ns'])}"
                         + (f"; {t['stalled_set_aside']} solved instant(s) set aside as a stalled agent's"
                            if t.get("stalled_set_aside") else ""))
    for r in results:
        for line in (format_purity(r.get("windows", [])), format_prober_bias(r.get("windows", []))):
            if line:
                lines.append(f"{r['scenario']:<14} {line}")
    for r in results:
        kernel = [w for w in r.get("windows", []) if w.get("source") == "kernel"]
        if kernel:
            cov = sigma_coverage([(w["error_ns"], w.get("sigma_ns")) for w in kernel])
            band = sigma_coverage([(w["error_ns"], w.get("uncertainty_ns")) for w in kernel])
            lines.append(f"{r['scenario']:<14} kernel windows: {format_sigma_coverage(cov)}")
            shape = error_shape([w["error_ns"] for w in kernel], quantum_ns)
            lines.append(f"{r['scenario']:<14}   (errors: {format_error_shape(shape, quantum_ns)})")
            if band:
                lines.append(f"{r['scenario']:<14}   (the fit's band as sigma: {format_sigma_coverage(band)})")
        solved = r.get("solved") or []
        if solved:
            cov = sigma_coverage([(e["error_ns"], e["sigma_ns"]) for e in solved])
            errs = sorted(abs(e["error_ns"]) for e in solved)
            # the mean signed error: what bias lasted the whole run (both
            # nodes' stamping and the path's asymmetry; docs/estimator.md §8)
            mean = sum(e["error_ns"] for e in solved) / len(solved)
            lines.append(f"{r['scenario']:<14} solved offsets (leader, against node 1): |error| p50 "
                         f"{percentile(errs, 50) / 1e3:.3f} us, p99 {percentile(errs, 99) / 1e3:.3f} us, "
                         f"mean signed {mean:+.1f} ns; {format_sigma_coverage(cov)}")
            shape = error_shape([e["error_ns"] for e in solved], quantum_ns)
            lines.append(f"{r['scenario']:<14}   (solved errors: {format_error_shape(shape, quantum_ns, 'instant')})")
    return "\n".join(lines)


def format_purity(windows: list[dict], source: str = "kernel") -> str:
    """Pure pairs per direction over one source's windows (both agents), and
    which estimator each window got: a window with too few pure pairs falls
    back to the min-delay filter. Pure pairs are counted over each fit's
    span (--fit-span-s), so they are a share of the tuples the fits took
    where the records say it (tuples_in_class), else of the pairs sent."""
    wins = [w for w in windows if w.get("source") == source]
    per_fit = all(isinstance(w.get("tuples_in_class"), (int, float)) for w in wins)
    sent = sum(w.get("tuples_in_class" if per_fit else "pairs_sent", 0) for w in wins)
    if not wins or sent <= 0:
        return ""
    fwd = sum(w.get("pure_forward", 0) for w in wins) / sent * 100
    rev = sum(w.get("pure_reverse", 0) for w in wins) / sent * 100
    kinds: dict[str, int] = {}
    for w in wins:
        kinds[w.get("estimator", "?")] = kinds.get(w.get("estimator", "?"), 0) + 1
    by_kind = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    return f"{source} windows: pure pairs forward {fwd:.1f} %, reverse {rev:.1f} %; {by_kind}"


def format_prober_bias(windows: list[dict], source: str = "kernel") -> str:
    """The mean signed error of each prober's windows. A path's asymmetry
    biases the two directed edges of a link oppositely; a bias of the same
    sign from both ends follows the packets' roles (forward pairs are
    pilot-warmed, reverse ones not), which the solve, averaging both
    directions, cancels."""
    by_node: dict[int, list[float]] = {}
    for w in windows:
        if w.get("source") == source:
            by_node.setdefault(int(w["node"]), []).append(float(w["error_ns"]))
    if not by_node:
        return ""
    means = ", ".join(f"node {n} {sum(e) / len(e):+.0f} ns" for n, e in sorted(by_node.items()))
    return f"{source} windows: mean signed error by prober: {means}"


def _both_ends(cpu: dict | None) -> float | None:
    vals = list((cpu or {}).values())
    return sum(vals) if vals and all(isinstance(v, (int, float)) for v in vals) else None


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def format_baseline_costs(results: list[dict]) -> str:
    """The daemons' CPU over the span (next to the agents' cost lines), and
    one accuracy-per-CPU line per scenario. CPU there is both ends of the
    link summed: the two agents (each probes the other), chronyd server +
    client, ptp4l master + slave (no phc2sys: software stamps on the one
    system clock, free running)."""
    lines = []
    for r in results:
        raw = (r.get("methods") or {}).get("chronyd xleave per-sample") or {}
        if raw.get("clocks") and raw["clocks"] != "kernel":
            m = raw.get("truth_motion_within_1s") or {}
            lines.append(f"{r['scenario']:<14} baselines on the nodes' own clocks (the discipline shim), against "
                         f"the true offset; chronyd's rows placed within their logged second: the truth moved "
                         f"{m.get('median_ns', float('nan')):.0f} ns in the median second, "
                         f"{m.get('max_ns', float('nan')):.0f} ns at most, so a row placed one spacing wrong errs "
                         f"by at most {m.get('placement_ns', float('nan')):.0f} ns")
        for name, cpu in sorted((r.get("baseline_cpu") or {}).items()):
            parts = ", ".join(f"{role} {_pct(c)} %" for role, c in cpu.items())
            lines.append(f"{r['scenario']:<14} {name}: CPU {parts} of a core (one edge; "
                         f"both ends {_pct(_both_ends(cpu))} %)")
    for r in results:
        line = format_accuracy_per_cpu(r)
        if line:
            lines.append(f"{r['scenario']:<14} {line}")
    return "\n".join(lines)


def format_accuracy_per_cpu(r: dict) -> str:
    """'accuracy per CPU: chronolink p99 X us at Y % of a core; chronyd
    filtered p99 X us at Y %; ...' (both ends of the link summed)."""
    meth = r.get("methods", {})

    def p99(m: str) -> float | None:
        s = meth.get(m, {}).get("summary", {})
        v = s.get("p99_us") if s.get("samples") else None
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else v

    agents = r.get("agents") or {}
    cl_cpu = _both_ends({k: a.get("cpu_pct_of_core") for k, a in agents.items()}) if agents else None
    bcpu = r.get("baseline_cpu") or {}
    parts = []
    for label, m, cpu in (("chronolink", "chronolink kernel", cl_cpu),
                          ("chronyd filtered", CHRONY_FILTERED, _both_ends(bcpu.get("chronyd"))),
                          ("chronyd raw", "chronyd xleave per-sample", _both_ends(bcpu.get("chronyd"))),
                          ("ptp4l", "ptp4l per-Sync", _both_ends(bcpu.get("ptp4l")))):
        v = p99(m)
        if v is None:
            continue
        parts.append(f"{label} p99 {v:.3f} us at {_pct(cpu)} %" + (" of a core" if not parts else ""))
    if len(parts) < 2:
        return ""
    return "accuracy per CPU: " + "; ".join(parts) + " (both ends of the link)"


def _jsonable(o: Any) -> Any:
    if isinstance(o, float) and (math.isnan(o) or math.isinf(o)):
        return None
    if isinstance(o, dict):
        return {str(k): _jsonable(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_jsonable(v) for v in o]
    if isinstance(o, (Fraction, decimal.Decimal)):
        return float(o)
    return o


# --------------------------------------------------------------------------
# self-test of the arithmetic (no root, no agent)

def selftest(verbose: bool = True) -> int:
    check = bl.SelfTestChecks(verbose)

    # where the load and the agents run (--load-cpu)
    check(cpu_split("auto", 2) == ([1], [0]) and cpu_split("auto", 4) == ([3], [0, 1, 2]),
          "--load-cpu auto: the load on the last CPU, the agents on the others")
    check(cpu_split("0", 2) == ([0], [1]) and cpu_split("none", 8) == (None, None)
          and cpu_split("auto", 1) == (None, None), "--load-cpu N, none, and one CPU")
    for bad in ("2", "x", "-1"):
        try:
            cpu_split(bad, 2)
            check(False, f"--load-cpu {bad} on 2 CPUs is refused")
        except ValueError:
            check(True, f"--load-cpu {bad} on 2 CPUs is refused")

    # percentiles (numpy 'linear' reference values)
    v = list(range(1, 101))
    check(percentile(v, 50) == 50.5, "p50 of 1..100 is 50.5")
    check(stalled_set_aside("offsets: offsets o.jsonl: reference node 1, 152 instants every 2.000 s over 302.0 s "
                            "from t_ns 1, 2 nodes; 13 solved instant(s) set aside as a stalled agent's (sigma over "
                            "8x the instants' around them): mapped as missed\n") == 13
          and stalled_set_aside("offsets: offsets o.jsonl: reference node 1, 2 nodes\n") == 0,
          "the set-aside count is read from align's offsets line")
    check(abs(percentile(v, 99) - 99.01) < 1e-9, "p99 of 1..100 is 99.01")
    check(percentile([7], 99) == 7 and math.isnan(percentile([], 50)), "p of 1 and 0 values")
    check(percentile([1, 2, 3, 4], 0) == 1 and percentile([1, 2, 3, 4], 100) == 4, "p0 / p100")
    s = summarize_abs_us([-3000, 1000, -2000])
    check(s["samples"] == 3 and s["p50_us"] == 2.0 and s["max_us"] == 3.0, "summarize_abs_us uses |x|")
    rows = [[10**9 + 10**9 * k, 0, (-1) ** k * 100 * k, 5, 0] for k in range(40)]
    check(settled_page_errors_ns(rows, 30 * 10**9) == [100 * k for k in range(30, 40)]
          and settled_page_errors_ns([], 30 * 10**9) == [], "page reads from 30 s after the first, as |error|")

    # the clock page as the header lays it out, mapped as ClockMapping::ToCluster does
    with tempfile.TemporaryDirectory() as pd:
        page = os.path.join(pd, "page")
        ref = 1_800_000_000_000_000_000

        def write_page(seq: int) -> None:
            with open(page, "wb") as f:
                f.write(struct.pack(page_accuracy.PAGE_FORMAT, page_accuracy.PAGE_MAGIC, 2, seq, 2, 1, ref, -5000,
                                    -45_000_000, 7, 100_000, ref + 10**10, 0, 0))
        write_page(4)
        p = page_accuracy.read_clock_page(page)
        check(p is not None and page_accuracy.to_cluster(p, ref + 10**9) == ref + 10**9 - 5000 - 45_000
              and page_accuracy.to_cluster(p, ref - 10**9) == ref - 10**9 - 5000 + 45_000
              and page_accuracy.uncertainty_at(p, ref - 10**9) == 7 + 100, "clock page read and mapped")
        write_page(5)
        check(page_accuracy.read_clock_page(page, attempts=3) is None, "a page mid-write (odd seq) is not read")

    # virtual clocks: inverse and the closed forms
    t0 = 1_795_000_000_123_456_789
    own = VClock.make(-1_250_000, "-12.5", t0 - 7_000_000_000)
    peer = VClock.make(3_700_000, 45, t0)
    for t in (t0, t0 + 59_999_999_937, t0 - 3_000_000_001):
        check(own.true_time(own.at(t)) == t, f"true_time(at(t)) == t at t0{t - t0:+d}")
    x0 = own.at(t0 + 10**10)
    tb_ = true_beta(x0, own, peer)
    t = own.true_time(x0)
    closed = (peer.offset_ns - own.offset_ns) + peer.rate * (t - peer.t0_ns) - own.rate * (t - own.t0_ns)
    check(tb_ == closed, "true beta matches the closed form (different t0s)")
    same0a, same0b = VClock.make(0, 0, t0), VClock.make(3_700_000, 45, t0)
    xx = 1_795_000_030_000_000_000
    tt = t0 + Fraction(xx - 0 - t0, 1)
    brief = (3_700_000 - 0) + Fraction(45, 10**6) * (tt - t0)
    check(true_beta(xx, same0a, same0b) == brief, "true beta matches the brief's formula")
    check(true_alpha(same0a, same0b) == Fraction(45, 10**6), "true alpha, own drift 0")
    check(true_alpha(own, peer) == (Fraction(45, 10**6) + Fraction(125, 10**7)) / (1 - Fraction(125, 10**7)),
          "true alpha, own drift -12.5 ppm")
    # float inputs are taken as the decimal typed
    check(VClock.make(0, 0.1, 0).drift_ppm == Fraction(1, 10), "float ppm 0.1 is exactly 1/10")
    # a fit clock over a RAW clock: its own inverse, its rate, and the
    # identity for an undisciplined clock anchored on itself
    anchor = {"raw_ns": t0 + 5_000_000, "realtime_ns": t0 + 77_000, "rate_fine": -12_345_678_901}
    fit = FitClockTruth(own, anchor)
    for t in (t0, t0 + 59_999_999_937):
        check(fit.true_time(fit.at(t)) == t, f"fit clock: true_time(at(t)) == t at t0{t - t0:+d}")
    check(fit.at(own.true_time(anchor["raw_ns"])) == anchor["realtime_ns"], "fit clock: F is realtime_ns at raw_ns")
    check(fit.rate_at(t0) == (1 + own.rate) * (1 + Fraction(-12_345_678_901, 10**15)) - 1, "fit clock: its rate")
    itself = FitClockTruth(peer, {"raw_ns": t0, "realtime_ns": t0, "rate_fine": 0})
    check(itself.at(t0 + 10**9) == peer.at(t0 + 10**9), "fit clock of an undisciplined clock anchored on itself")
    # two anchors: each keeps its stretch, F jumped back 20 ms at the second
    a1 = {"raw_ns": t0, "realtime_ns": t0, "rate_fine": 1_000_000_000_000}
    a2 = {"raw_ns": t0 + 10**10, "realtime_ns": t0 + 10**10 + 10_000_000 - 20_000_000, "rate_fine": 0}
    two = fit_clock_truth([{"fit_clock": a1}, {"fit_clock": a2}, {"fit_clock": a1}], peer, own)
    for t in (own.true_time(t0 + 5 * 10**9), own.true_time(t0 + 15 * 10**9)):
        check(two.true_time(two.at(t)) == t, f"two anchors: true_time(at(t)) == t at raw t0{float(own.at(t) - t0):+.0f}")
    check(two.at(own.true_time(t0 + 10**10)) == a2["realtime_ns"], "the second anchor from its raw_ns on")
    check(fit_clock_truth([{"x": 1}], peer, own) is peer, "no fit_clock in the records: REALTIME")
    check(isinstance(fit_clock_truth([{"fit_clock": anchor}], peer, own), FitClockTruth), "fit_clock in the records")

    # synthetic edges.jsonl: known injected errors must come back exactly
    rnd = random.Random(7)
    clocks = {1: VClock.make(0, 0, t0), 2: VClock.make(3_700_000, 45, t0)}
    tmpd = tempfile.mkdtemp(prefix="clbench-selftest-")
    path = os.path.join(tmpd, "edges.jsonl")
    injected: dict[tuple, float] = {}
    win = 2_000_000_000
    with open(path, "w") as f:
        for k in range(30):
            for node, peer_ in ((1, 2), (2, 1)):
                a_, b_ = clocks[node], clocks[peer_]
                t_start = t0 + 5 * 10**9 + k * win
                ws, we = a_.at(t_start), a_.at(t_start + win)
                ws_i, we_i = int(ws), int(we)
                x0_i = (ws_i + we_i) // 2
                tm = a_.true_time(x0_i)
                beta_true = b_.at(tm) - a_.at(tm)
                for src in ("kernel", "userspace"):
                    est = "none" if (k == 3 and src == "userspace") else "max_margin"
                    e = rnd.gauss(0, 150 if src == "kernel" else 4000)
                    beta = float(beta_true) + e
                    alpha = float(true_alpha(a_, b_)) + rnd.gauss(0, 1e-9)
                    rec = {"schema": "chronolink.edge.v1", "node": node, "peer": peer_,
                           "window_start_ns": ws_i, "window_end_ns": we_i, "x0_ns": x0_i,
                           "alpha": alpha, "beta_ns": beta, "uncertainty_ns": 500.0,
                           "timestamp_source": src, "estimator": est, "pairs_sent": 2000}
                    f.write(json.dumps(rec) + "\n")
                    if est != "none":
                        injected[(node, src, x0_i)] = beta - float(beta_true)
        f.write('{"schema":"chronolink.edge.v1","node":1,"peer":2,"x0_ns":1.5e18,"beta_ns":1,'
                '"estimator":"min_delay","timestamp_source":"kernel"}\n')
        f.write('{"schema":"chronolink.offset.v1","node":1}\n{"torn":\n')
    recs, problems = read_edges(path)
    check(len(recs) == 121 and len(problems) == 1, f"read_edges: 121 records, 1 torn line ({len(recs)}, "
                                                   f"{len(problems)})")
    wins, skipped = window_errors(recs, clocks)
    check(len(wins) == 118, f"118 estimated windows kept ({len(wins)})")
    check(skipped.get("estimator none") == 2 and skipped.get("x0_ns not an integer") == 1,
          f"skips: {skipped}")
    worst = max(abs(w["error_ns"] - injected[(w["node"], w["source"], w["x0_ns"])]) for w in wins)
    check(worst < 1e-6, f"recovered injected errors exactly (worst diff {worst:.2e} ns)")
    check(all(abs(w["alpha_error_ppb"]) < 10 for w in wins), "alpha errors small")
    ker = sorted(abs(w["error_ns"]) for w in wins if w["source"] == "kernel")
    ref = sorted(abs(injected[(w["node"], w["source"], w["x0_ns"])]) for w in wins if w["source"] == "kernel")
    check(abs(percentile(ker, 99) - percentile(ref, 99)) < 1e-6, "p99 of recovered == p99 of injected")
    # span filtering on true time
    span0, span1 = t0 + 5 * 10**9 + 10 * win, t0 + 5 * 10**9 + 20 * win
    wins2, _ = window_errors(recs, clocks, since_ns=span0, until_ns=span1)
    check(len(wins2) == 4 * 10 - 0, f"span keeps windows 10..19 of both nodes and sources ({len(wins2)})")
    n1 = [w for w in wins if w["node"] == 1]
    bps, src = probe_bytes_per_edge({}, n1, 60.0, 1, 1000)
    check(abs(bps - 2000 / 2.0 * 4 * 172) < 1e-3 and "pairs_sent" in src,
          f"bytes/s from pairs_sent ({bps:.0f})")
    bps, src = probe_bytes_per_edge({}, [], 60.0, 1, 1000)
    check(abs(bps - 1000 * 4 * 172) < 1e-6, f"bytes/s cadence estimate ({bps:.0f})")
    st = {"uptime_s": 10.0, "peers": {"2": {"packets_sent": 4000, "bytes_sent": 4000 * 144,
                                           "packets_received": 4000, "bytes_received": 4000 * 144}}}
    bps, src = probe_bytes_per_edge({}, n1, 60.0, 1, 1000, st)
    check(abs(bps - 400 * 172) < 1e-6 and "agent_stats" in src, f"bytes/s from agent_stats ({bps:.0f})")
    st["peers"]["2"].update({"pilots_sent": 1000, "pilots_received": 0})
    bps, src = probe_bytes_per_edge({}, n1, 60.0, 1, 1000, st)
    check(abs(bps - (400 * 172 + 100 * 44)) < 1e-6, f"bytes/s with pilots ({bps:.0f})")
    pur = format_purity([{"source": "kernel", "estimator": "max_margin", "pairs_sent": 200, "pure_forward": 50,
                          "pure_reverse": 20},
                         {"source": "kernel", "estimator": "min_delay", "pairs_sent": 200, "pure_forward": 2,
                          "pure_reverse": 4},
                         {"source": "userspace", "estimator": "min_delay", "pairs_sent": 200}])
    check(pur == "kernel windows: pure pairs forward 13.0 %, reverse 6.0 %; 1 max_margin, 1 min_delay", pur)
    pur = format_purity([{"source": "kernel", "estimator": "max_margin", "pairs_sent": 100, "tuples_in_class": 200,
                          "pure_forward": 50, "pure_reverse": 20}])
    check(pur.startswith("kernel windows: pure pairs forward 25.0 %, reverse 10.0 %"), f"purity over a fit span: {pur}")
    check(format_purity([]) == "", "no purity line without windows")
    bias = format_prober_bias([{"source": "kernel", "node": 1, "error_ns": -60.0},
                               {"source": "kernel", "node": 1, "error_ns": -80.0},
                               {"source": "kernel", "node": 2, "error_ns": -50.0},
                               {"source": "userspace", "node": 2, "error_ns": 9000.0}])
    check(bias == "kernel windows: mean signed error by prober: node 1 -70 ns, node 2 -50 ns", bias)
    check(format_prober_bias([]) == "", "no bias line without windows")
    # solved offsets against node 1: the truth of the injected clocks, the
    # last line of a (t_ns, node) wins, unreachable and reference rows skipped
    clk = {1: VClock.make(0, 0, 10**18), 2: VClock.make(3_700_000, 45, 10**18)}
    t = 10**18 + 5 * 10**9
    truth2 = true_beta(t, clk[1], clk[2])
    with open(os.path.join(tmpd, "offsets.jsonl"), "w") as f:
        for row in ({"node": 2, "offset_ns": float(truth2) + 500, "uncertainty_ns": 100},
                    {"node": 2, "offset_ns": float(truth2) + 40, "uncertainty_ns": 20, "recomputed": True},
                    {"node": 1, "offset_ns": 0, "uncertainty_ns": 0},
                    {"node": 3, "offset_ns": None, "reachable": False}):
            f.write(json.dumps({"schema": "chronolink.offset.v1", "reference": 1, "t_ns": t, "reachable": True,
                                **row}) + "\n")
        f.write('{"schema": "chronolink.offset.v1", "torn')
    solved = solved_errors(os.path.join(tmpd, "offsets.jsonl"), clk, 0, 2 * 10**18)
    check(len(solved) == 1 and abs(solved[0]["error_ns"] - 40) < 1e-6 and solved[0]["sigma_ns"] == 20,
          f"solved offsets against the truth ({solved})")
    # the same instant as a columns line (a large cluster's leader writes them), re-solved once more
    with open(os.path.join(tmpd, "offsets.jsonl"), "a") as f:
        f.write("\n" + json.dumps({"schema": "chronolink.offset_columns.v1", "reference": 1, "t_ns": t,
                                   "recomputed": True, "node_delta": [1, 1, 1],
                                   "offset_ps": [0, round(float(truth2) * 1000) + 25000, None],
                                   "drift_ps_per_s": [0, 45000000, None], "uncertainty_ps": [0, 10000, None],
                                   "residual_ps": [0, 1000, None], "component": [0, 0, -1],
                                   "edges_used": [2, 2, 0]}) + "\n")
    solved = solved_errors(os.path.join(tmpd, "offsets.jsonl"), clk, 0, 2 * 10**18)
    check(len(solved) == 1 and abs(solved[0]["error_ns"] - 25) < 1e-3 and solved[0]["sigma_ns"] == 10,
          f"solved offsets of a columns line against the truth ({solved})")
    cov = sigma_coverage([(5, 10), (-15, 10), (25, 10), (1, None), (2, 0)])
    check(cov is not None and cov["n"] == 3 and abs(cov["cover_1s"] - 1 / 3) < 1e-9
          and abs(cov["cover_2s"] - 2 / 3) < 1e-9 and cov["cover_3s"] == 1.0
          and abs(cov["width_ratio"] - 10 / 15) < 1e-9, f"sigma coverage {cov}")
    check(sigma_coverage([(1, None)]) is None, "no coverage without a sigma")
    check(quantum_from_steps([140, 141, 150, 151, 160, 171, 180, 190, 191]) == 10, "a 10 ns clock quantum")
    check(quantum_from_steps(list(range(20, 60))) == 1, "a clock that resolves every ns")
    check(quantum_from_steps([]) == 1 and clock_quantum_ns(2000) >= 1, "quantum of no steps / of this clock")
    check(quantum_from_steps([20, 21, 22, 35, 36, 50]) == 1, "sparse steps of a fine clock are no quantum")
    shape = error_shape([0.1, -0.2, 0.3, 5.0, -10.0], 10)
    check(shape is not None and abs(shape["below_1ns"] - 0.6) < 1e-9 and abs(shape["at_half_quantum"] - 0.4) < 1e-9
          and abs(shape["uniform_sigma_ratio"] - 10.0 / 0.9) < 1e-9, f"error shape {shape}")
    check(error_shape([]) is None and error_shape([1.0])["at_half_quantum"] is None, "error shape edge cases")
    with open(os.path.join(tmpd, "results.json"), "w") as f:
        json.dump({"config": {"seconds": 60}, "clock_quantum_ns": 10, "scenarios": []}, f)
    check(report(tmpd) == 0 and report(os.path.join(tmpd, "missing.json")) == 2, "report of a saved run")
    check(agent_log_counters(os.devnull) == {}, "no counters in an empty log")
    with open(os.path.join(tmpd, "agent.log"), "w") as f:
        f.write('[info] exit counters {"tx_bytes": 1000, "rx_bytes": 3000, "pairs_sent": 5}\n')
    c = agent_log_counters(os.path.join(tmpd, "agent.log"))
    check(c == {"tx_bytes": 1000, "rx_bytes": 3000, "pairs_sent": 5}, f"counter parse {c}")
    check(proc_cpu_ticks(os.getpid()) is not None, "reads own /proc/<pid>/stat")
    # table formatting with a failed baseline
    fake = [{"scenario": "x", "methods": {
        "chronolink kernel": {"summary": summarize_abs_us([100, 200, 300])},
        "chronyd xleave per-sample": {"summary": summarize_abs_us([1000, 2000, 30000])},
        "ptp4l per-Sync": {"error": "ptp4l not found"}}}]
    txt = format_table(fake)
    check("failed: ptp4l not found" in txt and "x" in txt, "table shows a failed baseline row")
    # the baselines' rows and CPU from a run: chronyd raw + filtered, CPU by role
    _selftest_baseline_results(check, tmpd, verbose)
    if verbose:
        print(txt)
    shutil.rmtree(tmpd, ignore_errors=True)
    return check.result()


def _selftest_baseline_results(check: Any, tmpd: str, verbose: bool) -> None:
    tb = bl._SelftestBed()
    c = bl.ChronyBaseline(tb, 1, 2, os.path.join(tmpd, "chrony"))
    c._write_configs()
    srv = c.server.address
    day = "2026-11-26"
    with open(c.measurements_log, "w") as f:
        f.write(bl._CHRONY_LOG_SAMPLE.replace("2026-11-25", day).replace("08:00:0", "04:21:1"))
    with open(c.statistics_log, "w") as f:
        f.write(bl._CHRONY_STATS_SAMPLE.replace("10.77.0.1 ", srv + " "))
    t10 = int(_dt.datetime(2026, 11, 26, 4, 21, 10, tzinfo=_dt.timezone.utc).timestamp()) * 10**9
    res: dict[str, Any] = {"scenario": "x", "methods": {}}
    k0 = {"server": 100, "client": 200}
    k1 = {"server": 100 + CLK_TCK // 10, "client": 200 + CLK_TCK // 5}
    baseline_results(res, [("chronyd xleave per-sample", c)], t10, t10 + 2_500_000_000, [k0], [k1], 10.0)
    raw = res["methods"]["chronyd xleave per-sample"]
    filt = res["methods"].get(CHRONY_FILTERED, {})
    check(raw["summary"]["samples"] == 2, f"raw chronyd row: valid samples of the span ({raw['summary']})")
    check([round(x, 3) for x in filt.get("offsets_ns", [])] == [-6.849, 81.02, -7.678]
          and abs(filt["summary"]["p50_us"] - 0.007678) < 1e-9,
          f"filtered chronyd row: statistics.log estimates, |error| vs truth 0 ({filt.get('summary')})")
    cpu = res["baseline_cpu"]["chronyd"]
    check(abs(cpu["server"] - 1.0) < 1e-9 and abs(cpu["client"] - 2.0) < 1e-9,
          f"baseline CPU: ticks over the span, % of a core by role ({cpu})")
    res["methods"]["chronolink kernel"] = {"summary": summarize_abs_us([50, 60, 70])}
    res["agents"] = {"1": {"cpu_pct_of_core": 20.0}, "2": {"cpu_pct_of_core": 22.5}}
    res["baseline_cpu"]["ptp4l"] = {"master": 0.5, "slave": None}
    line = format_accuracy_per_cpu(res)
    check(line.startswith("accuracy per CPU: chronolink p99 0.070 us at 42.50 % of a core; "
                          "chronyd filtered p99 0.080 us at 3.00 %; chronyd raw p99 4.929 us at 3.00 %")
          and "ptp4l" not in line, line)
    txt = format_baseline_costs([res])
    check("x              chronyd: CPU server 1.00 %, client 2.00 % of a core (one edge; both ends 3.00 %)"
          in txt and "ptp4l: CPU master 0.50 %, slave - % of a core (one edge; both ends - %)" in txt,
          "cost lines for the daemons")
    check(format_accuracy_per_cpu({"methods": {}}) == "", "no accuracy-per-CPU line without two methods")
    solved_line = format_costs([{"scenario": "routed-idle", "solved": [
        {"t_ns": 1, "node": 2, "error_ns": e, "sigma_ns": 10.0} for e in (4.0, -1.0, 3.0, 2.0)]}])
    check("solved offsets (leader, against node 1)" in solved_line and "mean signed +2.0 ns" in solved_line,
          f"the solved line gives the run's mean signed error, a bias that lasted it ({solved_line!r})")
    floors = format_path_floor([
        {"scenario": "routed-90pct", "path_floor": {"seconds": 300, "source": "socket_software", "asymmetry_ns": {
            "p50": 4.2, "p90": 68.6, "p99": 230.4, "max": 412.0}}},
        {"scenario": "routed-idle", "path_floor": {"error": "stamps.jsonl: no such file"}},
        {"scenario": "direct-idle"}])
    check("routed-90pct: floor asymmetry per second p50 4 / p90 69 / p99 230 / max 412 ns over 300 s" in floors
          and "routed-idle: stamps.jsonl: no such file" in floors and "direct-idle" not in floors
          and format_path_floor([{"scenario": "x"}]) == "",
          "the path's floor line: per scenario that recorded it, its error said, none without")
    check("own clocks" not in txt, "baselines on the kernel clock: no node-clock line")
    res["methods"]["chronyd xleave per-sample"].update(
        clocks="nodes' own (shim)", truth_motion_within_1s={"median_ns": 102.4, "max_ns": 40789.0, "placement_ns": 351.6})
    check("the truth moved 102 ns in the median second, 40789 ns at most, so a row placed one spacing wrong errs "
          "by at most 352 ns" in format_baseline_costs([res]),
          "baselines on the nodes' clocks: said, with the truth's motion within a logged second")
    open(c.statistics_log, "w").close()
    res2: dict[str, Any] = {"scenario": "y", "methods": {}}
    baseline_results(res2, [("chronyd xleave per-sample", c)], t10, t10 + 2_500_000_000, [{}], [{}], 10.0)
    check("error" in res2["methods"][CHRONY_FILTERED] and res2["baseline_cpu"]["chronyd"] == {},
          "no statistics rows: the filtered row says so")
    check(format_table([res]).count(CHRONY_FILTERED) == 1, "table has the filtered row")
    if verbose:
        print(format_table([res]))
        print(txt)


# --------------------------------------------------------------------------

def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="chronolink vs chronyd vs ptp4l accuracy benchmark (root)")
    ap.add_argument("--agent-bin", default=DEFAULT_AGENT)
    ap.add_argument("--seconds", type=float, default=60.0, help="measured span per scenario")
    ap.add_argument("--quick", action="store_true", help="short smoke run (12 s per scenario)")
    ap.add_argument("--scenarios", default=",".join(s.name for s in SCENARIOS))
    ap.add_argument("--out", default="", help="results directory (default out/accuracy-<time>)")
    ap.add_argument("--name", default="clacc", help="test-bed namespace prefix")
    ap.add_argument("--window-s", type=float, default=2.0)
    ap.add_argument("--warmup-s", type=float, default=None, help="default: 2 windows + 2 s")
    ap.add_argument("--node2-offset-ns", type=int, default=3_700_000)
    ap.add_argument("--node2-drift-ppm", default="45")
    ap.add_argument("--cluster-id", type=int, default=7)
    ap.add_argument("--clock-model", choices=node_clocks.MODELS, default="chronyd",
                    help="the nodes' clocks: chronyd (the default: a crystal's wander, and a real chronyd "
                         "disciplining every node's clock; docs/testbed.md), timesyncd (the kernel PLL "
                         "instead), wander (undisciplined), or linear (offset and drift only, the clocks "
                         "of every figure before issue 31)")
    ap.add_argument("--white-fm-adev", type=float, default=node_clocks.DEFAULT_WHITE_FM_ADEV,
                    help="wander: Allan deviation at 1 s of white FM")
    ap.add_argument("--random-walk-fm-adev", type=float, default=node_clocks.DEFAULT_RANDOM_WALK_FM_ADEV,
                    help="wander: Allan deviation at 1 s of random-walk FM")
    ap.add_argument("--clock-seed", type=int, default=1, help="wander: seed of node 1's noise (node n: +n-1)")
    ap.add_argument("--log-level", default="info")
    ap.add_argument("--probe-interval-us", type=float, default=50000.0,
                    help="probe cadence for the bytes/s estimate when the agent reports no counters")
    ap.add_argument("--agent-arg", action="append", default=[], help="extra agent argument (repeatable)")
    ap.add_argument("--load-cpu", default="auto",
                    help="the CPU the cross traffic runs on, the agents on the others (auto: the last CPU, "
                         "on a machine with two or more; none: every process free). This kernel charges a "
                         "softirq to the task it interrupts, so beside the load an agent's CPU figure "
                         "includes the load's packets")
    ap.add_argument("--stamp-logs", action="store_true",
                    help="each agent also writes every probe's stamps (agent-n<i>/stamps.jsonl; ~8 MB a minute), "
                         "which bench/path_floor.py reads: the path's one-way delay floor per second and direction")
    ap.add_argument("--no-baselines", action="store_true")
    ap.add_argument("--skip-agent", action="store_true", help="baselines only (no chronolink rows)")
    ap.add_argument("--selftest", action="store_true", help="check the arithmetic and exit (no root)")
    ap.add_argument("--report", metavar="RESULTS", default="",
                    help="print the summary of an earlier run (its results.json or directory) and exit (no root)")
    a = ap.parse_args(argv)
    if a.selftest:
        return selftest()
    if a.report:
        return report(a.report)
    if a.quick and a.seconds == 60.0:
        a.seconds = 12.0
    for i, x in enumerate(a.agent_arg):
        # the cadence estimate follows an explicit --probe-interval-us given to the agent
        if x == "--probe-interval-us" and i + 1 < len(a.agent_arg):
            a.probe_interval_us = float(a.agent_arg[i + 1])
        elif x.startswith("--probe-interval-us="):
            a.probe_interval_us = float(x.split("=", 1)[1])
    if a.warmup_s is None:
        a.warmup_s = 2 * a.window_s + 2.0
    try:
        cpu_split(a.load_cpu)
    except ValueError as e:
        print(f"accuracy_bench: {e}", file=sys.stderr)
        return 2
    _frac(a.node2_drift_ppm)  # validate
    wanted = [s.strip() for s in a.scenarios.split(",") if s.strip()]
    known = {s.name: s for s in SCENARIOS}
    bad = [w for w in wanted if w not in known]
    if bad:
        print(f"accuracy_bench: unknown scenario(s) {bad}; known: {list(known)}", file=sys.stderr)
        return 2
    if not a.skip_agent:
        a.agent_bin = os.path.abspath(a.agent_bin)
        if not (os.path.isfile(a.agent_bin) and os.access(a.agent_bin, os.X_OK)):
            print(f"accuracy_bench: chronolink agent not found or not executable: {a.agent_bin}\n"
                  "  build it (cmake --build build --target chronolink-agent) or pass --agent-bin PATH;\n"
                  "  --skip-agent runs the baselines alone.", file=sys.stderr)
            return 2
    if os.geteuid() != 0:
        print("accuracy_bench: must run as root (network namespaces)", file=sys.stderr)
        return tbm.EXIT_NOT_PERMITTED
    out = a.out or os.path.join(REPO, "out", "accuracy-" + _dt.datetime.now().strftime("%Y%m%d-%H%M%S"))
    # The agents append to their files (edges, timebase, offsets): an earlier
    # run's lines in a reused directory would be read as this run's.
    used = [n for n in wanted if os.path.isdir(os.path.join(out, n)) and os.listdir(os.path.join(out, n))]
    if used:
        print(f"accuracy_bench: {out} already holds a run of {', '.join(used)}; remove it or give another --out",
              file=sys.stderr)
        return 2
    os.makedirs(out, exist_ok=True)
    results: list[dict] = []
    quantum = clock_quantum_ns()
    print(f"clock: CLOCK_REALTIME advances in steps of {quantum} ns here; every stamp is quantised so, "
          "and errors well under it are luck, not resolution", flush=True)
    try:
        for name in wanted:
            sc = known[name]
            print(f"== {sc.name}: {sc.topology}, tbf {sc.tbf['rate'] if sc.tbf else 'none'}, "
                  f"load {sc.load or 'idle'} per direction, {a.seconds:g} s after {a.warmup_s:g} s warm-up",
                  flush=True)
            try:
                r = run_scenario(sc, a, os.path.join(out, sc.name))
            except tbm.TestbedPermissionError as e:
                print(f"accuracy_bench: {e}", file=sys.stderr)
                return tbm.EXIT_NOT_PERMITTED
            except (RuntimeError, OSError, tbm.TestbedError) as e:
                print(f"  scenario failed: {e}", flush=True)
                r = {"scenario": sc.name, "error": str(e), "methods": {}, "agents": {}}
            results.append(r)
            with open(os.path.join(out, "results.json"), "w") as f:
                json.dump(_jsonable({"config": {k: v for k, v in vars(a).items()}, "clock_quantum_ns": quantum,
                                    "scenarios": results}), f)
    except KeyboardInterrupt:
        print(f"\ninterrupted (test bed cleaned up); {len(results)} finished scenario(s) in "
              f"{os.path.join(out, 'results.json')}", file=sys.stderr)
        if results:
            print(format_table(results))
        return 130
    print_summary(results, a.seconds, quantum)
    print(f"\nresults: {os.path.join(out, 'results.json')}")
    return 0


def print_summary(results: list[dict], seconds: float, quantum: int | None) -> None:
    print()
    print(f"|error| in µs over {seconds:g} s per scenario "
          "(chronolink: per window, both directions; chronyd: per sample; ptp4l: per Sync)")
    print(format_table(results))
    costs = format_costs(results, quantum)
    if costs:
        print()
        print(costs)
    bcosts = format_baseline_costs(results)
    if bcosts:
        print(bcosts)
    floors = format_path_floor(results)
    if floors:
        print(floors)
    print(f"clock quantum: {'not recorded' if quantum is None else f'{quantum} ns'} "
          "(CLOCK_REALTIME steps on the machine that ran it)")


def report(path: str) -> int:
    """Prints the summary of an earlier run from its results.json (or the
    directory holding it), without running anything."""
    if os.path.isdir(path):
        path = os.path.join(path, "results.json")
    try:
        with open(path) as f:
            saved = json.load(f)
        results, seconds = saved["scenarios"], float(saved["config"]["seconds"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"accuracy_bench: cannot read {path}: {e}", file=sys.stderr)
        return 2
    print_summary(results, seconds, saved.get("clock_quantum_ns"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
