#!/usr/bin/env python3
"""chronolink soak: a long run of a test-bed cluster under abuse (issue 13).

A routed test bed of --nodes nodes (default 6), one agent per node with its
own virtual clock (node 1 the reference, tools/testbed/trace_workload.py's
default clocks), coordinated through a real etcd-server in the router's
namespace. For the whole run:
  - iperf3 UDP cross traffic around a ring of nodes (i -> i+1) at --cross-traffic;
  - one node (the "flooded" node, 2) gets tools/testbed/probe_forger.py's
    spoofed, predicted and replayed probes from the router, plus a flood of
    random datagrams (random length, random bytes; every fourth starts with
    the wire magic so it reaches the decoder's later checks) at its probe port;
  - one agent (the "victim", the last node: neither the reference nor the
    flooded one) is SIGKILLed every --kill-every-s, at a random phase of the
    window grid, and restarted (at once, or after --down-s); it appends
    to its own output directory (the agent opens edges.jsonl/offsets.jsonl
    for appending, and takes back a directory holding only its own files);
  - etcd is stopped and started again (same data directory) once, at
    --etcd-restart-at-s.
A progress line every --progress-s. At the end it prints and writes
OUT/results.json: every agent's RSS at start (after warm-up; a restarted
agent from its restart) and end, the windows expected vs written per edge
(gaps from --pending-s before a kill of an end of the edge to
--restart-grace-s after its restart are "dead", every other gap is "lost"), crashes (an agent that exited on its own), the solved offsets'
|error| against the exact truth per slice (p50/p99/max), the flood's and the
forger's counters next to the flooded agent's decode/drop counters, and the
etcd restart with the solved-instant gap around it.

Exit status: 0 all checks held; 1 a check failed (solved p99 over
--target-p99-us in a slice, a crash, a lost window, an agent whose RSS grew
more than --max-rss-growth-kb); 2 usage; 77 not root / no namespaces.

  sudo /usr/bin/python3 bench/soak.py [--duration-s 3600] [--out DIR]
  sudo /usr/bin/python3 bench/soak.py --quick          # 3-minute smoke, kill every 60 s
  /usr/bin/python3 bench/soak.py --selftest            # its own arithmetic, no root
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import datetime as _dt
import json
import math
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from typing import Any, Sequence

_HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(_HERE)
sys.path.insert(0, _HERE)
sys.path.insert(0, os.path.join(REPO, "tools", "testbed"))
import accuracy_bench as ab  # noqa: E402
import testbed as tbm  # noqa: E402
import trace_workload as tw  # noqa: E402
from baselines import percentile  # noqa: E402
from truth import VClock  # noqa: E402

DEFAULT_AGENT = os.path.join(REPO, "build", "agent", "chronolink-agent")
FORGER = os.path.join(REPO, "tools", "testbed", "probe_forger.py")
AGENT_PORT = 7319
ETCD_CLIENT_PORT, ETCD_PEER_PORT = 23790, 23791
WIRE_MAGIC = struct.pack("!I", 0x43484C4B)
TBF = ab.TBF


# --------------------------------------------------------------------------
# the random-datagram flood (hidden subcommand, run inside the router's namespace)

def flood(target: str, port: int, pps: float, seconds: float, seed: int | None = None) -> int:
    """Paced random datagrams at target:port; prints one JSON line of counters
    at the end (after `seconds`, or on SIGTERM/SIGINT)."""
    rng = random.Random(seed)
    stats = {"sent": 0, "sent_magic_prefix": 0, "bytes": 0, "send_errors": 0}
    stop = {"flag": False}
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.update(flag=True))
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    print("flood ready", flush=True)
    t0 = time.monotonic()
    end = t0 + seconds
    n = 0
    while not stop["flag"] and time.monotonic() < end:
        # lengths 0..1472 (a full 1500-byte frame); 144, the probe size, 1 in 8
        length = 144 if rng.random() < 0.125 else rng.randint(0, 1472)
        data = rng.randbytes(length)
        if n % 4 == 0 and length >= 4:
            data = WIRE_MAGIC + data[4:]
            stats["sent_magic_prefix"] += 1
        try:
            s.sendto(data, (target, port))
            stats["sent"] += 1
            stats["bytes"] += length
        except OSError:
            stats["send_errors"] += 1
        n += 1
        delay = t0 + n / pps - time.monotonic()
        if delay > 0:
            time.sleep(min(delay, 0.5))
    stats["seconds"] = round(time.monotonic() - t0, 3)
    print(json.dumps(stats), flush=True)
    return 0


def last_json_line(path: str) -> dict | None:
    """The last line of a log that parses as a JSON object (a tool's summary)."""
    try:
        lines = open(path, errors="replace").read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        line = line.strip()
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                d = json.loads(line)
                if isinstance(d, dict):
                    return d
    return None


# --------------------------------------------------------------------------
# arithmetic (checked by --selftest)

def rss_kb(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def rss_summary(incarnations: list[dict]) -> dict:
    """Per node: RSS of each incarnation (samples [(elapsed_s, kB)], those
    before warm-up already dropped) at its start and end, and the largest
    growth of any incarnation."""
    out = []
    for inc in incarnations:
        s = inc.get("samples") or []
        if not s:
            out.append({"spawned_at_s": inc["spawned_at_s"], "start_kb": None, "end_kb": None, "growth_kb": None})
            continue
        # the second half alone: bounded buffers that fill over the first minutes
        # (the leader keeps --window-retention-s of summaries) grow there no more
        mid = s[bisect.bisect_left([t for t, _ in s], (s[0][0] + s[-1][0]) / 2)]
        out.append({"spawned_at_s": inc["spawned_at_s"], "start_kb": s[0][1], "end_kb": s[-1][1],
                    "growth_kb": s[-1][1] - s[0][1], "second_half_growth_kb": s[-1][1] - mid[1],
                    "max_kb": max(k for _, k in s), "from_s": s[0][0], "to_s": s[-1][0], "samples": s})
    growths = [o["growth_kb"] for o in out if o["growth_kb"] is not None]
    halves = [o["second_half_growth_kb"] for o in out if o.get("second_half_growth_kb") is not None]
    return {"incarnations": out, "max_growth_kb": max(growths) if growths else None,
            "max_second_half_growth_kb": max(halves) if halves else None,
            # an incarnation restarted within the warm-up of the end has no samples
            "start_kb": next((o["start_kb"] for o in out if o["start_kb"] is not None), None),
            "end_kb": next((o["end_kb"] for o in reversed(out) if o["end_kb"] is not None), None)}


def expected_windows(clock: VClock, window_ns: int, since_ns: int, until_ns: int) -> list[int]:
    """Start instants (on the node's clock) of the windows lying wholly inside
    the shared-clock span [since, until]: windows are aligned to multiples of
    the window length on the node's own clock (docs/formats.md)."""
    v0, v1 = clock.at(since_ns), clock.at(until_ns)
    k0 = math.ceil(v0 / window_ns)
    k1 = math.floor(v1 / window_ns)   # window k ends at (k+1)W <= v1
    return [k * window_ns for k in range(k0, k1)]


def dead_spans(kills: dict[int, list[list[int]]], pending_s: float, grace_s: float) -> dict[int, list[tuple[int, int]]]:
    """Per node, the shared-clock spans whose windows a kill may cost: from
    `pending_s` before the kill (a window that had closed but was not yet
    written: the agent waits --window-grace-ms for late stamps, then estimates)
    to `grace_s` after the restart (the new incarnation's first window and its
    peers noticing the new session)."""
    p, g = int(pending_s * 1e9), int(grace_s * 1e9)
    return {i: [(k - p, r + g) for k, r in spans] for i, spans in kills.items()}


def overlaps(a0: float, a1: float, spans: list[tuple[float, float]]) -> bool:
    return any(a0 < s1 and s0 < a1 for s0, s1 in spans)


def window_accounting(records: list[dict], clocks: dict[int, VClock], nodes: Sequence[int], window_ns: int,
                      since_ns: int, until_ns: int, dead: dict[int, list[tuple[int, int]]],
                      source: str = "kernel") -> dict:
    """Per directed edge (node -> peer): windows expected in the span, written,
    missing while an end was dead (dead spans in shared-clock ns, already
    widened by the restart grace) and lost otherwise, with the gaps as runs."""
    written: dict[tuple[int, int], set[int]] = {}
    for r in records:
        if r.get("timestamp_source", "kernel") != source:
            continue
        try:
            key = (int(r["node"]), int(r["peer"]))
            written.setdefault(key, set()).add(int(r["window_start_ns"]))
        except (KeyError, TypeError, ValueError):
            continue
    edges: dict[str, dict] = {}
    tot = {"expected": 0, "written": 0, "dead": 0, "lost": 0}
    for a in nodes:
        exp = expected_windows(clocks[a], window_ns, since_ns, until_ns)
        for b in nodes:
            if a == b:
                continue
            have = written.get((a, b), set())
            spans = dead.get(a, []) + dead.get(b, [])
            e = {"expected": len(exp), "written": 0, "dead": 0, "lost": 0, "gaps": []}
            run: dict | None = None
            for w in exp:
                if w in have:
                    e["written"] += 1
                    run = None
                    continue
                t0 = clocks[a].true_time(w)
                t1 = clocks[a].true_time(w + window_ns)
                kind = "dead" if overlaps(float(t0), float(t1), [(float(x), float(y)) for x, y in spans]) else "lost"
                e[kind] += 1
                if run is not None and run["kind"] == kind and run["last_ns"] + window_ns == w:
                    run["windows"] += 1
                    run["last_ns"] = w
                else:
                    run = {"kind": kind, "first_ns": w, "last_ns": w, "windows": 1,
                           "at_s": round(float(t0 - since_ns) / 1e9, 1)}
                    e["gaps"].append(run)
            for k in tot:
                tot[k] += e[k]
            edges[f"{a}->{b}"] = e
    return {"edges": edges, "total": tot}


def merge_solved(per_file: list[list[dict]]) -> list[dict]:
    """Solved errors of several agents' offsets.jsonl (leadership moves): one
    per (instant, node); where two leaders solved the same one, the worse
    |error| counts (conservative)."""
    best: dict[tuple[int, int], dict] = {}
    for lst in per_file:
        for r in lst:
            k = (r["t_ns"], r["node"])
            if k not in best or abs(r["error_ns"]) > abs(best[k]["error_ns"]):
                best[k] = r
    return [best[k] for k in sorted(best)]


def solved_slices(solved: list[dict], ref: VClock, since_ns: int, slice_s: float, target_p99_ns: float) -> list[dict]:
    """|error| p50/p99/max (ns) per slice of the run (by the shared instant of
    each solved instant), with whether the slice's p99 meets the target."""
    by: dict[int, list[float]] = {}
    for r in solved:
        t = float(ref.true_time(r["t_ns"]) - since_ns) / 1e9
        by.setdefault(int(t // slice_s) if t >= 0 else -1, []).append(abs(r["error_ns"]))
    out = []
    for k in sorted(by):
        if k < 0:
            continue
        errs = sorted(by[k])
        p99 = percentile(errs, 99)
        out.append({"slice": k, "from_s": k * slice_s, "to_s": (k + 1) * slice_s, "n": len(errs),
                    "p50_ns": percentile(errs, 50), "p99_ns": p99, "max_ns": errs[-1],
                    "ok": p99 <= target_p99_ns})
    return out


def instant_gap(solved_instants: list[int], around_ns: int, window_ns: int, radius_ns: int) -> dict:
    """The largest gap between consecutive solved instants (reference clock)
    within radius of `around` (the etcd restart, on the reference clock),
    in windows: 1 means no instant missing."""
    ts = sorted(set(solved_instants))
    lo = bisect.bisect_left(ts, around_ns - radius_ns)
    hi = bisect.bisect_right(ts, around_ns + radius_ns)
    sel = ts[lo:hi]
    if len(sel) < 2:
        return {"instants": len(sel), "max_gap_windows": None, "missing_instants": None}
    gaps = [(b - a, a, b) for a, b in zip(sel, sel[1:])]
    g, a, b = max(gaps)
    missing = sum(max(0, round(d / window_ns) - 1) for d, _, _ in gaps)
    return {"instants": len(sel), "max_gap_windows": g / window_ns, "gap_from_ns": a, "gap_to_ns": b,
            "missing_instants": missing}


def read_records(path: str) -> list[dict]:
    recs, _ = ab.read_edges(path)
    return recs


# --------------------------------------------------------------------------
# the run

class Soak:
    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        self.out = a.out
        self.t_start = time.monotonic()
        self.agents: dict[int, dict] = {}
        self.crashes: list[dict] = []
        self.kills: list[dict] = []
        self.dead: dict[int, list[list[int]]] = {}
        self.rss: dict[int, list[dict]] = {}
        self.etcd: subprocess.Popen | None = None
        self.etcd_restart: dict | None = None
        self.helpers: dict[str, subprocess.Popen] = {}
        self.window_ns = int(round(a.window_s * 1e9))

    def el(self) -> float:
        return time.monotonic() - self.t_start

    def log(self, msg: str) -> None:
        print(f"[{self.el():7.1f}s] {msg}", flush=True)

    # ---- etcd
    def etcd_url(self) -> str:
        return f"http://{self.etcd_host}:{ETCD_CLIENT_PORT}"

    def start_etcd(self) -> None:
        data = os.path.join(self.out, "etcd", "data")
        os.makedirs(os.path.dirname(data), exist_ok=True)
        client = self.etcd_url()
        peer = f"http://{self.etcd_host}:{ETCD_PEER_PORT}"
        argv = [self.a.etcd_bin, "--name=default", f"--data-dir={data}",
                f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=default={peer}", "--logger=zap", "--log-outputs=stderr"]
        logf = open(os.path.join(self.out, "etcd", "etcd.log"), "ab")
        self.etcd = self.tb.popen("r", argv, stdout=logf, stderr=subprocess.STDOUT)
        logf.close()
        # healthy within 30 s, asked from inside the router's namespace
        probe = ("import urllib.request,sys;"
                 f"sys.exit(0 if b'true' in urllib.request.urlopen('{client}/health',timeout=2).read() else 1)")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.etcd.poll() is not None:
                raise RuntimeError(f"etcd exited (rc={self.etcd.returncode}); see {self.out}/etcd/etcd.log")
            cp = self.tb.exec("r", [sys.executable, "-c", probe], timeout=10, check=False)
            if cp.returncode == 0:
                return
            time.sleep(0.3)
        raise RuntimeError("etcd not healthy within 30 s")

    def restart_etcd(self) -> None:
        t0 = time.time_ns()
        self.log("etcd: stopping (SIGTERM) and starting again on the same data directory")
        self.tb.terminate(self.etcd, timeout=10.0)
        down_ns = time.time_ns()
        self.start_etcd()
        up_ns = time.time_ns()
        self.etcd_restart = {"at_s": round(self.el(), 1), "stop_ns": t0, "stopped_ns": down_ns, "healthy_ns": up_ns,
                             "down_s": round((up_ns - t0) / 1e9, 2)}
        self.log(f"etcd: healthy again after {self.etcd_restart['down_s']} s")

    # ---- agents
    def spawn(self, i: int) -> None:
        a = self.a
        adir = os.path.join(self.out, f"agent-n{i}")
        argv = [a.agent_bin, "--node-id", str(i), "--cluster-id", "7", "--listen", self.tb.address(i),
                "--port", str(AGENT_PORT), "--key-file", self.key, "--output-dir", adir,
                "--coordination", "etcd", "--etcd-endpoints", self.etcd_url(), "--etcd-prefix", "/soak/",
                "--reference", "1", "--window-s", f"{a.window_s:g}", "--clock-page", "off",
                "--log-level", a.log_level, "--test-mode", *self.clocks_nc[i].agent_args(), *a.agent_arg]
        # the log beside the output directory (the agent hands that directory to its user
        # only if it holds nothing but the agent's files), appended across restarts
        logf = open(os.path.join(self.out, f"agent-n{i}.log"), "ab")
        env = {k: v for k, v in os.environ.items() if not k.startswith("CHRONOLINK_")}
        p = self.tb.popen(i, argv, stdout=logf, stderr=subprocess.STDOUT, env=env)
        logf.close()
        now = self.el()
        self.agents[i] = {"proc": p, "dir": adir, "argv": argv, "spawned_at_s": now}
        self.rss.setdefault(i, []).append({"spawned_at_s": round(now, 1), "pid": p.pid, "samples": []})

    def kill_and_restart(self, i: int, why: str = "scheduled") -> None:
        p = self.agents[i]["proc"]
        t_kill = time.time_ns()
        with contextlib.suppress(ProcessLookupError):
            os.kill(p.pid, signal.SIGKILL)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.log(f"node {i}: still there 10 s after SIGKILL")
        if self.a.down_s > 0:
            time.sleep(self.a.down_s)
        self.spawn(i)
        t_up = time.time_ns()
        self.dead.setdefault(i, []).append([t_kill, t_up])
        self.kills.append({"node": i, "at_s": round(self.el(), 1), "kill_ns": t_kill, "restart_ns": t_up, "why": why})
        self.log(f"node {i}: SIGKILLed and restarted ({why}), pid {self.agents[i]['proc'].pid}")

    def check_crashes(self) -> None:
        for i, ag in self.agents.items():
            rc = ag["proc"].poll()
            if rc is None:
                continue
            t = time.time_ns()
            self.crashes.append({"node": i, "at_s": round(self.el(), 1), "returncode": rc,
                                 "log_tail": tbm_tail(os.path.join(self.out, f"agent-n{i}.log"))})
            self.log(f"CRASH: node {i} exited on its own with status {rc}; restarting it")
            self.spawn(i)
            self.dead.setdefault(i, []).append([t, time.time_ns()])

    def sample_rss(self) -> None:
        for i, ag in self.agents.items():
            if self.el() - ag["spawned_at_s"] < self.a.warmup_s:
                continue
            k = rss_kb(ag["proc"].pid)
            if k is not None:
                self.rss[i][-1]["samples"].append((round(self.el(), 1), k))

    # ---- progress
    def solved_now(self, since_ns: int, until_ns: int) -> list[dict]:
        per = [ab.solved_errors(os.path.join(ag["dir"], "offsets.jsonl"), self.clocks, since_ns, until_ns)
               for ag in self.agents.values()]
        return merge_solved(per)

    def progress(self, since_ns: int) -> None:
        wins = 0
        for ag in self.agents.values():
            with contextlib.suppress(OSError):
                with open(os.path.join(ag["dir"], "edges.jsonl"), "rb") as f:
                    wins += sum(1 for _ in f)
        solved = self.solved_now(since_ns, time.time_ns())
        worst = max((abs(r["error_ns"]) for r in solved), default=None)
        rss = " ".join(f"n{i}={self.rss[i][-1]['samples'][-1][1] // 1024}M" if self.rss[i][-1]["samples"] else f"n{i}=-"
                       for i in sorted(self.agents))
        self.log(f"progress: RSS {rss}; windows written {wins}; solved {len(solved)}, worst |error| "
                 f"{'-' if worst is None else f'{worst / 1000:.3f} us'}; kills {len(self.kills)}, "
                 f"crashes {len(self.crashes)}")

    # ---- main
    def run(self) -> dict:
        a = self.a
        os.makedirs(self.out, exist_ok=True)
        nodes = list(range(1, a.nodes + 1))
        self.victim = a.victim or a.nodes
        self.flooded = a.flooded or 2
        t0_ns = time.time_ns()
        self.clocks_nc = tw.default_clocks(a.nodes, t0_ns)
        self.clocks = {i: VClock.make(c.offset_ns, repr(float(c.drift_ppm)), c.t0_ns) for i, c in self.clocks_nc.items()}
        res: dict[str, Any] = {"started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                               "options": {k: v for k, v in vars(a).items() if k != "func"},
                               "victim": self.victim, "flooded": self.flooded, "reference": 1,
                               "virtual_clocks": {str(i): c.to_dict() for i, c in self.clocks_nc.items()}}
        name = a.name or f"sk{os.getpid() % 100000}"
        with tbm.Testbed(name, nodes=a.nodes, topology="routed", tbf=TBF) as tb, contextlib.ExitStack() as stack:
            self.tb = tb
            self.etcd_host = tb.router["interfaces"][0]["address"]
            self.key = os.path.join(self.out, "cluster.key")
            ab._write_key(self.key)
            self.start_etcd()
            self.log(f"etcd healthy at {self.etcd_url()} (router namespace)")
            cts = []
            if a.cross_traffic and a.cross_traffic != "0":
                for s in nodes:
                    d = s % a.nodes + 1
                    cts.append(stack.enter_context(tb.cross_traffic(s, d, a.cross_traffic)))
            for i in nodes:
                self.spawn(i)
            time.sleep(1.0)
            self.check_crashes()
            # the attack on the flooded node, the whole run
            helper_s = a.duration_s + a.warmup_s + 120
            flog = open(os.path.join(self.out, "forger.log"), "ab")
            self.helpers["forger"] = tb.popen("r", [sys.executable, FORGER, "--sniff", f"veth-n{self.flooded}",
                                                    "--target", tb.address(self.flooded), "--target-id",
                                                    str(self.flooded), "--seconds", str(helper_s)],
                                              stdout=flog, stderr=subprocess.STDOUT)
            flog.close()
            flog = open(os.path.join(self.out, "flood.log"), "ab")
            self.helpers["flood"] = tb.popen("r", [sys.executable, os.path.abspath(__file__), "flood", "--target",
                                                   tb.address(self.flooded), "--port", str(AGENT_PORT),
                                                   "--pps", str(a.flood_pps), "--seconds", str(helper_s)],
                                             stdout=flog, stderr=subprocess.STDOUT)
            flog.close()
            self.log(f"{a.nodes} agents up; cross traffic {a.cross_traffic or 'off'} on a ring; forger and "
                     f"{a.flood_pps:g}/s random flood at node {self.flooded}; node {self.victim} killed every "
                     f"{a.kill_every_s:g} s; etcd restart at {a.etcd_restart_at_s:g} s")
            # warm-up
            end_warm = time.monotonic() + a.warmup_s
            while time.monotonic() < end_warm:
                time.sleep(1.0)
                self.check_crashes()
            since_ns = time.time_ns()
            m0 = time.monotonic()
            self.t_span = m0
            # each kill at a random phase of the window grid: before or after the
            # agent wrote the window that had just closed, mid-window, ...
            rng = random.Random(a.seed)
            next_kill = m0 + a.kill_every_s
            kill_at = next_kill + rng.uniform(0, a.window_s)
            next_progress = m0 + a.progress_s
            etcd_at = m0 + a.etcd_restart_at_s
            end = m0 + a.duration_s
            self.sample_rss()
            while time.monotonic() < end:
                time.sleep(min(1.0, max(0.0, end - time.monotonic())))
                self.check_crashes()
                now = time.monotonic()
                if int(now) % 5 == 0:
                    self.sample_rss()
                if self.etcd_restart is None and now >= etcd_at:
                    self.restart_etcd()
                if now >= kill_at and now < end - a.down_s - 1:
                    self.kill_and_restart(self.victim)
                    next_kill += a.kill_every_s
                    kill_at = next_kill + rng.uniform(0, a.window_s)
                if now >= next_progress:
                    self.progress(since_ns)
                    next_progress += a.progress_s
            until_ns = time.time_ns()
            self.sample_rss()
            # drain: the span's last windows close, are estimated and solved
            drain = a.window_s + 3.0
            self.log(f"span over; {drain:.0f} s for the last windows and solves")
            t_drain = time.monotonic() + drain
            while time.monotonic() < t_drain:
                time.sleep(0.5)
                self.check_crashes()
            final_rc = {}
            self.tb.terminate([ag["proc"] for ag in self.agents.values()], timeout=15.0)
            for i, ag in self.agents.items():
                final_rc[i] = ag["proc"].returncode
            for h in self.helpers.values():
                tb.terminate(h, timeout=5.0)
            res["cross_traffic"] = [ct.stop() for ct in cts]
            tb.terminate(self.etcd, timeout=10.0)
        res["span_ns"] = [since_ns, until_ns]
        res["span_s"] = round((until_ns - since_ns) / 1e9, 1)
        res["final_returncodes"] = {str(i): rc for i, rc in final_rc.items()}
        return self.evaluate(res, nodes, since_ns, until_ns)

    def evaluate(self, res: dict, nodes: list[int], since_ns: int, until_ns: int) -> dict:
        a = self.a
        # RSS
        res["rss"] = {str(i): rss_summary(self.rss[i]) for i in nodes}
        # windows
        dead = dead_spans(self.dead, a.pending_s, a.restart_grace_s)
        recs = []
        for i in nodes:
            recs += read_records(os.path.join(self.out, f"agent-n{i}", "edges.jsonl"))
        res["windows"] = window_accounting(recs, self.clocks, nodes, self.window_ns, since_ns, until_ns, dead)
        res["kills"] = self.kills
        res["crashes"] = self.crashes
        # solved errors
        solved = self.solved_now(since_ns, until_ns)
        target = a.target_p99_us * 1000
        res["solved"] = {"n": len(solved), "target_p99_ns": target,
                         "slices": solved_slices(solved, self.clocks[1], since_ns, a.slice_s, target)}
        errs = sorted(abs(r["error_ns"]) for r in solved)
        if errs:
            res["solved"].update({"p50_ns": percentile(errs, 50), "p99_ns": percentile(errs, 99), "max_ns": errs[-1]})
        # who led (the leader holds the retained windows: its RSS is the largest)
        res["cluster"] = {}
        for i in nodes:
            c = ab.read_agent_stats(os.path.join(self.out, f"agent-n{i}", "agent_stats.json")).get("cluster") or {}
            res["cluster"][str(i)] = {k: c.get(k) for k in ("is_leader", "leader", "leader_changes", "errors")}
            if c.get("is_leader"):
                res["leader"] = i
        # the attack and what the flooded node made of it
        stats = ab.read_agent_stats(os.path.join(self.out, f"agent-n{self.flooded}", "agent_stats.json"))
        res["flood"] = {"random": last_json_line(os.path.join(self.out, "flood.log")),
                        "forger": last_json_line(os.path.join(self.out, "forger.log")),
                        "flooded_agent": {k: stats.get(k) for k in ("decode", "not_for_us", "unknown_sender",
                                                                     "retired_session", "stale_session",
                                                                     "stale_sequence", "duplicate_datagrams",
                                                                     "tap_records", "socket_receive_errors",
                                                                     "uptime_s", "final")}}
        # etcd restart
        if self.etcd_restart:
            ref = self.clocks[1]
            at_ref = int(ref.at(self.etcd_restart["stop_ns"]))
            inst = [r["t_ns"] for r in solved]
            self.etcd_restart["solved_gap"] = instant_gap(inst, at_ref, self.window_ns, 60 * 10**9)
        res["etcd_restart"] = self.etcd_restart
        # verdict
        fails = []
        bad = [s for s in res["solved"]["slices"] if not s["ok"]]
        if bad:
            fails.append(f"solved p99 over {a.target_p99_us} us in {len(bad)} slice(s)")
        if not solved:
            fails.append("no solved offsets")
        if self.crashes:
            fails.append(f"{len(self.crashes)} crash(es)")
        lost = res["windows"]["total"]["lost"]
        if lost:
            fails.append(f"{lost} window(s) lost")
        for i, r in res["rss"].items():
            g = r["max_growth_kb"]
            if g is not None and a.max_rss_growth_kb and g > a.max_rss_growth_kb:
                fails.append(f"node {i} RSS grew {g} kB")
        unclean = {i: rc for i, rc in res.get("final_returncodes", {}).items() if rc != 0}
        if unclean:
            fails.append(f"agents that did not stop cleanly on SIGTERM (status): {unclean}")
        res["failures"] = fails
        res["ok"] = not fails
        return res


def tbm_tail(path: str, n: int = 1500) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - n))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def format_report(res: dict) -> str:
    L = []
    L.append(f"soak: {res['options']['nodes']} nodes, span {res.get('span_s')} s, leader at the end node "
             f"{res.get('leader')}, victim node {res['victim']}, "
             f"flooded node {res['flooded']}")
    L.append("RSS (kB, after warm-up; a restarted agent from its restart):")
    for i, r in res["rss"].items():
        incs = r["incarnations"]
        last = next((o for o in reversed(incs) if o["start_kb"] is not None), {})
        L.append(f"  node {i}{' (leader)' if str(res.get('leader')) == i else ''}: start {r['start_kb']} "
                 f"end {r['end_kb']}; incarnations {len(incs)}, max growth {r['max_growth_kb']} kB, over the "
                 f"second half {r['max_second_half_growth_kb']} kB (last sampled: {last.get('start_kb')} -> "
                 f"{last.get('end_kb')})")
    w = res["windows"]["total"]
    L.append(f"windows: expected {w['expected']}, written {w['written']}, missing while dead {w['dead']}, "
             f"LOST {w['lost']}")
    for e, d in res["windows"]["edges"].items():
        if d["lost"]:
            L.append(f"  {e}: lost {d['lost']} " + ", ".join(f"{g['windows']}@{g['at_s']}s" for g in d["gaps"]
                                                              if g["kind"] == "lost")[:300])
    L.append(f"kills: {len(res['kills'])}; crashes: {len(res['crashes'])}"
             + "".join(f"\n  node {c['node']} at {c['at_s']} s: status {c['returncode']}" for c in res["crashes"]))
    s = res["solved"]
    L.append(f"solved |error| vs truth ({s['n']} node-instants), target p99 <= {s['target_p99_ns'] / 1000:g} us:")
    for sl in s["slices"]:
        L.append(f"  {sl['from_s']:>6.0f}-{sl['to_s']:<6.0f}s n={sl['n']:<5} p50 {sl['p50_ns'] / 1000:.3f} "
                 f"p99 {sl['p99_ns'] / 1000:.3f} max {sl['max_ns'] / 1000:.3f} us {'ok' if sl['ok'] else 'OVER'}")
    if "p99_ns" in s:
        L.append(f"  whole span: p50 {s['p50_ns'] / 1000:.3f} p99 {s['p99_ns'] / 1000:.3f} max {s['max_ns'] / 1000:.3f} us")
    f = res["flood"]
    L.append(f"flood: random {json.dumps(f['random'])}")
    L.append(f"       forger {json.dumps(f['forger'])}")
    fa = f["flooded_agent"]
    L.append(f"       node {res['flooded']} decode {json.dumps(fa.get('decode'))}, duplicates "
             f"{fa.get('duplicate_datagrams')}, retired_session {fa.get('retired_session')}, "
             f"not_for_us {fa.get('not_for_us')}")
    e = res.get("etcd_restart")
    if e:
        g = e.get("solved_gap", {})
        L.append(f"etcd restart at {e['at_s']} s, down {e['down_s']} s; solved instants within 60 s of it: "
                 f"{g.get('instants')}, largest gap {g.get('max_gap_windows')} windows, missing {g.get('missing_instants')}")
    if res.get("cross_traffic"):
        L.append("cross traffic achieved: " + ab.format_load(res["cross_traffic"]))
    L.append("RESULT: " + ("ok" if res["ok"] else "FAILED: " + "; ".join(res["failures"])))
    return "\n".join(L)


# --------------------------------------------------------------------------
# self-test

def selftest(verbose: bool = True) -> int:
    fails = 0

    def check(ok: bool, what: str) -> None:
        nonlocal fails
        if not ok:
            fails += 1
        if verbose or not ok:
            print(f"  {'ok ' if ok else 'FAIL'} {what}")

    W = 2 * 10**9
    T0 = 1_795_000_000_000_000_000
    c1 = VClock.make(0, "0", T0)
    c2 = VClock.make(37_000_000, "80.0", T0)
    # expected windows: 20 s span starting on a grid line of node 1 -> 10 windows;
    # node 2's grid is shifted by 37 ms (+drift), so one window is cut at each end
    e1 = expected_windows(c1, W, T0, T0 + 20 * 10**9)
    check(len(e1) == 10 and e1[0] == T0 and e1[-1] == T0 + 18 * 10**9, f"node-1 windows in 20 s ({len(e1)})")
    e2 = expected_windows(c2, W, T0, T0 + 20 * 10**9)
    check(len(e2) == 9 and e2[0] == T0 + W, f"node-2 windows, shifted grid ({len(e2)})")
    check(all(c2.true_time(w) >= T0 and c2.true_time(w + W) <= T0 + 20 * 10**9 for w in e2),
          "every expected window lies wholly inside the span")
    # accounting: node 1 -> 2 misses windows 3,4 (node 2 dead around them) and 7 (lost);
    # node 2 -> 1 misses nothing
    clocks = {1: c1, 2: c2}
    recs = [{"node": 1, "peer": 2, "timestamp_source": "kernel", "window_start_ns": w}
            for k, w in enumerate(e1) if k not in (3, 4, 7)]
    recs += [{"node": 2, "peer": 1, "timestamp_source": "kernel", "window_start_ns": w} for w in e2]
    recs += [{"node": 1, "peer": 2, "timestamp_source": "userspace", "window_start_ns": e1[7]}]  # other class
    dead = {2: [(T0 + 6 * 10**9 + 500_000_000, T0 + 9 * 10**9)]}
    acc = window_accounting(recs, clocks, [1, 2], W, T0, T0 + 20 * 10**9, dead)
    e12 = acc["edges"]["1->2"]
    check(e12["expected"] == 10 and e12["written"] == 7 and e12["dead"] == 2 and e12["lost"] == 1,
          f"1->2: dead 2, lost 1 ({e12['written']}/{e12['dead']}/{e12['lost']})")
    check([(g["kind"], g["windows"]) for g in e12["gaps"]] == [("dead", 2), ("lost", 1)], "gaps as runs")
    check(acc["edges"]["2->1"]["lost"] == 0 and acc["total"]["lost"] == 1, "2->1 complete; total lost 1")
    # a window of the dead node's own edges counts as dead too
    recs2 = [r for r in recs if not (r["node"] == 2 and r["window_start_ns"] == e2[3])]
    acc2 = window_accounting(recs2, clocks, [1, 2], W, T0, T0 + 20 * 10**9, dead)
    check(acc2["edges"]["2->1"]["dead"] == 1 and acc2["edges"]["2->1"]["lost"] == 0, "dead prober's window is dead")
    # a missing edge is all lost
    acc3 = window_accounting([r for r in recs if r["node"] == 1], clocks, [1, 2], W, T0, T0 + 20 * 10**9, {})
    check(acc3["edges"]["2->1"]["lost"] == 9, "an edge never written: every window lost")
    # a window that closed 0.2 s before the kill (not yet written) is dead, one that
    # closed 2 s before is lost
    ds = dead_spans({2: [[T0 + 12 * 10**9 + 200_000_000, T0 + 13 * 10**9]]}, 1.5, 0.0)
    recs4 = [r for r in recs if not (r["node"] == 1 and r["window_start_ns"] in (e1[3], e1[4], e1[5]))]
    acc4 = window_accounting(recs4, clocks, [1, 2], W, T0, T0 + 20 * 10**9, ds)
    k = [(g["kind"], g["windows"]) for g in acc4["edges"]["1->2"]["gaps"]]
    # windows 3, 4 (2-s windows from 6 s) closed long before: lost; 5 (10-12 s) pending: dead; 7 lost
    check(k == [("lost", 2), ("dead", 1), ("lost", 1)], f"pending window before a kill is dead ({k})")
    # RSS
    r = rss_summary([{"spawned_at_s": 0, "samples": [(30, 10000), (60, 10100), (90, 10050)]},
                     {"spawned_at_s": 100, "samples": [(130, 9000), (160, 9400)]},
                     {"spawned_at_s": 170, "samples": []}])
    check(r["max_growth_kb"] == 400 and r["start_kb"] == 10000 and r["end_kb"] == 9400,
          f"RSS growth per incarnation ({r['max_growth_kb']})")
    check(r["incarnations"][0]["second_half_growth_kb"] == -50 and r["max_second_half_growth_kb"] == 0,
          f"RSS growth over the second half ({r['max_second_half_growth_kb']})")
    # solved: merge and slices
    a = [{"t_ns": 1, "node": 2, "error_ns": 10.0}, {"t_ns": 2, "node": 2, "error_ns": -50.0}]
    b = [{"t_ns": 1, "node": 2, "error_ns": -30.0}]
    m = merge_solved([a, b])
    check(len(m) == 2 and m[0]["error_ns"] == -30.0, "merge keeps the worse of two leaders' solves")
    sol = [{"t_ns": T0 + k * W, "node": 2, "error_ns": (-1) ** k * (100 + k)} for k in range(300)]
    sl = solved_slices(sol, c1, T0, 300.0, 300.0)
    check(len(sl) == 2 and sl[0]["n"] == 150 and sl[1]["n"] == 150, f"5-minute slices ({[s['n'] for s in sl]})")
    check(abs(sl[0]["max_ns"] - 249) < 1e-9 and sl[0]["ok"] and not sl[1]["ok"],
          f"slice max and target ({sl[0]['max_ns']}, p99 {sl[1]['p99_ns']:.1f})")
    check(abs(sl[0]["p50_ns"] - percentile(sorted(100 + k for k in range(150)), 50)) < 1e-9, "slice p50")
    # instant gap around the etcd restart: instants every W, 4 missing
    inst = [T0 + k * W for k in range(60) if not 30 <= k < 34]
    g = instant_gap(inst, T0 + 31 * W, W, 20 * W)
    check(g["missing_instants"] == 4 and g["max_gap_windows"] == 5, f"solved gap around etcd ({g})")
    # flood counters: a short real run against a local sink
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sink:
        sink.bind(("127.0.0.1", 0))
        sink.settimeout(0.2)
        port = sink.getsockname()[1]
        got: list[bytes] = []
        done = threading.Event()

        def drain() -> None:  # read while the flood runs: no receive-buffer overflow
            while True:
                try:
                    got.append(sink.recv(2048))
                except socket.timeout:
                    if done.is_set():
                        return

        th = threading.Thread(target=drain, daemon=True)
        th.start()
        cp = subprocess.run([sys.executable, os.path.abspath(__file__), "flood", "--target", "127.0.0.1",
                             "--port", str(port), "--pps", "500", "--seconds", "0.4", "--seed", "1"],
                            capture_output=True, text=True, timeout=60)
        done.set()  # the flood has exited: what it sent is queued; the drain stops on the next silence
        th.join(timeout=10)
        st = json.loads(cp.stdout.strip().splitlines()[-1])
        lens = {len(d) for d in got}
        magic = sum(d[:4] == WIRE_MAGIC for d in got)
    got = len(got)
    # paced: never more than 500/s (a loaded machine may send fewer)
    check(cp.returncode == 0 and 10 <= st["sent"] <= 201, f"flood paced at 500/s for 0.4 s (sent {st['sent']})")
    check(got == st["sent"] and len(lens) > 20, f"sink got every datagram, {len(lens)} lengths")
    check(magic >= st["sent_magic_prefix"] > 0, f"a quarter start with the wire magic ({st['sent_magic_prefix']})")
    print(f"selftest: {'PASS' if not fails else f'{fails} FAILED'}")
    return 0 if not fails else 1


# --------------------------------------------------------------------------

def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "flood":
        fp = argparse.ArgumentParser(prog="soak.py flood")
        fp.add_argument("--target", required=True)
        fp.add_argument("--port", type=int, default=AGENT_PORT)
        fp.add_argument("--pps", type=float, default=1000)
        fp.add_argument("--seconds", type=float, default=60)
        fp.add_argument("--seed", type=int)
        f = fp.parse_args(argv[1:])
        return flood(f.target, f.port, f.pps, f.seconds, f.seed)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration-s", type=float, default=3600, help="measured span after the warm-up (default 3600)")
    ap.add_argument("--nodes", type=int, default=6)
    ap.add_argument("--kill-every-s", type=float, default=300)
    ap.add_argument("--etcd-restart-at-s", type=float, help="into the span (default: duration/2)")
    ap.add_argument("--cross-traffic", default="50M", help="iperf3 rate of each ring flow i->i+1 (0: none)")
    ap.add_argument("--flood-pps", type=float, default=1000, help="random datagrams per second at the flooded node")
    ap.add_argument("--out", help="output directory (default out/soak-<UTC time>)")
    ap.add_argument("--agent-bin", default=DEFAULT_AGENT)
    ap.add_argument("--agent-arg", action="append", default=[], help="extra agent argument (repeatable)")
    ap.add_argument("--etcd-bin", default=os.environ.get("CHRONOLINK_ETCD_BIN", "/usr/bin/etcd"))
    ap.add_argument("--window-s", type=float, default=2.0)
    ap.add_argument("--warmup-s", type=float, default=30.0, help="before the span, and before a restarted agent's first RSS")
    ap.add_argument("--down-s", type=float, default=0.0,
                    help="how long the killed agent stays dead before its restart (default 0: at once)")
    ap.add_argument("--seed", type=int, help="of the kills' random phase")
    ap.add_argument("--pending-s", type=float, default=1.5,
                    help="windows closed up to this long before a kill count as dead (not yet written)")
    ap.add_argument("--restart-grace-s", type=float, default=10.0,
                    help="windows of a killed agent's edges up to this long after its restart count as dead")
    ap.add_argument("--progress-s", type=float, default=60.0)
    ap.add_argument("--slice-s", type=float, default=300.0)
    ap.add_argument("--target-p99-us", type=float, default=0.3, help="issue 12's solved p99 on a loaded path")
    ap.add_argument("--max-rss-growth-kb", type=int, default=0, help="fail above this growth (0: report only)")
    ap.add_argument("--victim", type=int, help="node killed and restarted (default: the last)")
    ap.add_argument("--flooded", type=int, help="node flooded (default: 2)")
    ap.add_argument("--name", help="test-bed prefix (default sk<pid>)")
    ap.add_argument("--log-level", default="info")
    ap.add_argument("--quick", action="store_true", help="3-minute smoke: kill every 60 s, slices of 60 s")
    ap.add_argument("--selftest", action="store_true")
    a = ap.parse_args(argv)
    if a.selftest:
        return selftest()
    if a.quick:
        a.duration_s, a.kill_every_s, a.slice_s, a.progress_s = 180.0, 60.0, 60.0, 30.0
        a.warmup_s = min(a.warmup_s, 20.0)
    if a.etcd_restart_at_s is None:
        a.etcd_restart_at_s = a.duration_s / 2
    if a.nodes < 3:
        ap.error("--nodes must be at least 3 (reference, flooded and killed nodes differ)")
    victim, flooded = a.victim or a.nodes, a.flooded or 2
    if not (2 <= victim <= a.nodes and 2 <= flooded <= a.nodes and victim != flooded):
        ap.error("--victim and --flooded: distinct nodes other than the reference, node 1")
    if a.kill_every_s <= 0 or a.duration_s <= 0 or a.window_s <= 0:
        ap.error("durations must be positive")
    if os.geteuid() != 0:
        print("soak: needs root (network namespaces)", file=sys.stderr)
        return 77
    for what, path in (("agent", a.agent_bin), ("etcd", a.etcd_bin)):
        if not os.access(path, os.X_OK):
            print(f"soak: no {what} executable at {path}", file=sys.stderr)
            return 2
    a.agent_bin = os.path.abspath(a.agent_bin)
    if not a.out:
        a.out = os.path.join(REPO, "out", "soak-" + time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
    a.out = os.path.abspath(a.out)
    soak = Soak(a)
    try:
        res = soak.run()
    except tbm.TestbedPermissionError as e:
        print(f"soak: {e}", file=sys.stderr)
        return 77
    except KeyboardInterrupt:
        print("soak: interrupted; test bed removed", file=sys.stderr)
        return 130
    # the figures first: an hour's results survive a bug in the report's formatting
    with open(os.path.join(a.out, "results.json.tmp"), "w") as f:
        json.dump(ab._jsonable(res), f, indent=1)
    os.replace(os.path.join(a.out, "results.json.tmp"), os.path.join(a.out, "results.json"))
    report = format_report(res)
    print(report)
    with open(os.path.join(a.out, "report.txt"), "w") as f:
        f.write(report + "\n")
    print(f"written: {a.out}/results.json")
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
