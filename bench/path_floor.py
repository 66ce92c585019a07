#!/usr/bin/env python3
"""The test bed path's delay floor per second and direction, from stamp logs.

A max-margin line between two nodes rests on each direction's fastest
probes (docs/estimator.md §2): where the floor of the one-way delay rises
in one direction and not in the other, the line moves by half the
difference, and no estimator can tell that from a clock offset. This reads
one saved accuracy_bench scenario run with --stamp-logs (each agent's
stamps.jsonl, its edges.jsonl for its fit clock's anchors, the nodes' clock
state files), gives every probe packet its true one-way delay (each stamp is
on its node's fit clock, mapped to true time exactly: tools/testbed/truth.py)
and prints, per stamp source, how the floor moves: per second and
direction the fastest packet, half the difference between the directions
(the "floor asymmetry"), and their spread over the run; then the same
over only the seconds whose two floors summed (a round trip's floor, which
an agent can see: no clock offset in it) stood within 200, 300 or 500 ns
of the whole run's.

    sudo python3 bench/accuracy_bench.py --scenarios routed-90pct --stamp-logs --no-baselines --out OUT
    python3 bench/path_floor.py OUT/routed-90pct [--source socket_software] [--table]
    python3 bench/path_floor.py --selftest

No root: only saved runs.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from fractions import Fraction
from typing import Any, Iterable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tools", "testbed"))
from baselines import SelfTestChecks, percentile  # noqa: E402  (numpy's linear, as every bench prints)
from truth import VClock, fit_clock_truth  # noqa: E402

NS_PER_S = 1_000_000_000


def read_stamp_log(path: str) -> dict[tuple, dict[str, int]]:
    """(type, sender, receiver, session, seq, index, direction) -> {source: ns}."""
    out = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            try:
                r = json.loads(line)
                out[(r["type"], int(r["sender"]), int(r["receiver"]), r["session"], r["seq"], r["index"],
                     r["direction"])] = r["stamps_ns"]
            except (ValueError, KeyError, TypeError) as e:
                raise ValueError(f"{path}:{n}: not a stamp-log line ({e})") from None
    return out


def stamped_packets(logs: dict[int, dict], source: str) -> Iterable[tuple[tuple, int, int]]:
    """(key, sender's stamp, receiver's stamp) of every packet both ends
    stamped with `source`, each stamp on its own node's clock."""
    for node, log in logs.items():
        for key, stamps in log.items():
            if key[6] != "tx" or key[1] != node or source not in stamps:
                continue
            rx = logs.get(key[2], {}).get(key[:6] + ("rx",))
            if rx and source in rx:
                yield key, stamps[source], rx[source]


def one_way_delays(logs: dict[int, dict], clocks: dict[int, Any], source: str) -> list[tuple[Fraction, int, int, Fraction]]:
    """(true send instant, sender, receiver, true one-way delay) of every
    packet both ends stamped with `source`, sorted by send instant."""
    out = []
    for key, tx, rx in stamped_packets(logs, source):
        sent = clocks[key[1]].true_time(tx)
        out.append((sent, key[1], key[2], clocks[key[2]].true_time(rx) - sent))
    out.sort()
    return out


