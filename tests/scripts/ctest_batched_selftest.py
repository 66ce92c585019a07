#!/usr/bin/env python3
"""Self-test of scripts/ctest-batched.py against a real GoogleTest program.

Writes a ctest directory whose tests are what gtest_discover_tests registers
(one `exe --gtest_filter=Suite.Name` per test) for tests/scripts/
batched_fixture_test.cc, then runs the batch runner on it three times:
every test passing (one is a skip), one failing, one crashing (abort) with
tests after it. Checks its exit status, its summary line, which tests it
names failed and skipped, and that the tests after a crash still ran.

  ctest_batched_selftest.py FIXTURE_EXECUTABLE
"""

import os
import re
import subprocess
import sys
import tempfile

RUNNER = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "ctest-batched.py")
TESTS = ["BatchedFixture.Passes", "BatchedFixture.Skips", "BatchedFixture.FailsWhenAsked",
         "BatchedFixture.CrashesWhenAsked", "Values/BatchedFixtureParam.PassesForEveryValue/0",
         "Values/BatchedFixtureParam.PassesForEveryValue/1", "BatchedFixture.RunsAfterTheCrash"]


def write_ctest_dir(directory, executable):
    lines = []
    for name in TESTS:
        lines.append(f'add_test([=[{name}]=] "{executable}" "--gtest_filter={name}" "--gtest_also_run_disabled_tests")')
        lines.append(f'set_tests_properties([=[{name}]=] PROPERTIES LABELS unit WORKING_DIRECTORY "{directory}" '
                     r'SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")')
    with open(os.path.join(directory, "CTestTestfile.cmake"), "w") as f:
        f.write("\n".join(lines) + "\n")


def run(directory, mode):
    env = dict(os.environ, CHRONOLINK_BATCHED_FIXTURE=mode)
    proc = subprocess.run([sys.executable, RUNNER, directory, "--jobs", "2", "--timeout", "60", "--", "-L", "unit"],
                          env=env, capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


def failed_names(output):
    return sorted(re.findall(r"^\s*\d+ - (\S+) \(Failed\)$", output, re.M))


def check(condition, what, output):
    if not condition:
        print(f"FAIL: {what}\n--- runner output ---\n{output}")
        sys.exit(1)
    print(f"ok: {what}")


def main():
    if len(sys.argv) != 2 or not os.access(sys.argv[1], os.X_OK):
        sys.exit("usage: ctest_batched_selftest.py FIXTURE_EXECUTABLE")
    executable = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as directory:
        write_ctest_dir(directory, executable)

        status, out = run(directory, "pass")
        check(status == 0, "all passing: exit 0", out)
        check("0 tests failed out of 7" in out, "all passing: the summary counts 7 tests", out)
        check("BatchedFixture.Skips (Skipped)" in out, "all passing: the skip is reported as one", out)
        check("1 executables, one process each" in out, "all passing: one process for the executable", out)

        status, out = run(directory, "fail")
        check(status == 1, "one failing: exit 1", out)
        check(failed_names(out) == ["BatchedFixture.FailsWhenAsked"], "one failing: it alone is named", out)
        check("failed on purpose" in out, "one failing: its output is shown", out)

        status, out = run(directory, "crash")
        check(status == 1, "a crash: exit 1", out)
        check(failed_names(out) == ["BatchedFixture.CrashesWhenAsked"], "a crash: the crashing test alone is named",
              out)
        check(re.search(r"Test\s+#\d+: BatchedFixture.RunsAfterTheCrash \.+\s+Passed", out) is not None,
              "a crash: the tests after it ran one by one through ctest", out)
    print("ctest_batched_selftest: all checks passed")


if __name__ == "__main__":
    main()
