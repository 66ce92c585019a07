#!/usr/bin/env bash
# Sets everything up and runs the whole test suite: unit tests, privileged
# integration tests (network namespaces; need root), and a bounded fuzz run
# of every decoder of untrusted bytes. Tests labelled `gpu` need a real GPU
# and are left out here (no GPU on these machines): scripts/test-gpu.sh runs
# them where one exists. On an amd64 machine it then cross-builds the project
# for arm64 and runs the unit tests under qemu-user (scripts/test-arm64.sh;
# CHRONOLINK_ARM64=0 leaves that out, except under CI). Under CI (CI set, not empty, "0" or "false"; .ci/run
# sets CI=true) a test that cannot run fails instead of skipping, and any
# skip left over fails the run: CI must run everything.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}

# The same definition as UnderCi() in tests/support/ci_rule.h.
under_ci() {
  case "${CI:-}" in
    "" | 0 | false | FALSE | False) return 1 ;;
  esac
}

# Minutes and seconds since the run began, for the log's phase lines.
stamp() { printf '%d:%02d' $((SECONDS / 60)) $((SECONDS % 60)); }

# arm64 (Grace) nodes: on an amd64 machine the unit tests of an arm64 cross
# build run under qemu-user too (scripts/test-arm64.sh).
arm64=0
if [ "$(dpkg --print-architecture 2>/dev/null || uname -m)" != amd64 ]; then
  echo "== arm64 stage: not an amd64 machine; the native run covers its own architecture"
elif [ "${CHRONOLINK_ARM64:-1}" = 0 ] && ! under_ci; then
  echo "== arm64 stage: left out (CHRONOLINK_ARM64=0)"
else
  [ "${CHRONOLINK_ARM64:-1}" = 0 ] && echo "test: CHRONOLINK_ARM64=0 is ignored under CI: CI must run everything" >&2
  arm64=1
fi

# What compiling needs first; the rest installs beside the native build,
# which needs none of it: on a clean CI machine that download and unpacking
# took minutes of the run's 40. The arm64 packages come first, and the
# background stages (the fuzz stage, the cross build) start once they are in
# and the native build is done; what the tests run (PyTorch, Chromium, etcd,
# speedscope, ...) may still be installing then, and every test waits for
# it. The arm64 packages are in before any test runs: apt may have to bring
# an amd64 library to the arm64 one's version, which must not happen under
# running tests.
scripts/install-deps.sh --build
mkdir -p "$BUILD_DIR"
echo "== $(stamp) installing the arm64 and runtime packages beside the build (log: $BUILD_DIR/install.log)"
arm64_installed="$BUILD_DIR/install-arm64.status"
rm -f "$arm64_installed"
{
  arm64_install_status=0
  if [ "$arm64" -eq 1 ]; then scripts/install-deps-arm64.sh || arm64_install_status=$?; fi
  echo "$arm64_install_status" >"$arm64_installed"
  [ "$arm64_install_status" -eq 0 ] || exit "$arm64_install_status"
  scripts/install-deps.sh --run
  scripts/install-viewer.sh  # speedscope (npm) for the real-viewer checks of the JSON output
} >"$BUILD_DIR/install.log" 2>&1 </dev/null &
install_pid=$!
build_status=0
# No debug information: nothing here reads it, and it is 4-9 % of a
# file's compile (CMakeLists.txt, CHRONOLINK_DEBUG_INFO).
scripts/build.sh -DCHRONOLINK_DEBUG_INFO=none || build_status=$?
echo "== $(stamp) native build done (exit $build_status)"
# On a failure the install is left to finish, never killed: a dpkg stopped
# half way leaves the machine's packages broken.
[ "$build_status" -eq 0 ] || exit "$build_status"
# The arm64 packages: at most 30 min more.
waited=0
while [ ! -s "$arm64_installed" ] && kill -0 "$install_pid" 2>/dev/null && [ "$waited" -lt 1800 ]; do
  sleep 2
  waited=$((waited + 2))
done
if [ "$(cat "$arm64_installed" 2>/dev/null)" != 0 ]; then
  cat "$BUILD_DIR/install.log"
  echo "test: installing the arm64 packages failed or took over 30 min (above)" >&2
  exit 1
