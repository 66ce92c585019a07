"""The clock page as a profiler reads it, against the truth (accuracy_bench).

A reader thread copies a node's clock page (include/chronolink/clock_mapping_page.h,
version 2) every few tens of ms, at instants unrelated to the agent's
republishing; afterwards each copy maps the node's REALTIME at its read
instant to the cluster clock, and the error is against the reference node's
true REALTIME there. Integer arithmetic throughout, as the header's
ClockMapping::ToCluster does it.
"""
from __future__ import annotations

import struct
import threading
import time
from typing import Any

# magic, version, seq, node_id, flags, local_ref_ns, offset_ns, drift_ppt,
# uncertainty_ns, uncertainty_growth_ppt, valid_until_ns, published_local_ns,
# published_monotonic_ns
PAGE_FORMAT = "<IIQII8q"
PAGE_MAGIC = 0x434C4D50
PAGE_VERSION = 2
PAGE_VALID = 1


def read_clock_page(path: str, attempts: int = 100) -> dict | None:
    """One consistent copy of the page (the same even seq on two reads), or
    None when there is no page, it is not one of this version, or a writer
    kept it busy."""
    size = struct.calcsize(PAGE_FORMAT)
    for _ in range(attempts):
        try:
            with open(path, "rb") as f:
                a = f.read(size)
                f.seek(0)
                b = f.read(size)
        except OSError:
            return None
        if len(a) < size or a != b:
            continue
        v = struct.unpack(PAGE_FORMAT, a)
        if v[0] != PAGE_MAGIC or v[1] != PAGE_VERSION:
            return None
        if v[2] & 1:
            continue
        keys = ("seq", "node_id", "flags", "local_ref_ns", "offset_ns", "drift_ppt", "uncertainty_ns",
                "uncertainty_growth_ppt", "valid_until_ns")
        return dict(zip(keys, v[2:11]))
    return None


def _trunc_div(num: int, den: int) -> int:
    q = abs(num) // den
    return q if num >= 0 else -q


def to_cluster(page: dict, local_ns: int) -> int:
    dt = local_ns - page["local_ref_ns"]
    return local_ns + page["offset_ns"] + _trunc_div(dt * page["drift_ppt"], 10**12)


def uncertainty_at(page: dict, local_ns: int) -> int:
    return page["uncertainty_ns"] + _trunc_div(abs(local_ns - page["local_ref_ns"]) * page["uncertainty_growth_ppt"],
                                               10**12)


class PageSampler:
    """Copies `path` every `every_s` (true REALTIME of each read kept) until
    stopped."""

    def __init__(self, path: str, every_s: float = 0.037) -> None:
        self.path = path
        self.every_s = every_s
        self.reads: list[tuple[int, dict]] = []
        self.unreadable = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="page-sampler", daemon=True)

    def start(self) -> "PageSampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            t = time.time_ns()
            page = read_clock_page(self.path)
            if page is None:
                self.unreadable += 1
            elif page["flags"] & PAGE_VALID:
                self.reads.append((t, page))


def page_errors(reads: list[tuple[int, dict]], node_clock: Any, reference_clock: Any,
                since_ns: int, until_ns: int, lifetime_ns: int | None = None) -> dict:
    """|page's cluster time - the reference's true REALTIME| at each read
    within [since, until] where the mapping was not stale, ns, and the share
    within the page's own uncertainty there.

    With the agents' solution lifetime (`valid_until_ns` is the solved
    instant's local time + it), also what the reference's own discipline
    did since the solved instant, which no page can know: its REALTIME off
    the tangent at that instant ("reference_abs_ns"), and the error with
    that taken out ("rest_abs_ns")."""
    errs, within, stale, rows, ref_parts, rests, rests_followed = [], 0, 0, [], [], [], []
    for t, page in reads:
        if not since_ns <= t <= until_ns:
            continue
        local = int(node_clock.at(t))  # the node's REALTIME when the reader read it
        if local > page["valid_until_ns"]:
            stale += 1
            continue
        true_cluster = reference_clock.at(node_clock.true_time(local))
        err = to_cluster(page, local) - true_cluster
        rows.append([t, local - page["local_ref_ns"], float(err), page["uncertainty_ns"], page["valid_until_ns"]])
        if lifetime_ns is not None:
            solved = node_clock.true_time(page["valid_until_ns"] - lifetime_ns)
            tangent = reference_clock.at(solved) + (1 + reference_clock.rate_at(solved)) * (t - solved)
            ref_part = reference_clock.at(t) - tangent
            ref_parts.append(abs(float(ref_part)))
            rests.append(abs(float(err + ref_part)))
            if local - page["local_ref_ns"] < 1_000_000_000:  # republished by the agent within a second
                rests_followed.append(rests[-1])
        err = abs(err)
        errs.append(float(err))
        within += err <= uncertainty_at(page, local)
    errs.sort()
    return {"reads": len(errs), "stale": stale, "abs_errors_ns": errs,
            # each read: its true instant, ns since the page's reference, signed error, the page's
            # uncertainty and staleness instant
            "rows": rows,
            "within_uncertainty": within / len(errs) if errs else None,
            "reference_abs_ns": sorted(ref_parts), "rest_abs_ns": sorted(rests),
            "rest_followed_abs_ns": sorted(rests_followed)}
