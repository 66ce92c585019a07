#!/usr/bin/env python3
"""Runs a ctest selection with one process per GoogleTest executable.

ctest runs each test that gtest_discover_tests registered as a process of
its own (`exe --gtest_filter=Suite.Name`). Under qemu-user (the arm64 stage,
scripts/test-arm64.sh) starting one costs about 0.15 core-seconds, and the
unit tests are about a thousand: a quarter of that stage's CPU went to
starting processes. This runs every discovered test of one executable in one
process instead (`--gtest_filter=A.B:C.D:...`), reads each test's verdict
from GoogleTest's own result lines, and runs through ctest, one by one and
with ctest's own timeout, whatever a batch left undecided: the tests after a
crash or a timeout, and the tests ctest did not get from
gtest_discover_tests (plain add_test commands). Tests with a COST (the long
ones) run one per process, first.

  scripts/ctest-batched.py BUILD_DIR [--jobs N] [--timeout S] -- CTEST_SELECTION...

CTEST_SELECTION is what picks the tests on a ctest command line (-L unit
-LE host_only -E regex). It prints one line per batch, each failed test's
output, and ends as ctest does ("N% tests passed, F tests failed out of T",
"The following tests FAILED:"), so that a log reads the same. Exits 0 when
every test passed or skipped, 1 otherwise, 2 on a usage error.
"""

import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import time

GTEST_FILTER = "--gtest_filter="
RESULT_LINE = re.compile(r"^\[ +(OK|FAILED|SKIPPED) +\] ([^ ,]+)(, where .*)? \(\d+ ms\)$")
RUN_LINE = re.compile(r"^\[ RUN +\] (\S+)$")


def selected_tests(build_dir, selection):
    """ctest's own list: name, command, working directory, batch key."""
    out = subprocess.run(["ctest", "--show-only=json-v1", *selection], cwd=build_dir, capture_output=True,
                         text=True, timeout=120)
    if out.returncode != 0:
        sys.exit(f"ctest-batched: ctest --show-only failed: {out.stderr.strip()}")
    tests = []
    for t in json.loads(out.stdout)["tests"]:
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        command = t.get("command", [])
        filters = [a for a in command if a.startswith(GTEST_FILTER)]
        # Batchable: what gtest_discover_tests writes, nothing else that
        # could make one test's run differ from another's.
        batchable = (len(filters) == 1 and set(props) <= {"LABELS", "WORKING_DIRECTORY", "SKIP_REGULAR_EXPRESSION", "COST"}
                     and filters[0][len(GTEST_FILTER):] == t["name"])
        key = None
        # Tests with a COST (tests/CMakeLists.txt: thousands of generated
        # inputs each) are the longest: each has a process of its own,
        # started first, so that none of them is left to run alone at the end.
        long_running = float(props.get("COST", 0)) > 0
        if batchable:
            key = (tuple(a for a in command if not a.startswith(GTEST_FILTER)), props.get("WORKING_DIRECTORY", build_dir),
                   t["name"] if long_running else "")
        tests.append({"name": t["name"], "key": key})
    return tests


