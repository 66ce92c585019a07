#!/usr/bin/env python3
"""The discipline shim (tools/testbed/discipline_shim/) against its state file
and against a real chronyd (docs/testbed.md "Clocks as deployed").

  1. Without CHRONOLINK_CLOCK_STATE a program under the shim refuses to run.
  2. Through the shim, in a child python3 (ctypes): clock_gettime reads the
     node's clocks; adjtimex ADJ_FREQUENCY, ADJ_TICK and ADJ_SETOFFSET and
     settimeofday land in the state file as the knots they mean; ADJ_OFFSET
     with STA_PLL drives the emulated kernel PLL (a knot a second);
     ADJ_SETOFFSET clears maxerror as the kernel does.
  3. A real chronyd under the shim, without CAP_SYS_TIME, against an
     unshimmed chronyd serving the kernel's time on loopback, steps the node
     clock (offset -7.5 ms, drift -30 ppm, wander) onto true time and then
     keeps it within 50 us: so it reads, steers and timestamps through the
     file, never the kernel.
  3b. In wall-only mode (a program that only stamps: the demo's PyTorch
     ranks) REALTIME is the node's, MONOTONIC and MONOTONIC_RAW the
     kernel's (a deadline computed from them is one the kernel reaches: a
     0.2 s time.sleep takes 0.2 s), and adjtimex and settimeofday fail with
     EPERM and write nothing.
  4. The timesyncd model (tools/testbed/timesync_client.py) under the shim
     steps a clock 600 ms off, then slews it through the emulated PLL: rate
     changes a second apart, the clock within 5 ms of true time.

Needs root (chronyd) and chronyd: exit 77 (skip) outside CI without them,
fails under CI (docs/testbed.md "The CI rule").
  discipline_shim_test.py --build BUILD_DIR
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tools", "testbed"))
from ci_rule import skip as skip_or_fail  # noqa: E402
from clock_trajectory import FINE_PER_NS, NodeClockState  # noqa: E402

CHILD = r'''
import ctypes, sys, time
sys.path.insert(0, sys.argv[1])
from timex import (LIBC as libc, Timeval, Timex, ADJ_OFFSET, ADJ_FREQUENCY, ADJ_MAXERROR, ADJ_TICK,
                   ADJ_SETOFFSET, ADJ_NANO, ADJ_STATUS, ADJ_TIMECONST, STA_PLL, STA_NANO)
def adj(**kw):
    tx = Timex()
    for k, v in kw.items():
        if k == "sec": tx.time.tv_sec = v
        elif k == "sub": tx.time.tv_usec = v
        else: setattr(tx, k, v)
    r = libc.adjtimex(ctypes.byref(tx))
    return r, ctypes.get_errno(), tx
class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]
def real_ns():  # the kernel's clock, past the shim (SYS_clock_gettime on x86-64 and arm64)
    ts = Timespec()
    libc.syscall(228 if ctypes.sizeof(ctypes.c_void_p) == 8 and __import__("platform").machine() == "x86_64"
                 else 113, 0, ctypes.byref(ts))
    return ts.tv_sec * 10**9 + ts.tv_nsec
out = []
before = real_ns()
node = (time.time_ns(), time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW))
out.append(("clocks", before, node[0], node[1], real_ns()))
r, e, tx = adj(modes=ADJ_FREQUENCY, freq=655360)          # +10 ppm
out.append(("freq", r, time.time_ns()))
r, e, tx = adj(modes=ADJ_TICK, tick=10001)                 # +100 ppm more
out.append(("tick", r, time.time_ns()))
r, e, tx = adj(modes=ADJ_MAXERROR, maxerror=0)
r, e, tx = adj(modes=ADJ_SETOFFSET | ADJ_NANO, sec=-1, sub=999_000_000)  # -1 ms
out.append(("setoffset", r, tx.maxerror, time.time_ns()))
r, e, tx = adj(modes=ADJ_OFFSET, offset=5000)                # STA_PLL off: no effect
out.append(("pll_off", r, tx.offset))
tv = Timeval(); libc.gettimeofday(ctypes.byref(tv), None)
target = Timeval(tv.tv_sec + 2, tv.tv_usec)
r = libc.settimeofday(ctypes.byref(target), None)
out.append(("settimeofday", r, time.time_ns()))
before_pll = real_ns()
r, e, tx = adj(modes=ADJ_STATUS | ADJ_TIMECONST | ADJ_OFFSET | ADJ_NANO, status=STA_PLL | STA_NANO,
               constant=0, offset=1_000_000)                 # the kernel PLL slews +1 ms
r2, e2, tx2 = adj(modes=0)
out.append(("pll_on", r, e, before_pll, tx2.offset, tx2.status, tx2.constant))
print(repr(out))
'''


def fail(msg: str) -> None:
    print(f"FAILED: {msg}")
    sys.exit(1)


def check(cond: bool, msg: str) -> None:
    if not cond:
        fail(msg)
    print(f"ok: {msg}")


def create_state(tool: str, path: str, **kw) -> None:
    args = [tool, "create", path, "--node", "1", "--duration-s", "900"]
    for k, v in kw.items():
        args += ["--" + k.replace("_", "-"), str(v)]
    subprocess.run(args, check=True, capture_output=True, timeout=30)


def shim_calls(build: str, tool: str, work: str) -> None:
    shim = os.path.join(build, "tools", "libchronolink_discipline_shim.so")
    r = subprocess.run([sys.executable, "-c", "print(1)"], env=dict(os.environ, LD_PRELOAD=shim),
                       capture_output=True, text=True, timeout=30)
    check(r.returncode == 2 and "CHRONOLINK_CLOCK_STATE is not set" in r.stderr,
          "without a state file a program under the shim refuses to run")
    state = os.path.join(work, "calls.clock")
    create_state(tool, state, offset_ns=5_000_000, drift_ppm=20)
    env = dict(os.environ, LD_PRELOAD=shim, CHRONOLINK_CLOCK_STATE=state)
    r = subprocess.run([sys.executable, "-c", CHILD, os.path.join(REPO, "tools", "testbed")], env=env,
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        fail(f"the child under the shim failed: {r.stderr.strip()}")
    out = {row[0]: row for row in eval(r.stdout)}  # noqa: S307 (our own child's repr)
    node = NodeClockState.load(state)
    _, before, realtime, raw, after = out["clocks"]
    check(node.realtime_at(before) <= realtime <= node.realtime_at(after),
          "REALTIME reads the node's clock as the state file has it (+5 ms, +20 ppm)")
    check(node.raw_at(before) <= raw <= node.raw_at(after), "MONOTONIC_RAW reads the oscillator")
    knots = node.correction.knots
    slopes = [k.slope for k in knots]
    check(slopes[1] == 10_000 * 10**6 and slopes[2] == 110_000 * 10**6,
          f"ADJ_FREQUENCY +10 ppm then ADJ_TICK +1 are the correction's slopes (fine/ns): {slopes[:3]}")
    steps = [d for d in (node._steps[i] - node._steps[i - 1] for i in range(1, len(knots))) if d != 0]
    check(len(steps) == 2 and steps[0] == -1_000_000 * FINE_PER_NS, "ADJ_SETOFFSET of -1 ms is a -1 ms step")
    check(out["setoffset"][1] >= 0 and out["setoffset"][2] == 16_000_000,
          "ADJ_SETOFFSET clears maxerror as the kernel does (chronyd's probe)")
    check(out["pll_off"][1] >= 0 and out["pll_off"][2] == 0, "ADJ_OFFSET without STA_PLL is taken and does nothing")
    check(abs(steps[1] - 2 * 10**9 * FINE_PER_NS) < 10**6 * FINE_PER_NS,
          "settimeofday(+2 s) is a step of about 2 s")
    check(node.realtime_at(time.time_ns()) - time.time_ns() > 1_900_000_000,
          "the truth file says the node's clock is now about 2 s ahead")
    # The kernel PLL, time constant 0 (shift 2): each second of the node clock
    # slews a quarter of the phase left, so the rates written ahead add up to
    # the whole 1 ms, over about 120 seconds.
    _, r, e, before_pll, left, status, constant = out["pll_on"]
    check(r >= 0 and 990_000 <= left <= 1_000_000 and status & 0x1 and constant == 0,
          f"ADJ_OFFSET with STA_PLL is taken and read back ({left} ns left, constant {constant})")
    pll = [k for k in knots if k.t_ns >= before_pll]
    slewed = sum((a.slope - pll[-1].slope) * (b.t_ns - a.t_ns) for a, b in zip(pll, pll[1:])) / FINE_PER_NS
    check(100 <= len(pll) <= 200, f"{len(pll)} knots written ahead, one a second until the chunk is 0")
    gaps = [(b.t_ns - a.t_ns) / 1e9 for a, b in zip(pll[1:], pll[2:])]
    check(all(abs(g - 1) < 1e-3 for g in gaps), "one knot at each second of the node clock")
    check(abs(slewed - 1_000_000) < 1_000, f"the PLL's rates slew {slewed:.0f} ns of the 1 ms asked")


def wall_only(build: str, tool: str, work: str) -> None:
    shim = os.path.join(build, "tools", "libchronolink_discipline_shim.so")
    state = os.path.join(work, "wall.clock")
    create_state(tool, state, offset_ns=-40_000_000, drift_ppm=-50)
    knots_before = len(NodeClockState.load(state).correction.knots)
    child = CHILD.split("out = []")[0] + r'''
t = time.monotonic(); time.sleep(0.2); slept = time.monotonic() - t
before = real_ns()
wall = time.time_ns()
after = real_ns()
mono = (real_ns_of(1), time.clock_gettime_ns(time.CLOCK_MONOTONIC), real_ns_of(1))
rawc = (real_ns_of(4), time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW), real_ns_of(4))
r, e, tx = adj(modes=ADJ_FREQUENCY, freq=655360)
tv = Timeval(); libc.gettimeofday(ctypes.byref(tv), None)
r2 = libc.settimeofday(ctypes.byref(tv), None); e2 = ctypes.get_errno()
print(repr((slept, before, wall, after, mono, rawc, r, e, r2, e2)))
'''
    child = child.replace("def real_ns():", """def real_ns_of(clock):
    ts = Timespec()
    libc.syscall(228 if ctypes.sizeof(ctypes.c_void_p) == 8 and __import__("platform").machine() == "x86_64"
                 else 113, clock, ctypes.byref(ts))
    return ts.tv_sec * 10**9 + ts.tv_nsec