def floors_per_second(delays: Iterable[tuple], since_ns: Fraction) -> dict[int, dict[tuple[int, int], Fraction]]:
    """second since `since_ns` -> {(sender, receiver): the fastest packet}."""
    out: dict[int, dict] = defaultdict(dict)
    for sent, a, b, d in delays:
        if sent < since_ns:
            continue
        s = int((sent - since_ns) // NS_PER_S)
        if (a, b) not in out[s] or d < out[s][(a, b)]:
            out[s][(a, b)] = d
    return dict(out)


def summarize(floors: dict[int, dict], delays: list[tuple], since_ns: Fraction) -> dict:
    """Per run: the floor asymmetry |d(1->2) - d(2->1)| / 2 per second (both
    directions seen), the per-second floors, and each direction's floor over
    the whole run."""
    asym = sorted(abs(f[(1, 2)] - f[(2, 1)]) / 2 for f in floors.values() if (1, 2) in f and (2, 1) in f)
    per_second = sorted(d for f in floors.values() for d in f.values())
    whole = {}
    for sent, a, b, d in delays:
        if sent >= since_ns and ((a, b) not in whole or d < whole[(a, b)]):
            whole[(a, b)] = d
    if not asym:
        return {"seconds": 0}
    # What the agent could see: the two directions' floors summed (a round
    # trip's, free of any clock offset) against the whole run's. Seconds
    # whose sum stood high are where the asymmetric ones are.
    base = sum(whole.values()) if len(whole) == 2 else None
    gated = {}
    if base is not None:
        both = [(f[(1, 2)] + f[(2, 1)] - base, abs(f[(1, 2)] - f[(2, 1)]) / 2)
                for f in floors.values() if (1, 2) in f and (2, 1) in f]
        for limit in (200, 300, 500):
            kept = sorted(a for excess, a in both if excess <= limit)
            if kept:
                gated[limit] = {"seconds": len(kept), "p99_ns": percentile(kept, 99),
                                "max_ns": float(kept[-1])}
    return {"seconds": len(asym),
            "round_trip_floor_gate": gated,
            "asymmetry_ns": {q: percentile(asym, p) for q, p in (("p50", 50), ("p90", 90), ("p99", 99), ("max", 100))},
            "floor_ns": {q: percentile(per_second, p) for q, p in (("p10", 10), ("p50", 50), ("p90", 90))},
            "whole_run_floor_ns": {f"{a}->{b}": float(d) for (a, b), d in sorted(whole.items())}}


def scenario_clocks(scenario_dir: str) -> dict[int, Any]:
    """Each node's fit clock, exactly (its state file and its anchors)."""
    from clock_trajectory import NodeClockState
    clocks = {}
    for n in (1, 2):
        with open(os.path.join(scenario_dir, f"agent-n{n}", "edges.jsonl")) as f:
            records = [json.loads(line) for line in f if line.strip()]
        state = NodeClockState.load(os.path.join(scenario_dir, f"node{n}.clock"))
        clocks[n] = fit_clock_truth(records, state.realtime(), state.raw)
    return clocks


def measured_span_start(scenario_dir: str) -> Fraction | None:
    """The start of accuracy_bench's measured span (true ns), if its results.json says."""
    path = os.path.join(os.path.dirname(os.path.abspath(scenario_dir)), "results.json")
    name = os.path.basename(os.path.normpath(scenario_dir))
    try:
        with open(path) as f:
            for r in json.load(f).get("scenarios", []):
                if r.get("scenario") == name and r.get("span_ns"):
                    return Fraction(int(r["span_ns"][0]))
    except (OSError, ValueError):
        pass
    return None


def delay_by_sender_role(logs: dict[int, dict], clocks: dict[int, Any], source: str,
                         since_ns: Fraction, q: float = 1) -> dict[tuple[int, int, str], float]:
    """(sender, receiver, kind) -> the q-th percentile of the one-way delay:
    per direction, the prober's own probes (forward) apart from the answers
    to them (reverse). A max-margin line midway between a prober's probes and
    its peer's answers leans by half of what separates their floors
    (docs/estimator.md §11)."""
    by: dict[tuple[int, int, str], list] = defaultdict(list)
    for key, tx, rx in stamped_packets(logs, source):
        sent = clocks[key[1]].true_time(tx)
        if sent >= since_ns:
            by[(key[1], key[2], key[0])].append(float(clocks[key[2]].true_time(rx) - sent))
    return {k: percentile(sorted(v), q) for k, v in sorted(by.items())}


def format_roles(source: str, roles: dict[tuple[int, int, str], float], q: float = 1) -> str:
    parts = [f"{a}->{b} {kind} {v:.0f} ns" for (a, b, kind), v in roles.items()]
    return f"{source}: one-way delay p{q:g} by what the packet was (forward: a prober's probe; reverse: an answer): " + \
        ", ".join(parts)


def format_summary(source: str, s: dict) -> str:
    if not s.get("seconds"):
        return f"{source}: no second with packets both ways"
    a, f = s["asymmetry_ns"], s["floor_ns"]
    whole = ", ".join(f"{k} {v:.0f} ns" for k, v in s["whole_run_floor_ns"].items())
    gate = "; ".join(f"<= {lim} ns: {g['seconds']} s, asymmetry p99 {g['p99_ns']:.0f} / max {g['max_ns']:.0f} ns"
                     for lim, g in s.get("round_trip_floor_gate", {}).items())
    return (f"{source}: {s['seconds']} s; floor asymmetry per second (|1->2 - 2->1| / 2) p50 {a['p50']:.0f} / "
            f"p90 {a['p90']:.0f} / p99 {a['p99']:.0f} / max {a['max']:.0f} ns; floor per second and direction "
            f"p10 {f['p10']:.0f} / p50 {f['p50']:.0f} / p90 {f['p90']:.0f} ns; over the whole run {whole}"
            + (f"\n  only the seconds whose two floors summed stood within X of the whole run's: {gate}"
               if gate else ""))


def selftest() -> int:
    """The arithmetic on generated stamp logs with known clocks and delays."""
    check = SelfTestChecks()

    t0 = 1_800_000_000 * NS_PER_S
    clocks = {1: VClock.make(0, "0", t0), 2: VClock.make(3_700_000, "45", t0)}
    # 1->2 floor 1000 ns, 2->1 floor 1000 ns, except in second 3 where 2->1's is 1600 ns.
    logs: dict[int, dict] = {1: {}, 2: {}}
    generated = []
    seq = 0
    for sec in range(6):
        for k in range(10):
            for a, b in ((1, 2), (2, 1)):
                seq += 1
                true_send = t0 + sec * NS_PER_S + k * 50_000_000
                delay = (1600 if (sec == 3 and a == 2) else 1000) + 37 * k
                generated.append(delay)
                key = ("forward", a, b, "s", seq, 0)
                logs[a][key + ("tx",)] = {"socket_software": int(clocks[a].at(true_send))}
                logs[b][key + ("rx",)] = {"socket_software": int(clocks[b].at(true_send + delay))}
    d = one_way_delays(logs, clocks, "socket_software")
    check(len(d) == 120, f"every packet matched ({len(d)} of 120)")
    got = sorted(x[3] for x in d)
    check(all(abs(g - w) <= 1 for g, w in zip(got, sorted(generated))),
          "every delay is the generated one within the stamps' whole ns, not the clocks' offset")
    fl = floors_per_second(d, Fraction(t0))
    check(sorted(fl) == list(range(6)), "one row per second")
    check(all(abs(fl[s][(1, 2)] - 1000) <= 1 for s in fl), "1->2's floor is 1000 ns every second (within the stamps' whole ns)")
    check(abs(fl[3][(2, 1)] - 1600) <= 1 and abs(fl[2][(2, 1)] - 1000) <= 1, "2->1's floor rises to 1600 ns in second 3 alone")
    s = summarize(fl, d, Fraction(t0))
    check(s["seconds"] == 6 and abs(s["asymmetry_ns"]["max"] - 300) <= 1 and s["asymmetry_ns"]["p50"] <= 1,
          f"floor asymmetry: 300 ns in one second, ~0 in the others ({s['asymmetry_ns']})")
    check(all(abs(v - 1000) <= 1 for v in s["whole_run_floor_ns"].values()), "the whole run's floors are 1000 ns")
    check(format_summary("socket_software", s).startswith("socket_software: 6 s;"), "the summary line")
    check(floor_summary(logs, clocks, "socket_software", Fraction(t0)) == dict(s, source="socket_software")
          and floor_summary(logs, clocks, "socket_software", None)["seconds"] == 6
          and floor_summary(logs, clocks, "bpf_tc", None) == {"seconds": 0, "source": "bpf_tc"},
          "floor_summary (accuracy_bench's): the same summary, from the first packet without a start, none without stamps")
    roles = delay_by_sender_role(logs, clocks, "socket_software", Fraction(t0), q=0)
    check(set(roles) == {(1, 2, "forward"), (2, 1, "forward")} and all(abs(v - 1000) <= 1 for v in roles.values()),
          f"the fastest packet per direction and kind: 1000 ns ({roles})")
    # Second 3's round trip floor stood 600 ns high: a 500 ns gate drops it.
    g = s["round_trip_floor_gate"]
    check(g[500]["seconds"] == 5 and g[500]["max_ns"] <= 1 and g[200]["seconds"] == 5,
          f"the round-trip floor gate drops the one high second ({g})")
    try:
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"path_floor_selftest_{os.getpid()}.jsonl")
        with open(path, "w") as f:
            f.write('{"type":"forward"}\n')
        read_stamp_log(path)
        check(False, "a line without its keys is refused")
    except ValueError as e:
        check("not a stamp-log line" in str(e), f"a line without its keys is refused ({e})")
    finally:
        os.unlink(path)
    return check.result()