def run_batch(key, names, timeout):
    """One process for `names`; returns (verdicts, undecided, output, seconds, status)."""
    command, cwd, _ = key
    started = time.monotonic()
    status = None
    try:
        proc = subprocess.run([*command, GTEST_FILTER + ":".join(names), "--gtest_color=no"], cwd=cwd,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        output = proc.stdout.decode(errors="replace")
        status = proc.returncode
    except subprocess.TimeoutExpired as e:
        output = (e.stdout or b"").decode(errors="replace") + f"\nctest-batched: timed out after {timeout} s\n"
    verdicts, current, lines = {}, None, {}
    for line in output.splitlines():
        m = RUN_LINE.match(line)
        if m:
            current = m.group(1)
            lines[current] = []
        if current is not None:
            lines[current].append(line)
        m = RESULT_LINE.match(line)
        if m and m.group(2) in lines:
            verdicts[m.group(2)] = m.group(1)
            current = None
    undecided = [n for n in names if n not in verdicts]
    # A process that failed although every test it ran passed (a crash in a
    # destructor, a sanitizer's report at exit) fails its last test.
    if status not in (0, None) and not undecided and all(v != "FAILED" for v in verdicts.values()):
        verdicts[names[-1]] = "FAILED"
        lines.setdefault(names[-1], []).append(f"ctest-batched: the process exited {status} after its tests")
    return verdicts, undecided, {n: "\n".join(lines.get(n, [])) for n in names}, time.monotonic() - started, status


def run_one_by_one(build_dir, names, timeout):
    """ctest itself for `names`: its verdicts, its own per-test timeout."""
    if not names:
        return {}
    regex = "^(" + "|".join(re.escape(n) for n in names) + ")$"
    proc = subprocess.run(["ctest", "--output-on-failure", "--timeout", str(timeout), "-R", regex], cwd=build_dir,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout * len(names) + 120)
    print(proc.stdout, end="")
    verdicts = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"^\s*\d+/\d+ Test\s+#\d+: (\S+) \.+\**\s*(\w[\w ]*?)\s+[\d.]+ sec", line)
        if m:
            word = m.group(2)
            verdicts[m.group(1)] = "OK" if word == "Passed" else "SKIPPED" if word.startswith("Skipped") else "FAILED"
    for n in names:
        verdicts.setdefault(n, "FAILED")
    return verdicts


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build_dir")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes at once (default: cores)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds for one batch, and for one test alone")
    parser.add_argument("selection", nargs=argparse.REMAINDER, help="-- then ctest's selection arguments")
    args = parser.parse_args()
    selection = args.selection[1:] if args.selection[:1] == ["--"] else args.selection
    if args.jobs < 1 or args.timeout < 1:
        parser.error("--jobs and --timeout must be positive")

    started = time.monotonic()
    tests = selected_tests(args.build_dir, selection)
    batches, alone = {}, []
    for t in tests:
        if t["key"] is None:
            alone.append(t["name"])
        else:
            batches.setdefault(t["key"], []).append(t["name"])
    print(f"ctest-batched: {len(tests)} tests: {len(batches)} executables, one process each; {len(alone)} through ctest",
          flush=True)

    verdicts, outputs = {}, {}
    # The long tests first, then the largest batches, so that the last to
    # finish are short.
    order = sorted(batches.items(), key=lambda kv: (kv[0][2] == "", -len(kv[1])))
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(run_batch, key, names, args.timeout): (key, names) for key, names in order}
        for future in concurrent.futures.as_completed(futures):
            key, names = futures[future]
            got, undecided, text, seconds, status = future.result()
            verdicts.update(got)
            outputs.update(text)
            alone.extend(undecided)
            note = f", {len(undecided)} undecided (exit {status}): run one by one" if undecided else ""
            executable = [a for a in key[0] if not a.startswith("-")][-1]
            print(f"ctest-batched: {os.path.basename(executable)}: {len(names)} tests in {seconds:.1f} s{note}",
                  flush=True)
    verdicts.update(run_one_by_one(args.build_dir, alone, args.timeout))

    failed = sorted(n for n, v in verdicts.items() if v == "FAILED")
    skipped = sorted(n for n, v in verdicts.items() if v == "SKIPPED")
    for n in failed:
        if outputs.get(n):
            print(f"\n---- {n} (Failed)\n{outputs[n]}")
    for n in skipped:
        print(f"        {n} (Skipped)")
    total = len(tests)
    passed_share = 100 if total == 0 else int(100 * (total - len(failed)) / total)
    print(f"\n{passed_share}% tests passed, {len(failed)} tests failed out of {total}")
    print(f"\nTotal Test time (real) = {time.monotonic() - started:.2f} sec")
    if failed:
        print("\nThe following tests FAILED:")
        for i, n in enumerate(failed, 1):
            print(f"\t{i:4d} - {n} (Failed)")
    return 1 if failed or total == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
