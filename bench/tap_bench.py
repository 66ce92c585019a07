#!/usr/bin/env python3
"""eBPF timestamp tap benchmark (root): what each timestamp source buys, and
what the tap costs.

  sudo python3 bench/tap_bench.py sources  [--seconds 30]   # accuracy by source class
  sudo python3 bench/tap_bench.py overhead [--seconds 20]   # added latency and CPU per packet
  python3 bench/tap_bench.py --selftest [--agent-bin B]     # parsing and arguments, no root

sources: for each kernel source (socket_sched, socket_software, bpf_tc,
bpf_xdp) the two-agent scenario of accuracy_bench.py runs with that source
forced on both ends (--timestamp-source; the socket sources with the tap
off, bpf_tc without XDP, bpf_xdp with XDP on the veths), idle and under
~90 % cross traffic through the tbf router queue; the userspace class comes
from the socket_sched runs. Prints p50/p99/max |error| per source and scenario.

overhead: in one test bed and at the same time, one agent pair records its
probes with the tap (--bpf on) and another pair, on another port, runs
without it (--bpf off; its packets pass the same hooks, which ignore them
after the port check). Both write per-packet stamp logs; with identity
clocks and one kernel clock the one-way latency userspace send -> userspace
receive is exact. Prints the latency p50/p99 of both pairs, the agents' CPU
per packet, and the BPF programs' own run time per invocation
(kernel.bpf_stats_enabled).
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import secrets
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tools", "testbed"))
import accuracy_bench as ab  # noqa: E402
import testbed as tbm  # noqa: E402
from baselines import SelfTestChecks, percentile  # noqa: E402

SOURCES = ["socket_sched", "socket_software", "bpf_tc", "bpf_xdp"]
# Each source as one would run it: the socket sources with no hooks at all
# (an XDP program on a veth delays every receive stamp), tc without XDP, and
# XDP forced on for the XDP source.
SOURCE_ARGS = {
    "socket_sched": ["--bpf=off", "--timestamp-source=socket_sched"],
    "socket_software": ["--bpf=off", "--timestamp-source=socket_software"],
    "bpf_tc": ["--bpf=on", "--bpf-xdp=off", "--timestamp-source=bpf_tc"],
    "bpf_xdp": ["--bpf=on", "--bpf-xdp=on", "--timestamp-source=bpf_xdp"],
}
SOURCE_SCENARIOS = ["routed-idle", "routed-90pct"]


def base_namespace(a) -> argparse.Namespace:
    return argparse.Namespace(
        agent_bin=os.path.abspath(a.agent_bin), seconds=a.seconds, name="cltap", window_s=2.0,
        warmup_s=6.0, node2_offset_ns=3_700_000, node2_drift_ppm="45", cluster_id=7,
        log_level="info", probe_interval_us=1000.0, agent_arg=[], no_baselines=True, skip_agent=False,
        clock_model="linear", clock_seed=1, white_fm_adev=ab.node_clocks.DEFAULT_WHITE_FM_ADEV,
        random_walk_fm_adev=ab.node_clocks.DEFAULT_RANDOM_WALK_FM_ADEV, load_cpu="auto",
        stamp_logs=False)


def run_sources(a) -> int:
    known = {s.name: s for s in ab.SCENARIOS}
    rows = []
    out = a.out or os.path.join(REPO, "out", "tap-sources-" + time.strftime("%Y%m%d-%H%M%S"))
    for scen in SOURCE_SCENARIOS:
        for src in [x for x in SOURCES if x in a.sources.split(",")]:
            ns = base_namespace(a)
            ns.agent_arg = SOURCE_ARGS[src]
            print(f"== {scen}, kernel source forced to {src}", flush=True)
            r = ab.run_scenario(known[scen], ns, os.path.join(out, f"{scen}-{src}"))
            k = r["methods"].get("chronolink kernel", {}).get("summary")
            u = r["methods"].get("chronolink userspace", {}).get("summary")
            rows.append((scen, src, k))
            if src == "socket_sched":
                rows.append((scen, "userspace", u))
    print()
    print("|error| per 2 s window, both directions, µs")
    print(f"{'scenario':<14} {'source':<16} {'windows':>7} {'p50':>9} {'p99':>9} {'max':>9}")
    for scen, src, s in rows:
        if not s or not s.get("samples"):
            print(f"{scen:<14} {src:<16} {'none':>7}")
            continue
        print(f"{scen:<14} {src:<16} {s['samples']:>7} {s['p50_us']:>9.3f} {s['p99_us']:>9.3f} "
              f"{s['max_us']:>9.3f}")
    with open(os.path.join(out, "sources.json"), "w") as f:
        json.dump(rows, f, indent=1, default=str)
    print(f"\nresults: {out}")
    return 0


def read_stamp_log(path):
    out = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            out[(r["type"], r["sender"], r["receiver"], r["session"], r["seq"], r["index"],
                 r["direction"])] = r["stamps_ns"]
    return out


def one_way_latencies(log_tx, log_rx, tx_source, rx_source):
    """tx_source stamp in the sender's log -> rx_source stamp in the receiver's, ns."""
    lat = []
    for k, st in log_tx.items():
        if k[6] != "tx" or tx_source not in st:
            continue
        rx = log_rx.get(k[:6] + ("rx",))
        if rx and rx_source in rx:
            lat.append(rx[rx_source] - st[tx_source])
    return lat


def bpf_prog_stats():
    cp = subprocess.run(["bpftool", "prog", "show", "--json"], capture_output=True, text=True, timeout=20)
    stats = {}
    for p in json.loads(cp.stdout or "[]"):
        name = p.get("name", "")
        if name.startswith("chronolink_"):
            s = stats.setdefault(name, [0, 0])
            s[0] += p.get("run_cnt", 0)
            s[1] += p.get("run_time_ns", 0)
    return stats


def run_overhead(a) -> int:
    out = a.out or os.path.join(REPO, "out", "tap-overhead-" + time.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(out, exist_ok=True)
    key = os.path.join(out, "cluster.key")
    # The agent refuses a key file that others could read.
    with os.fdopen(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    os.chmod(key, 0o600)  # an older file keeps its mode through O_TRUNC
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True, timeout=10)
    pairs = {"with tap": (7319, "on", 11), "without tap": (7320, "off", 12)}
    xdp = {"on": a.bpf_xdp, "off": "off"}
    procs = {}
    try:
        with tbm.Testbed("cltapo", nodes=2, topology="routed") as tb:
            for label, (port, bpf, cid) in pairs.items():
                cluster = os.path.join(out, f"cluster-{port}.json")
                with open(cluster, "w") as f:
                    json.dump({"cluster_id": cid, "nodes": [
                        {"id": n.index, "address": n.address, "port": port} for n in tb.nodes]}, f)
                for n in tb.nodes:
                    d = os.path.join(out, f"{port}-n{n.index}")
                    os.makedirs(d, exist_ok=True)
                    argv = [os.path.abspath(a.agent_bin), "--node-id", n.index, "--cluster-file", cluster,
                            "--key-file", key, "--output-dir", d, "--bpf", bpf, "--bpf-xdp", xdp[bpf],
                            "--stamp-log", os.path.join(d, "stamps.jsonl"),
                            "--probe-interval-us", a.probe_interval_us,
                            "--duration-s", a.seconds + 3]
                    logf = open(d + ".log", "wb")  # beside: the output dir holds the agent's files only
                    procs[(label, n.index)] = tb.popen(n.index, argv, stdout=logf, stderr=subprocess.STDOUT)
            time.sleep(1.5)
            before = bpf_prog_stats()
            ticks0 = {k: ab.proc_cpu_ticks(p.pid) for k, p in procs.items()}
            t0 = time.monotonic()
            time.sleep(a.seconds)
            wall = time.monotonic() - t0
            ticks1 = {k: ab.proc_cpu_ticks(p.pid) for k, p in procs.items()}
            after = bpf_prog_stats()
            for p in procs.values():
                p.wait(timeout=30)
    finally:
        subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=0"], timeout=10)
    print(f"one-way latency, µs ({a.seconds:g} s, routed, idle, one pair per {a.probe_interval_us} us)")
    print("  kernel path: TX_SCHED (enters the qdisc) -> RX_SOFTWARE at the peer, which spans")
    print("  tc egress, net_dev_start_xmit and XDP; user: sendto -> recvmsg returns")
    print(f"{'pair':<12} {'packets':>8} {'kernel p50':>11} {'p90':>8} {'p99':>8} {'user p50':>9} {'p99':>8}"
          f"   agent CPU µs/packet")
    summary = {}
    for label, (port, _, _) in pairs.items():
        logs = {i: read_stamp_log(os.path.join(out, f"{port}-n{i}", "stamps.jsonl")) for i in (1, 2)}
        klat = sorted(one_way_latencies(logs[1], logs[2], "socket_sched", "socket_software") +
                      one_way_latencies(logs[2], logs[1], "socket_sched", "socket_software"))
        lat = sorted(one_way_latencies(logs[1], logs[2], "userspace", "userspace") +
                     one_way_latencies(logs[2], logs[1], "userspace", "userspace"))
        stats = [ab.read_agent_stats(os.path.join(out, f"{port}-n{i}", "agent_stats.json")) for i in (1, 2)]
        pkts = sum((s.get("tx_stamp_coverage", {}).get("packets", 0) +
                    s.get("rx_stamp_coverage", {}).get("packets", 0)) for s in stats)
        uptime = max(s.get("uptime_s", 1) for s in stats) or 1
        cpu_ticks = sum((ticks1[(label, i)] or 0) - (ticks0[(label, i)] or 0) for i in (1, 2))
        cpu_us_per_pkt = cpu_ticks / ab.CLK_TCK * 1e6 / max(1, pkts * wall / uptime)
        k = [percentile(klat, q) / 1e3 for q in (50, 90, 99)]
        u = [percentile(lat, q) / 1e3 for q in (50, 99)]
        summary[label] = {"packets": len(klat), "kernel_p50_us": k[0], "kernel_p90_us": k[1],
                          "kernel_p99_us": k[2], "user_p50_us": u[0], "user_p99_us": u[1],
                          "agent_cpu_us_per_packet": cpu_us_per_pkt}
        print(f"{label:<12} {len(klat):>8} {k[0]:>11.2f} {k[1]:>8.2f} {k[2]:>8.2f} {u[0]:>9.2f} {u[1]:>8.2f}"
              f"   {cpu_us_per_pkt:.2f}")
    print()
    print("BPF program run time per invocation (all packets on the hooked devices)")
    for name in sorted(after):
        cnt = after[name][0] - before.get(name, [0, 0])[0]
        ns = after[name][1] - before.get(name, [0, 0])[1]
        if cnt > 0:
            print(f"  {name:<24} {cnt:>9} runs  {ns / cnt:8.0f} ns/run")
            summary[name] = {"runs": cnt, "ns_per_run": ns / cnt}
    with open(os.path.join(out, "overhead.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(f"\nresults: {out}")
    return 0


# --------------------------------------------------------------------------
# self-test (no root): the stamp-log arithmetic, the bpftool parsing, the
# arguments handed to accuracy_bench and to the agent, and real stamp logs
# of two agents on loopback

def _under_ci() -> bool:
    """The CI rule of tests/support/ci_rule.h: CI set, not empty, 0 or false."""
    return os.environ.get("CI", "") not in ("", "0", "false", "FALSE", "False")


def _stamp_line(kind, direction, sender, receiver, seq, index, stamps) -> str:
    return json.dumps({"type": kind, "direction": direction, "sender": sender, "receiver": receiver,
                       "session": "9962097182954753368", "seq": seq, "index": index, "stamps_ns": stamps})


def _free_udp_ports(n: int) -> list[int]:
    import socket
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(n)]
    try:
        for so in socks:
            so.bind(("127.0.0.1", 0))
        return [so.getsockname()[1] for so in socks]
    finally:
        for so in socks:
            so.close()


def _run_loopback_agents(agent_bin: str, tmpd: str, seconds: float = 2.0) -> tuple[list[str], list[int]]:
    """Two real agents on 127.0.0.1 (no tap, no coordination) writing stamp
    logs; returns the logs' paths and the agents' exit statuses."""
    ports = _free_udp_ports(2)
    # The agents run as root's --user (nobody) after their drop: they must
    # reach their output directories, which hold nothing but their own files.
    os.makedirs(tmpd, mode=0o755)
    key = os.path.join(tmpd, "cluster.key")
    with os.fdopen(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    cluster = os.path.join(tmpd, "cluster.json")
    with open(cluster, "w") as f:
        json.dump({"cluster_id": 9, "nodes": [{"id": i + 1, "address": "127.0.0.1", "port": port}
                                              for i, port in enumerate(ports)]}, f)
    logs, procs = [], []
    for n in (1, 2):
        d = os.path.join(tmpd, f"n{n}")
        os.makedirs(d)
        logs.append(os.path.join(d, "stamps.jsonl"))
        argv = [agent_bin, "--node-id", str(n), "--cluster-file", cluster, "--key-file", key,
                "--output-dir", d, "--bpf", "off", "--coordination", "none", "--clock-page", "off",
                "--stamp-log", logs[-1], "--probe-interval-us", "5000", "--duration-s", str(seconds)]
        with open(os.path.join(tmpd, f"agent{n}.log"), "wb") as out:
            procs.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT))
    status = []
    for p in procs:
        try:
            status.append(p.wait(timeout=seconds + 20))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)
            status.append(-9)
    return logs, status


def selftest(agent_bin: str | None) -> int:
    import inspect
    import re
    import shutil
    import tempfile
    check = SelfTestChecks(verbose=True)

    tmpd = tempfile.mkdtemp(prefix="cltap-selftest-")
    os.chmod(tmpd, 0o755)  # the loopback agents, once dropped to nobody, go through it
    try:
        # stamp logs: keys, and one-way latencies by matching tx to rx records
        log1, log2 = os.path.join(tmpd, "s1.jsonl"), os.path.join(tmpd, "s2.jsonl")
        with open(log1, "w") as f:
            f.write(_stamp_line("forward", "tx", 1, 2, 1, 0, {"userspace": 1000, "socket_sched": 1100}) + "\n")
            f.write(_stamp_line("forward", "tx", 1, 2, 1, 1, {"userspace": 2000}) + "\n")   # no sched stamp
            f.write(_stamp_line("forward", "tx", 1, 2, 2, 0, {"userspace": 3000, "socket_sched": 3100}) + "\n")
            f.write(_stamp_line("reverse", "rx", 2, 1, 1, 0, {"userspace": 9000}) + "\n")  # an rx: not a send
            # a received packet claiming to come from node 1 itself: never a send
            f.write(_stamp_line("forward", "rx", 1, 2, 1, 0, {"userspace": 5000}) + "\n")
        with open(log2, "w") as f:
            f.write(_stamp_line("forward", "rx", 1, 2, 1, 0, {"userspace": 1900, "socket_software": 1500}) + "\n")
            f.write(_stamp_line("forward", "rx", 1, 2, 1, 1, {"userspace": 2700, "socket_software": 2500}) + "\n")
            f.write(_stamp_line("reverse", "rx", 1, 2, 2, 0, {"userspace": 3600}) + "\n")  # other type: no match
        l1, l2 = read_stamp_log(log1), read_stamp_log(log2)
        check(len(l1) == 5 and ("forward", 1, 2, "9962097182954753368", 2, 0, "tx") in l1,
              "read_stamp_log keys (type, sender, receiver, session, seq, index, direction)")
        check(sorted(one_way_latencies(l1, l2, "userspace", "userspace")) == [700, 900],
              "userspace latencies of the matched packets only")
        check(one_way_latencies(l1, l2, "socket_sched", "socket_software") == [400],
              "kernel latency needs both stamps")
        check(one_way_latencies(l2, l1, "userspace", "userspace") == [], "rx records are never the send side")

        # bpftool's program list: only our programs, run counts and times summed
        canned = json.dumps([{"id": 1, "name": "chronolink_tc", "run_cnt": 10, "run_time_ns": 500},
                             {"id": 2, "name": "chronolink_tc", "run_cnt": 5, "run_time_ns": 300},
                             {"id": 3, "name": "chronolink_xdp"},
                             {"id": 4, "name": "other_prog", "run_cnt": 99, "run_time_ns": 99}])
        real_run = subprocess.run
        try:
            subprocess.run = lambda *a, **k: subprocess.CompletedProcess(a, 0, stdout=canned, stderr="")
            st = bpf_prog_stats()
            subprocess.run = lambda *a, **k: subprocess.CompletedProcess(a, 1, stdout="", stderr="")
            empty = bpf_prog_stats()
        finally:
            subprocess.run = real_run
        check(st == {"chronolink_tc": [15, 800], "chronolink_xdp": [0, 0]}, f"bpf_prog_stats {st}")
        check(empty == {}, "bpftool printing nothing: no programs")

        # what is handed to accuracy_bench.run_scenario and to the agent
        check(sorted(SOURCE_ARGS) == sorted(SOURCES), "every source has its agent arguments")
        ns = vars(base_namespace(argparse.Namespace(agent_bin="x", seconds=5.0)))
        used = set(re.findall(r"\ba\.([A-Za-z_]\w*)", inspect.getsource(ab.run_scenario)))
        check(used and used <= set(ns), f"base_namespace has all run_scenario reads: {sorted(used - set(ns))}")
        overhead_flags = set(re.findall(r'"(--[a-z-]+)"', inspect.getsource(run_overhead)))
        if agent_bin and os.access(agent_bin, os.X_OK):
            cp = subprocess.run([agent_bin, "--help"], capture_output=True, text=True, timeout=20)
            helptext = cp.stdout + cp.stderr
            lines = {m.group(1): m.group(0) for m in re.finditer(r"^\s*(--[a-z-]+).*$", helptext, re.M)}
            bad = []
            for a in sum(SOURCE_ARGS.values(), []):
                flag, value = a.split("=", 1)
                if flag not in lines or value not in lines[flag]:
                    bad.append(a)
            check(not bad, f"the agent knows every source argument {bad}")
            check(overhead_flags and overhead_flags <= set(lines),
                  f"the agent knows every overhead argument {sorted(overhead_flags - set(lines))}")

            # real stamp logs: two agents on loopback, one kernel clock, no virtual clocks
            logs, status = _run_loopback_agents(agent_bin, os.path.join(tmpd, "agents"))
            check(status == [0, 0], f"loopback agents exit 0 ({status})")
            try:
                r1, r2 = read_stamp_log(logs[0]), read_stamp_log(logs[1])
            except (OSError, ValueError, KeyError) as e:
                r1, r2 = {}, {}
                check(False, f"stamp logs readable: {e}")
            sends = [k for k in r1 if k[6] == "tx" and k[1] == 1]
            user = one_way_latencies(r1, r2, "userspace", "userspace")
            kern = one_way_latencies(r1, r2, "socket_sched", "socket_software")
            # 2 s at one pair per 5 ms is ~800 sends per agent; nearly all arrive
            check(len(sends) >= 200 and len(user) >= 0.9 * len(sends),
                  f"node 1's sends matched to node 2's receptions ({len(user)} of {len(sends)})")
            check(len(kern) >= 0.9 * len(sends), f"kernel stamps on both ends ({len(kern)})")
            user.sort()
            kern.sort()
            check(bool(user) and 0 < percentile(user, 50) < 1e6 and 0 < percentile(kern, 50) < 1e6,
                  "loopback one-way latencies are positive and under 1 ms at the median "
                  f"(user p50 {percentile(user, 50):.0f} ns, kernel p50 {percentile(kern, 50):.0f} ns)")
        elif _under_ci():
            check(False, f"CI must run the agent checks, but no agent at {agent_bin}")
        else:
            print(f"skip: no agent at {agent_bin}: agent checks skipped outside CI")
    finally:
        shutil.rmtree(tmpd, ignore_errors=True)
    return check.result()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", nargs="?", choices=["sources", "overhead"])
    ap.add_argument("--selftest", action="store_true",
                    help="check the parsing and the arguments, run two agents on loopback; no root")
    ap.add_argument("--agent-bin", default=ab.DEFAULT_AGENT)
    ap.add_argument("--seconds", type=float, default=None, help="measured span (sources: 30, overhead: 20)")
    ap.add_argument("--out", default="")
    ap.add_argument("--sources", default=",".join(SOURCES), help="sources: which kernel sources to run")
    ap.add_argument("--bpf-xdp", choices=["auto", "on"], default="auto",
                    help="overhead: XDP mode of the pair with the tap (on: XDP on the veths too)")
    ap.add_argument("--probe-interval-us", type=int, default=5000,
                    help="overhead: cadence of both pairs (default 5000, so four agents and their "
                         "stamp logs do not saturate two cores)")
    a = ap.parse_args(argv)
    if a.selftest:
        return selftest(a.agent_bin)
    if a.mode is None:
        ap.error("a mode is required: sources or overhead")
    if os.geteuid() != 0:
        print("tap_bench: must run as root", file=sys.stderr)
        return 2
    if not os.access(a.agent_bin, os.X_OK):
        print(f"tap_bench: agent not found: {a.agent_bin}", file=sys.stderr)
        return 2
    if a.mode == "sources":
        a.seconds = a.seconds or 30.0
        return run_sources(a)
    a.seconds = a.seconds or 20.0
    return run_overhead(a)


if __name__ == "__main__":
    sys.exit(main())
