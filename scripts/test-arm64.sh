#!/usr/bin/env bash
# Cross-builds chronolink for arm64 (GH200/GB200 Grace hosts) on an amd64
# Debian 12 machine and runs the unit tests under qemu-user
# (docs/deployment.md "Building for arm64"). scripts/test.sh (the README's
# test command, and CI) runs it after the native tests on an amd64 machine.
# The few tests qemu-user cannot run (tests/arm64/qemu-user-excluded.txt,
# each with its reason) are left out, and run once more afterwards to say
# whether they still need to be.
#
#   sudo scripts/test-arm64.sh [--build-only | --test-only]
#
# --build-only installs, registers and builds; --test-only runs the tests of
# a build already made (scripts/test.sh builds in the background while the
# native tests run, then tests).
#
# Environment: BUILD_DIR_ARM64 (default build-arm64), JOBS (compile jobs,
# default nproc), TEST_JOBS (test processes at once, default nproc: each is one qemu
# process, a CPU each).
#
# Tests that start another arm64 program (the agent, chronolink-solve,
# chronolink-trace, chronolink-collect) need the kernel to run it: qemu-user
# alone only runs the program it is given. With root this script registers
# qemu-aarch64 with binfmt_misc (the F flag: the kernel keeps the
# interpreter open, so it works in namespaces and containers too) when no
# handler is there; without one those tests fail with "Exec format error".
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR_ARM64:-build-arm64}
JOBS=${JOBS:-$(nproc)}
build=1
test=1
case "${1:-}" in
  "") ;;
  --build-only) test=0 ;;
  --test-only) build=0 ;;
  *) echo "usage: $0 [--build-only | --test-only]" >&2; exit 2 ;;
esac

# Packages and the binfmt_misc handler.
prepare() {
  scripts/install-deps-arm64.sh

  binfmt=/proc/sys/fs/binfmt_misc
  if [ ! -e "$binfmt/qemu-aarch64" ] && [ "$(id -u)" -eq 0 ]; then
    [ -e "$binfmt/register" ] || mount -t binfmt_misc binfmt_misc "$binfmt" 2>/dev/null || true
    if [ -w "$binfmt/register" ]; then
      # qemu-user-static's own rule (/usr/lib/binfmt.d/qemu-aarch64.conf), F added.
      rule=$(cat /usr/lib/binfmt.d/qemu-aarch64.conf)
      case "$rule" in *F) ;; *) rule="${rule}F" ;; esac
      printf '%s' "$rule" >"$binfmt/register" || echo "test-arm64: binfmt_misc registration failed" >&2
    fi
  fi
  [ -e "$binfmt/qemu-aarch64" ] ||
    echo "test-arm64: no binfmt_misc handler for arm64: tests that start an arm64 program will fail" >&2
}

# The arm64 build of the unit tests.
build_tests() {
  t0=$SECONDS
  # Release at -O1, no debug information: the tests only run under qemu,
  # and the cross build is the CI run's longest stage (2 327 s once on a
  # slow CI machine, against its 2 400 s limit); -O1 without -g compiles
  # the heaviest files about 20 % faster than RelWithDebInfo's -O2 -g1.
  # The test files at -O0 compiled 25-40 % quicker, but under qemu the
  # property tests' own loops then ran 2.5 times slower: the qemu stage took
  # 848 s against 367 s, more than the build saved (2026-12-02).
  cmake -S . -B "$BUILD_DIR" -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64-linux-gnu.cmake \
    -DCHRONOLINK_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
    -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG"
  # The unit tests only (ctest -L unit): one target, chronolink_unit_tests
  # (tests/CMakeLists.txt), on which every unit test's executable hangs with
  # its dependencies (libraries, the agent and the tools they run), so that
  # make builds them two at a time. The GPU tests are not in it.
  cmake --build "$BUILD_DIR" -j "$JOBS" --target chronolink_unit_tests
  echo "test-arm64: build $((SECONDS - t0)) s"
}

if [ "$build" -eq 1 ]; then
  prepare
  build_tests
fi
[ "$test" -eq 1 ] || exit 0
[ -f "$BUILD_DIR/CTestTestfile.cmake" ] || { echo "test-arm64: no arm64 build in $BUILD_DIR" >&2; exit 1; }

# The tests qemu-user cannot run: every pattern must name a test, so that a
# renamed test is not left out unseen.
excluded_list=tests/arm64/qemu-user-excluded.txt
unit_tests=$(cd "$BUILD_DIR" && ctest -N -L unit | sed -n 's/^ *Test *#[0-9]*: //p')
patterns=()
status=0
while IFS= read -r line; do
  case "$line" in "" | "#"*) continue ;; esac
  pattern=${line%% | *}
  if ! grep -Eq -- "$pattern" <<<"$unit_tests"; then
    echo "test-arm64: $excluded_list: '$pattern' names no unit test: remove or rename it" >&2
    status=1
  fi
  patterns+=("$pattern")
done <"$excluded_list"
excluded=$(IFS='|'; echo "${patterns[*]}")
n_excluded=$(grep -Ec -- "$excluded" <<<"$unit_tests" || true)

t1=$SECONDS
# The property tests that read CHRONOLINK_PROPERTY_CASES (the generated
# XSpace and Chrome JSON documents, tests/support/property_cases.h) run 100
# cases each here, not their 500-3 000: the native run covers the
# generators' space, and here only the architecture is tested again; their
# own checks (every varint width crossed, some documents declined on the
# wire path, ...) hold at 100 too. Under qemu they were 420 s of test time
# at full count, and 114 core-seconds at 250, on the CI run's critical path.
# Tests labelled host_only run no arm64 code (the speedscope harness's
# selftest took 25 s here), so the native run has already run them.
# One qemu process per test executable, not per test (scripts/ctest-batched.py):
# starting one costs about 0.15 core-seconds under qemu. Back to back on one
# build: 492 core-seconds and 282 s, against ctest's 602 and 344 s.
CHRONOLINK_PROPERTY_CASES="${CHRONOLINK_PROPERTY_CASES:-100}" scripts/ctest-batched.py "$BUILD_DIR" \
  --timeout 600 --jobs "${TEST_JOBS:-$(nproc)}" -- -L unit -LE host_only -E "$excluded" || status=1
t_tests=$((SECONDS - t1))
# The excluded tests once more, for information only: one that passes here
# no longer needs its line.
passing=$(cd "$BUILD_DIR" && ctest --timeout 120 -j "${TEST_JOBS:-$(nproc)}" -L unit -R "$excluded" 2>&1 |
  sed -n 's/^ *[0-9]*\/[0-9]* Test *#[0-9]*: \([^ ]*\) .*Passed.*/\1/p' || true)
echo "test-arm64: $n_excluded tests left out under qemu-user ($excluded_list, with the reasons)"
if [ -n "$passing" ]; then
  echo "test-arm64: these left-out tests pass under this qemu; their lines in $excluded_list can go:"
  echo "$passing" | sed 's/^/  /'
fi
echo "test-arm64: unit tests under qemu ${t_tests} s"
exit "$status"
