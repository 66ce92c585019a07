#!/usr/bin/env bash
# Cross-builds chronolink for arm64 (GH200/GB200 Grace hosts) on an amd64
# Debian 12 machine and runs the unit tests under qemu-user
# (docs/deployment.md "Building for arm64"). Not part of scripts/test.sh or
# CI yet: see the section for what it costs.
#
#   sudo scripts/test-arm64.sh
#
# Environment: BUILD_DIR_ARM64 (default build-arm64), JOBS (compile jobs,
# default nproc), TEST_JOBS (ctest -j, default 1: every test is one qemu
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

t0=$SECONDS
cmake -S . -B "$BUILD_DIR" -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64-linux-gnu.cmake \
  -DCHRONOLINK_BUILD_BENCH=OFF
# The unit tests only (ctest -L unit): tests/unit/**/<name>_test.cc, less the
# GPU ones, and the C API's; their dependencies (libraries, the agent and the
# tools they run) come with them.
targets=()
for src in tests/unit/*_test.cc tests/unit/trace/*_test.cc tests/unit/collector/*_test.cc; do
  name=$(basename "$src" .cc)
  case "$name" in *_gpu_test) continue ;; esac
  targets+=("$name")
done
targets+=(c_api_test c_api_smoke)
cmake --build "$BUILD_DIR" -j "$JOBS" --target "${targets[@]}"
t_build=$((SECONDS - t0))

t1=$SECONDS
status=0
(cd "$BUILD_DIR" && ctest --output-on-failure --timeout 600 -j "${TEST_JOBS:-1}" -L unit) || status=$?
echo "test-arm64: build ${t_build} s, unit tests under qemu $((SECONDS - t1)) s"
exit "$status"