def floor_summary(logs: dict[int, dict], clocks: dict[int, Any], source: str, since_ns: Fraction | None) -> dict:
    """summarize() of the `source` stamps from `since_ns` on (from the first
    packet where None), naming the source; {"seconds": 0} where no packet
    has both its stamps. accuracy_bench records it for every stamp-logged
    2-node scenario, on the fit clocks it read the windows' errors on."""
    d = one_way_delays(logs, clocks, source)
    if not d:
        return {"seconds": 0, "source": source}
    start = since_ns if since_ns is not None else d[0][0]
    return dict(summarize(floors_per_second(d, start), d, start), source=source)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="The path's one-way delay floor per second and direction, from an "
                                             "accuracy_bench scenario run with --stamp-logs")
    ap.add_argument("scenario_dir", nargs="?", help="OUT/<scenario> of accuracy_bench --stamp-logs")
    ap.add_argument("--source", action="append",
                    help="stamp source (repeatable; default: socket_software and bpf_tc, those present)")
    ap.add_argument("--table", action="store_true", help="also print every second's floors")
    ap.add_argument("--selftest", action="store_true", help="check the arithmetic and exit")
    a = ap.parse_args(argv)
    if a.selftest:
        return selftest()
    if not a.scenario_dir:
        ap.error("give a scenario directory (or --selftest)")
    logs = {}
    try:
        for n in (1, 2):
            logs[n] = read_stamp_log(os.path.join(a.scenario_dir, f"agent-n{n}", "stamps.jsonl"))
        clocks = scenario_clocks(a.scenario_dir)
    except (OSError, ValueError) as e:
        print(f"path_floor: {e} (run accuracy_bench with --stamp-logs)", file=sys.stderr)
        return 2
    since = measured_span_start(a.scenario_dir)
    for source in a.source or ["socket_software", "bpf_tc"]:
        d = one_way_delays(logs, clocks, source)
        if not d:
            print(f"{source}: no packet stamped with it on both ends")
            continue
        start = since if since is not None else d[0][0]
        fl = floors_per_second(d, start)
        print(format_summary(source, summarize(fl, d, start)))
        print(format_roles(source, delay_by_sender_role(logs, clocks, source, start)))
        if a.table:
            print("  second  1->2 floor  2->1 floor  asymmetry (ns)")
            for s in sorted(fl):
                f12, f21 = fl[s].get((1, 2)), fl[s].get((2, 1))
                asym = f"{float(f12 - f21) / 2:+.0f}" if f12 is not None and f21 is not None else "-"
                print(f"  {s:6d}  {float(f12 or 0):10.0f}  {float(f21 or 0):10.0f}  {asym:>9}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
