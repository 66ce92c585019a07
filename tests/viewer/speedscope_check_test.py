#!/usr/bin/env python3
"""Self-test of tools/viewer/speedscope_check.py (docs/viewer-check.md).

Writes small trace files into a temp dir and checks what the tool reports for
each, in the real viewer (speedscope in headless Chromium):

  * correctly nested X events: loaded, 0 nesting errors;
  * a child that ends 1 µs after its parent: nesting errors;
  * B/E events ended in the wrong order: nesting errors;
  * the object form with traceEvents and displayTimeUnit: loaded;
  * a legacy bare array with a numeric pid: loaded;
  * a bare array whose pid is a string ("CPU functions"): not loaded, and
    loaded with --number-string-pids;
  * a file that is not JSON: not loaded;
  * a parent and child that end at the same exact decimal instant: written
    as absolute epoch µs (~1.8e15, 6 decimals) a double parse puts the
    child's end 0.125 µs after the parent's, and speedscope reports it; the
    same events relative to a base (small numbers) load with 0 errors;
  * --compare, --screenshot-dir, the exit codes.

Exit 0 pass, 1 fail, 77 skip (no speedscope or chromium:
scripts/install-viewer.sh); under CI (env CI set) a skip is a failure.

  tests/viewer/speedscope_check_test.py [--speedscope DIR] [--chromium PATH] [--keep DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOOL = os.path.join(ROOT, "tools", "viewer", "speedscope_check.py")
sys.path.insert(0, os.path.dirname(TOOL))
sys.path.insert(0, os.path.join(ROOT, "tools", "testbed"))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree

import speedscope_check as sc  # noqa: E402
from ci_rule import skip  # noqa: E402

TRACE_IMPORTER = "Trace Event Format profile"
# 1.8e15 µs lies in [2^50, 2^51): a double there is exact to 0.25 µs only.
EPOCH_US = 1_800_000_000_000_000


def check(cond: bool, what: str, failures: list[str]) -> None:
    print(("  ok    " if cond else "  FAIL  ") + what)
    if not cond:
        failures.append(what)


# ---------------------------------------------------------------- the trace files

def x(name, ts, dur, pid=1, tid=1):
    return {"name": name, "ph": "X", "ts": ts, "dur": dur, "pid": pid, "tid": tid}


def epoch_pair_text(base_us: int) -> str:
    """Parent and child that end at the same decimal instant base+10.0625 µs.

    Written with 6 decimals, as Kineto writes epoch µs. At base 1.8e15 the
    parent's ts (.0625) parses down to .0 and the child's (5.1875) up to
    5.25, so in doubles the child ends at +10.125, after the parent's +10.
    At base 0 every value is exact in binary and both end at 10.0625.
    """
    events = [("parent", "0.062500", "10.000000"), ("child", "5.187500", "4.875000")]
    rows = []
    for name, frac, dur in events:
        whole, decimals = frac.split(".")
        rows.append(f'{{"name": "{name}", "ph": "X", "ts": {base_us + int(whole)}.{decimals}, '
                    f'"dur": {dur}, "pid": 7, "tid": 7}}')
    return '{"traceEvents": [\n  ' + ",\n  ".join(rows) + '\n], "displayTimeUnit": "ns"}\n'


def double_ends(text: str) -> tuple[float, float]:
    """(parent end, child end) as a double-parsing reader sees them."""
    events = {e["name"]: e for e in json.loads(text)["traceEvents"]}
    t0 = min(e["ts"] for e in events.values())  # speedscope subtracts the first ts
    return tuple((events[n]["ts"] - t0) + events[n]["dur"] for n in ("parent", "child"))


def write_cases(tmp: str) -> dict[str, str]:
    docs = {
        "nested": [x("parent", 0, 100), x("child", 10, 50), x("grandchild", 20, 10),
                   x("sibling", 70, 30)],
        "child_late": [x("parent", 0, 100), x("child", 10, 91)],
        "be_mismatch": [{"name": "a", "ph": "B", "ts": 0, "pid": 1, "tid": 1},
                        {"name": "b", "ph": "B", "ts": 1, "pid": 1, "tid": 1},
                        {"name": "a", "ph": "E", "ts": 2, "pid": 1, "tid": 1},
                        {"name": "b", "ph": "E", "ts": 3, "pid": 1, "tid": 1}],
        "object_form": {"traceEvents": [
            {"name": "process_name", "ph": "M", "pid": 3, "tid": 0, "args": {"name": "rank 0"}},
            x("step", 1000.5, 200.25, pid=3, tid=9), x("kernel", 1010.5, 20.75, pid=3, tid=9)],
            "displayTimeUnit": "ms", "schemaVersion": 1},
        "legacy_array": [x("aten::add", 12.5, 3.25, pid=0, tid=0),
                         x("aten::mul", 20.0, 1.5, pid=0, tid=0)],
        "string_pid": [x("aten::add", 12.5, 3.25, pid="CPU functions", tid="0"),
                       x("aten::mul", 20.0, 1.5, pid="CPU functions", tid="0")],
    }
    paths = {}
    for name, doc in docs.items():
        paths[name] = os.path.join(tmp, f"{name}.json")
        with open(paths[name], "w") as f:
            json.dump(doc, f)
    texts = {"not_json": "this is not JSON {\n", "epoch_absolute": epoch_pair_text(EPOCH_US),
             "epoch_relative": epoch_pair_text(0)}
    for name, text in texts.items():
        paths[name] = os.path.join(tmp, f"{name}.json")
        with open(paths[name], "w") as f:
            f.write(text)
    return paths


# ---------------------------------------------------------------- running the tool

def run_tool(argv: list[str], timeout_s: float = 240) -> subprocess.CompletedProcess:
    """Runs the tool; past timeout_s, SIGTERM (it then ends its browsers)."""
    proc = subprocess.Popen([sys.executable, TOOL, *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
        err += f"\n(the tool ran past {timeout_s} s)"
    cp = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    print("  $ speedscope_check.py " + shlex.join(argv) + f"  -> exit {cp.returncode}")
    for line in (cp.stdout + cp.stderr).splitlines():
        print("    | " + line)
    return cp


def png_size(path: str) -> tuple[int, int] | None:
    with open(path, "rb") as f:
        head = f.read(24)
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])


def check_files(paths, common, tmp, failures) -> None:
    out = os.path.join(tmp, "all.json")
    names = ["nested", "child_late", "be_mismatch", "object_form", "legacy_array",
             "string_pid", "not_json", "epoch_absolute", "epoch_relative"]
    cp = run_tool([*common, "--json", out, *(paths[n] for n in names)])
    check(cp.returncode == 1, "a run with files that do not load exits 1", failures)
    if not os.path.exists(out):
        check(False, "--json wrote the results", failures)
        return
    with open(out) as f:
        got = {os.path.basename(r["file"])[:-5]: r for r in json.load(f)["files"]}
    check(sorted(got) == sorted(names), "a result for every file", failures)
    for n in ("nested", "object_form", "legacy_array", "epoch_relative"):
        r = got.get(n, {})
        check(r.get("loaded") and r.get("importer") == TRACE_IMPORTER and r.get("nesting_errors") == 0
              and not r.get("other_errors"), f"{n}: loaded as trace events, 0 nesting errors", failures)
    for n in ("child_late", "be_mismatch", "epoch_absolute"):
        r = got.get(n, {})
        check(r.get("loaded") and r.get("nesting_errors", 0) > 0 and r.get("first_nesting_errors"),
              f"{n}: loaded, {r.get('nesting_errors')} nesting error(s) "
              f"({(r.get('first_nesting_errors') or ['-'])[0]})", failures)
    r = got.get("string_pid", {})
    check(not r.get("loaded") and any("Could not find events" in e for e in r.get("other_errors", [])),
          "string pid: not loaded, 'Could not find events' reported", failures)
    r = got.get("not_json", {})
    check(not r.get("loaded") and r.get("other_errors") and not r.get("timed_out"),
          f"not JSON: not loaded, reported ({(r.get('other_errors') or ['-'])[0]})", failures)
    check(all(not r["timed_out"] and r["fetched"] for r in got.values()),
          "every file fetched by the browser, none timed out", failures)
    walls = [r["wall_s"] for r in got.values()]
    print(f"  wall per file: {min(walls):.2f}..{max(walls):.2f} s, mean {sum(walls) / len(walls):.2f} s")


def check_compare(paths, common, failures) -> None:
    better = run_tool([*common, "--compare", f"{paths['epoch_absolute']}={paths['epoch_relative']}"])
    check(better.returncode == 0 and "ok" in better.stdout,
          "--compare absolute=relative holds (exit 0)", failures)
    worse = run_tool([*common, "--compare", f"{paths['epoch_relative']}={paths['epoch_absolute']}",
                      "--compare", f"{paths['string_pid']}={paths['string_pid']}"])
    check(worse.returncode == 1 and worse.stdout.count("FAIL") == 2,
          "--compare fails on more nesting errors and on an aligned file that does not load",
          failures)


def check_numbered_pids(paths, common, failures) -> None:
    cp = run_tool([*common, "--number-string-pids", paths["string_pid"]])
    check(cp.returncode == 0 and "nesting_errors=0" in cp.stdout,
          "--number-string-pids: a string-pid trace loads, with 0 nesting errors", failures)


def check_screenshot_and_setup(paths, common, tmp, failures) -> None:
    shots = os.path.join(tmp, "shots")
    cp = run_tool([*common, "--screenshot-dir", shots, paths["nested"]])
    pngs = [os.path.join(shots, p) for p in os.listdir(shots)] if os.path.isdir(shots) else []
    check(cp.returncode == 0 and len(pngs) == 1 and png_size(pngs[0]) == (1600, 900),
          "a loaded file exits 0 and --screenshot-dir writes a 1600x900 PNG", failures)
    missing = run_tool(["--speedscope", os.path.join(tmp, "no-such-dir"), paths["nested"]])
    check(missing.returncode == 2 and "install-viewer.sh" in missing.stderr,
          "no speedscope: exit 2 naming scripts/install-viewer.sh", failures)
    usage = run_tool([])
    helped = run_tool(["--help"])
    check(usage.returncode == 2 and helped.returncode == 0 and "--compare" in helped.stdout,
          "no arguments: exit 2; --help: exit 0", failures)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--speedscope", default=sc.DEFAULT_SPEEDSCOPE)
    ap.add_argument("--chromium")
    ap.add_argument("--keep", metavar="DIR", help="write the files here and keep them")
    args = ap.parse_args()
    if sc.release_dir(args.speedscope) is None:
        return skip(f"no speedscope at {args.speedscope} (scripts/install-viewer.sh)")
    if sc.find_chromium(args.chromium) is None:
        return skip("no chromium (scripts/install-viewer.sh)")

    failures: list[str] = []
    parent_end, child_end = double_ends(epoch_pair_text(EPOCH_US))
    rel_parent, rel_child = double_ends(epoch_pair_text(0))
    check(child_end - parent_end == 0.125 and rel_child == rel_parent,
          f"doubles: absolute child ends {child_end - parent_end} µs after its parent; relative equal",
          failures)
    common = ["--speedscope", args.speedscope, "--timeout-s", "120"]
    if args.chromium:
        common += ["--chromium", args.chromium]
    with tempfile.TemporaryDirectory(prefix="speedscope-selftest-") as scratch:
        tmp = args.keep or scratch
        os.makedirs(tmp, exist_ok=True)
        paths = write_cases(tmp)
        check_files(paths, common, tmp, failures)
        check_compare(paths, common, failures)
        check_numbered_pids(paths, common, failures)
        check_screenshot_and_setup(paths, common, tmp, failures)
    if failures:
        print(f"FAIL: {len(failures)} check(s) failed")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
