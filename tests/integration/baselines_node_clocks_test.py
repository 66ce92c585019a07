#!/usr/bin/env python3
"""The chronyd and ptp4l baselines on the nodes' own clocks (bench/baselines.py,
docs/testbed.md "Clocks as deployed").

Two test bed nodes, each with its own clock state file: node 2's is 3 ms
ahead of node 1's and runs 40 ppm fast, both with a crystal's wander. A
chronyd server and client (interleaved, 128 samples/s) and a ptp4l master
and slave (16 Syncs/s) run between them under the discipline shim's
wall-only mode. Checked:

  - the daemons measured the node clocks, not the kernel clock every
    namespace shares: their offsets are about 3 ms, not about 0;
  - against the exact truth (the state files' difference at each sample's
    instant) their errors are small: a few us at the median. The truth
    moves 40 us in a second here, so this also checks where a chronyd log
    row is placed within its logged second: placed at the second's start,
    the median error would be about 20 us;
  - chronyd's filtered estimate has the sign of its raw samples once
    negated (statistics.log's "Est offset" has the opposite sign).

Needs root (network namespaces), chronyd, ptp4l, pmc and setpriv: exit 77
(skip) outside CI without them, fails under CI (docs/testbed.md "The CI
rule").
  baselines_node_clocks_test.py --build BUILD_DIR
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tools", "testbed"))
sys.path.insert(0, os.path.join(REPO, "bench"))
import baselines as bl  # noqa: E402
import node_clocks  # noqa: E402
from ci_rule import skip as skip_or_fail  # noqa: E402
from testbed import Testbed  # noqa: E402

NODE2_OFFSET_NS = 3_000_000
NODE2_DRIFT_PPM = 40
FAILS: list[str] = []


def check(cond: bool, msg: str) -> None:
    print(("ok:   " if cond else "FAIL: ") + msg)
    if not cond:
        FAILS.append(msg)


def median_abs_us(values: list[float]) -> float:
    return statistics.median(abs(v) for v in values) / 1e3 if values else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--seconds", type=float, default=12.0, help="how long the daemons are measured")
    a = ap.parse_args()
    if os.geteuid() != 0:
        return skip_or_fail("needs root (network namespaces)")
    missing = [b for b in ("chronyd", "ptp4l", "pmc", "setpriv") if shutil.which(b) is None]
    if missing:
        return skip_or_fail(f"needs {', '.join(missing)}")
    tool = os.path.join(a.build, "tools", "chronolink-testbed-clock")
    shim = os.path.join(a.build, "tools", "libchronolink_discipline_shim.so")
    with tempfile.TemporaryDirectory(prefix="baselines-node-clocks-") as work:
        start = time.time_ns()
        # The test bed's crystals (node_clocks' default wander), no discipline.
        states = {n: node_clocks.make_node_clock("wander", n, off, drift, start, state_dir=work, duration_s=600,
                                                 seed=n, clock_tool=tool).state_file
                  for n, off, drift in ((1, 0, "0"), (2, NODE2_OFFSET_NS, str(NODE2_DRIFT_PPM)))}
        with Testbed("clbnc", nodes=2, topology="direct") as tb:
            chrony = bl.ChronyBaseline(tb, 1, 2, os.path.join(work, "chrony"), clock_states=states, shim=shim,
                                       ntp_port=11123)
            ptp = bl.PtpBaseline(tb, 1, 2, os.path.join(work, "ptp"), clock_states=states, shim=shim)
            try:
                chrony.start()
                ptp.start()
                time.sleep(2.0)  # chronyd's first samples settle its filter
                t0 = time.time_ns()
                time.sleep(a.seconds)
                t1 = time.time_ns()
            finally:
                ptp.stop()
                chrony.stop()
        span = {"since_ns": t0, "until_ns": t1}
        raw, raw_err = chrony.offsets_ns(**span), chrony.errors_ns(**span)
        filt, filt_err = chrony.filtered_offsets_ns(**span), chrony.filtered_errors_ns(**span)
        sync, sync_err = ptp.offsets_ns(**span), ptp.errors_ns(**span)
        motion = chrony.truth_motion(**span)["max_ns"]
        print(f"chronyd raw: {len(raw)} samples, offset median {statistics.median(raw) / 1e3 if raw else 0:.1f} us, "
              f"|error| median {median_abs_us(raw_err):.3f} us; filtered: {len(filt)}, "
              f"|error| median {median_abs_us(filt_err):.3f} us; ptp4l: {len(sync)} Syncs, "
              f"|error| median {median_abs_us(sync_err):.3f} us; the truth moves {motion / 1e3:.1f} us a second")
    check(len(raw) > 100 and len(filt) > 100 and len(sync) > 20,
          f"samples in {a.seconds:.0f} s: chronyd {len(raw)} raw, {len(filt)} filtered; ptp4l {len(sync)} Syncs")
    if FAILS:
        return 1
    # node 2 is 3 ms ahead: chronyd's server-minus-client near -3 ms, ptp4l's slave-minus-master near +3 ms
    check(abs(statistics.median(raw) + NODE2_OFFSET_NS) < 500_000,
          "chronyd measured the node clocks (server minus client about -3 ms), not the kernel's")
    check(abs(statistics.median(sync) - NODE2_OFFSET_NS) < 500_000,
          "ptp4l measured the node clocks (slave minus master about +3 ms), not the kernel's")
    check(abs(motion - NODE2_DRIFT_PPM * 1e3) < 2_000, f"the truth moves about 40 us a second ({motion:.0f} ns)")
    check(median_abs_us(raw_err) < 5.0, "chronyd's raw samples against the truth: median |error| under 5 us")
    check(median_abs_us(filt_err) < 5.0, "chronyd's filtered estimate against the truth: median |error| under 5 us")
    check(median_abs_us(sync_err) < 10.0, "ptp4l's Syncs against the truth: median |error| under 10 us")
    if FAILS:
        print(f"baselines on node clocks: {len(FAILS)} FAILED")
        return 1
    print("baselines on node clocks: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