fi
echo "== $(stamp) arm64 packages installed"
# The fuzz stage (its own sanitizer build, then every decoder for
# FUZZ_SECONDS, 5 s: at -O1 each replays its seed corpus in the first
# seconds; the long runs are docs/fuzzing.md's) runs beside the tests at
# the lowest CPU priority: most of the integration tests' time is agents probing at 20 pairs a second, which
# leaves a core idle, and a nice-19 process takes a CPU only when nothing
# else wants it, so the tests run as they would alone. With the two one
# after the other, the whole CI run took 35.7 min on 2 cores (docs/testbed.md).
# A background stage: a session of its own (so that an interrupt stops all
# of it) at the lowest CPU priority, for at most 40 min. nice alone does not
# lower it: with the kernel's autogroups (Debian's default) a new session is
# a scheduling group of its own, weighted like the tests' group whatever its
# processes' nice, so its group's nice is set to 19 as well. Call it with
# `&`: it replaces the background subshell (exec), so that $! is the
# session's and its process group's id, which the trap below kills.
background_stage() {
  exec setsid bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null || true; exec timeout 2400 nice -n 19 "$@"' stage "$@"
}
echo "== fuzzing every decoder of untrusted bytes, ${FUZZ_SECONDS:-5} s each, in the background (log: $BUILD_DIR/fuzz-run.log)"
background_stage env FUZZ_SECONDS="${FUZZ_SECONDS:-5}" scripts/run-fuzz.sh >"$BUILD_DIR/fuzz-run.log" 2>&1 &
fuzz_pid=$!
# The arm64 cross build (docs/deployment.md "Building for arm64") the same
# way, beside the fuzz stage: its tests run after the native ones.
if [ "$arm64" -eq 1 ]; then
  echo "== arm64 cross build in the background (log: $BUILD_DIR/arm64.log)"
  background_stage scripts/test-arm64.sh --build-only >"$BUILD_DIR/arm64.log" 2>&1 &
  arm64_build_pid=$!
fi
trap 'kill -TERM -- "-$fuzz_pid" 2>/dev/null || true; [ -z "${arm64_build_pid:-}" ] || kill -TERM -- "-$arm64_build_pid" 2>/dev/null || true' EXIT
echo "== $(stamp) waiting for the runtime packages"
install_status=0
wait "$install_pid" || install_status=$?
cat "$BUILD_DIR/install.log"
[ "$install_status" -eq 0 ] || { echo "test: installing the runtime packages failed (above)" >&2; exit 1; }
# The probe-loss tool pins its counters on the bpffs at /sys/fs/bpf, which a
# fresh container may lack, and which it cannot mount itself from inside
# `ip netns exec`.
if [ "$(id -u)" -eq 0 ] && [ "$(stat -f -c %T /sys/fs/bpf 2>/dev/null)" != bpf_fs ]; then
  mount -t bpf bpf /sys/fs/bpf || echo "test: no bpffs at /sys/fs/bpf and mounting one failed" >&2
fi
echo "== $(stamp) unit and integration tests (the gpu-labelled tests need a GPU: scripts/test-gpu.sh)"
log="$BUILD_DIR/ctest.log"
status=0
# As many tests at once as there are cores, except the privileged
# integration tests (RUN_SERIAL: each runs alone, for the CPU its timing
# bounds assume).
(cd "$BUILD_DIR" && ctest --output-on-failure --timeout 300 -j "${TEST_JOBS:-$(nproc)}" -LE gpu) 2>&1 | tee "$log" || status=$?
echo "== $(stamp) tests done; waiting for the fuzz stage"
fuzz_status=0
wait "$fuzz_pid" || fuzz_status=$?
[ "$fuzz_status" -ne 124 ] || echo "test: the fuzz stage did not end within 40 min" >&2
grep -E "^run-fuzz: .*(no crash|FAILED)" "$BUILD_DIR/fuzz-run.log" || tail -n 5 "$BUILD_DIR/fuzz-run.log"

# arm64 (Grace) nodes: the unit tests of the arm64 build, under qemu-user.
arm64_status=0
stages=1  # the fuzz stage counts as one test in the summary, the arm64 stage as another
if [ "$arm64" -eq 1 ]; then
  stages=2
  echo "== $(stamp) arm64 stage: waiting for its build, then the unit tests under qemu-user"
  wait "$arm64_build_pid" || arm64_status=$?
  if [ "$arm64_status" -eq 0 ]; then
    scripts/test-arm64.sh --test-only >>"$BUILD_DIR/arm64.log" 2>&1 || arm64_status=$?
  fi
  grep -E '^test-arm64:|tests passed' "$BUILD_DIR/arm64.log" || tail -n 20 "$BUILD_DIR/arm64.log"
  [ "$arm64_status" -eq 0 ] || { echo "test: the arm64 stage failed:"; grep -E '^\s*[0-9]+ - .*\((Failed|Timeout|Not Run|SEGFAULT|Subprocess aborted)\)' "$BUILD_DIR/arm64.log" || tail -n 40 "$BUILD_DIR/arm64.log"; }
fi
trap - EXIT

total=$(sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' "$log" | tail -n 1)
failed=$(sed -n 's/.* \([0-9]*\) tests failed out of.*/\1/p' "$log" | tail -n 1)
skipped=$(grep -c '(Skipped)' "$log" || true)
total=${total:-0}
failed=${failed:-$total}
[ "$fuzz_status" -eq 0 ] || failed=$((failed + 1))
[ "$arm64_status" -eq 0 ] || failed=$((failed + 1))
passed=$((total + stages - failed - skipped))
echo "== $(stamp) done"
echo "summary: $passed passed, $failed failed, $skipped skipped"
skip_status=0
if under_ci && [ "$skipped" -gt 0 ]; then
  echo "CI must run every test, but $skipped skipped:"
  grep '(Skipped)' "$log" || true
  skip_status=1
fi
[ "$status" -eq 0 ] && [ "$fuzz_status" -eq 0 ] && [ "$arm64_status" -eq 0 ] && [ "$skip_status" -eq 0 ] &&
  [ "$total" -gt 0 ]