def real_ns():""")
    env = dict(os.environ, LD_PRELOAD=shim, CHRONOLINK_CLOCK_STATE=state, CHRONOLINK_CLOCK_STATE_WALL_ONLY="1")
    r = subprocess.run([sys.executable, "-c", child, os.path.join(REPO, "tools", "testbed")], env=env,
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        fail(f"the wall-only child under the shim failed: {r.stderr.strip()}")
    slept, before, wall, after, mono, rawc, r1, e1, r2, e2 = eval(r.stdout)  # noqa: S307 (our own child's repr)
    node = NodeClockState.load(state)
    check(node.realtime_at(before) <= wall <= node.realtime_at(after),
          "wall-only: REALTIME reads the node's clock (-40 ms, -50 ppm)")
    check(mono[0] <= mono[1] <= mono[2] and rawc[0] <= rawc[1] <= rawc[2],
          "wall-only: MONOTONIC and MONOTONIC_RAW are the kernel's")
    check(0.19 <= slept < 2.0, f"wall-only: a 0.2 s time.sleep returns ({slept:.3f} s)")
    check(r1 == -1 and e1 == 1 and r2 == -1 and e2 == 1, "wall-only: adjtimex and settimeofday fail with EPERM")
    check(len(node.correction.knots) == knots_before, "wall-only: nothing written to the state file")


def stop(procs: list) -> None:
    """Terminates each process group, then kills what is left after 10 s."""
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)


def chronyd_run(build: str, tool: str, work: str, seconds: float) -> None:
    shim = os.path.join(build, "tools", "libchronolink_discipline_shim.so")
    state = os.path.join(work, "chronyd.clock")
    create_state(tool, state, offset_ns=-7_500_000, drift_ppm=-30, white_fm_adev=5e-9,
                 random_walk_fm_adev=2e-11)
    common = "cmdport 0\nbindcmdaddress /\n"
    sconf, cconf = os.path.join(work, "server.conf"), os.path.join(work, "client.conf")
    with open(sconf, "w") as f:
        f.write(f"local stratum 1\nallow 127.0.0.1\nport 11323\npidfile {work}/server.pid\n" + common)
    with open(cconf, "w") as f:
        f.write("server 127.0.0.1 port 11323 iburst xleave minpoll -2 maxpoll -2\nmakestep 0.001 3\n"
                f"port 0\npidfile {work}/client.pid\nlogdir {work}\nlog tracking\n" + common)
    procs = []
    try:
        procs.append(subprocess.Popen(["chronyd", "-x", "-d", "-u", "root", "-f", sconf],
                                      stdout=open(os.path.join(work, "server.out"), "wb"),
                                      stderr=subprocess.STDOUT, start_new_session=True))
        env = dict(os.environ, LD_PRELOAD=shim, CHRONOLINK_CLOCK_STATE=state)
        procs.append(subprocess.Popen(["setpriv", "--bounding-set", "-sys_time", "--inh-caps", "-sys_time",
                                       "chronyd", "-d", "-u", "root", "-f", cconf], env=env,
                                      stdout=open(os.path.join(work, "client.out"), "wb"),
                                      stderr=subprocess.STDOUT, start_new_session=True))
        errors = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            time.sleep(1.0)
            for p in procs:
                if p.poll() is not None:
                    with open(os.path.join(work, "client.out"), errors="replace") as f:
                        fail(f"a chronyd exited ({p.returncode}): {f.read()[-400:]}")
            t = time.time_ns()
            errors.append(NodeClockState.load(state).realtime_at(t) - t)
    finally:
        stop(procs)
    node = NodeClockState.load(state)
    print(f"node clock - true time, once a second: {errors}")
    check(len(node.correction.knots) > 10, f"chronyd changed the clock {len(node.correction.knots) - 1} times")
    check(abs(errors[0]) > 1_000_000 or any(abs(s) > 10**6 * FINE_PER_NS for s in node._steps),
          "the clock started 7.5 ms off, and chronyd stepped it")
    late = errors[len(errors) // 2:]
    check(all(abs(e) < 50_000 for e in late), f"chronyd then keeps it within 50 us of true time: {late}")


def timesyncd_run(build: str, tool: str, work: str, seconds: float) -> None:
    """The timesyncd model (tools/testbed/timesync_client.py) under the shim:
    it steps a clock 600 ms off (beyond timesyncd's 0.4 s), then tells the
    emulated kernel PLL each offset, which slews with a rate change every
    second."""
    shim = os.path.join(build, "tools", "libchronolink_discipline_shim.so")
    state = os.path.join(work, "timesyncd.clock")
    create_state(tool, state, offset_ns=600_000_000, drift_ppm=12, white_fm_adev=5e-9,
                 random_walk_fm_adev=2e-11)
    sconf = os.path.join(work, "server2.conf")
    with open(sconf, "w") as f:
        f.write(f"local stratum 1\nallow 127.0.0.1\nport 11324\npidfile {work}/server2.pid\n"
                "cmdport 0\nbindcmdaddress /\n")
    polls = os.path.join(work, "polls.jsonl")
    procs = []
    try:
        procs.append(subprocess.Popen(["chronyd", "-x", "-d", "-u", "root", "-f", sconf],
                                      stdout=open(os.path.join(work, "server2.out"), "wb"),
                                      stderr=subprocess.STDOUT, start_new_session=True))
        time.sleep(1.0)  # the server's socket
        env = dict(os.environ, LD_PRELOAD=shim, CHRONOLINK_CLOCK_STATE=state)
        procs.append(subprocess.Popen(["setpriv", "--bounding-set", "-sys_time", "--inh-caps", "-sys_time",
                                       "/usr/bin/python3", os.path.join(REPO, "tools", "testbed", "timesync_client.py"),
                                       "--server", "127.0.0.1", "--port", "11324", "--poll-s", "2", "--log", polls],
                                      env=env, stdout=open(os.path.join(work, "timesync.out"), "wb"),
                                      stderr=subprocess.STDOUT, start_new_session=True))
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            time.sleep(0.5)
            for p in procs:
                if p.poll() is not None:
                    with open(os.path.join(work, "timesync.out"), errors="replace") as f:
                        fail(f"the timesyncd model or its server exited ({p.returncode}): {f.read()[-400:]}")
    finally:
        stop(procs)
    with open(polls) as f:
        entries = [json.loads(line) for line in f if line.strip()]
    actions = [e.get("action") for e in entries]
    print(f"timesyncd model: {len(entries)} polls, offsets (us): "
          f"{[round(e['offset_ns'] / 1e3) for e in entries if 'offset_ns' in e]}")
    check(actions[:1] == ["step"], f"600 ms off: timesyncd steps first ({actions[:3]})")
    check(actions.count("slew") >= 3, f"then it slews through the kernel PLL ({actions})")
    node = NodeClockState.load(state)
    check(any(abs(s) > 500_000_000 * FINE_PER_NS for s in node._steps), "the step reached the clock")
    # The PLL changes the rate at each second it slews: knots about 1 s apart.
    t = [k.t_ns for k in node.correction.knots]
    seconds_apart = sum(1 for a, b in zip(t, t[1:]) if abs((b - a) / 1e9 - 1) < 0.01)
    check(seconds_apart >= 5, f"{seconds_apart} rate changes one second apart (the PLL's)")
    now = time.time_ns()
    check(abs(node.realtime_at(now) - now) < 5_000_000,
          f"the clock ends within 5 ms of true time ({(node.realtime_at(now) - now) / 1e6:.3f} ms)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--seconds", type=float, default=20.0, help="how long chronyd runs")
    a = ap.parse_args()
    if os.geteuid() != 0:
        return skip_or_fail("needs root (chronyd)")
    if shutil.which("chronyd") is None or shutil.which("setpriv") is None:
        return skip_or_fail("needs chronyd and setpriv")
    tool = os.path.join(a.build, "tools", "chronolink-testbed-clock")
    with tempfile.TemporaryDirectory(prefix="discipline-shim-") as work:
        shim_calls(a.build, tool, work)
        wall_only(a.build, tool, work)
        chronyd_run(a.build, tool, work, a.seconds)
        timesyncd_run(a.build, tool, work, 15.0)
    print("discipline shim: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
