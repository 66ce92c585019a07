#!/usr/bin/env bash
# Builds and runs the tests that need a real GPU: the ctest label `gpu`
# (tests/unit/collector/*_gpu_test.cc: the ROCm and CUDA backends on a
# device), which CI never runs because CI has no GPU. For a machine with an
# AMD or NVIDIA GPU and its driver. A test whose backend finds no library or
# no device skips with the backend's one-line reason; this prints what ran,
# what passed, failed and skipped (with the reasons), and the figures the
# tests print for docs/PERFORMANCE.md.
#
# Environment: BUILD_DIR (default build-gpu), JOBS (default: all cores),
# REQUIRE_GPU=1 to fail when every GPU test skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-gpu}
JOBS=${JOBS:-$(nproc)}

mapfile -t targets < <(find tests/unit/collector -name '*_gpu_test.cc' -printf '%f\n' | sed 's/\.cc$//' | sort)
if [ "${#targets[@]}" -eq 0 ]; then
  echo "test-gpu: no *_gpu_test.cc under tests/unit/collector" >&2
  exit 1
fi

echo "== configure and build ${targets[*]} in $BUILD_DIR"
mkdir -p "$BUILD_DIR"
cmake -S . -B "$BUILD_DIR" -DCHRONOLINK_BUILD_FUZZ=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  >"$BUILD_DIR/configure-gpu.log" 2>&1 || { tail -n 20 "$BUILD_DIR/configure-gpu.log"; exit 1; }
grep -E "collector: (ROCm|CUDA) backend" "$BUILD_DIR/configure-gpu.log" || true
cmake --build "$BUILD_DIR" --target "${targets[@]}" -j "$JOBS"

echo "== ctest -L gpu"
log="$BUILD_DIR/ctest-gpu.log"
status=0
(cd "$BUILD_DIR" && ctest -L gpu -V --timeout 300) >"$log" 2>&1 || status=$?

# ctest -V prefixes test output with "<n>: "; strip it for the summary.
grep -E "^ *[0-9]+/[0-9]+ Test +#[0-9]+: " "$log" || true
echo "== skipped (the backend's reason)"
grep -E "^[0-9]+: (no usable|no CUDA|libcudart|libamdhip64)" "$log" | sed -E 's/^[0-9]+: /  /' | sort -u || echo "  none"
echo "== figures"
grep -E "^[0-9]+: figure: " "$log" | sed -E 's/^[0-9]+: figure: /  /' || echo "  none (no GPU test ran to completion)"

total=$(grep -cE "^ *[0-9]+/[0-9]+ Test +#" "$log" || true)
skipped=$(grep -cE "^ *[0-9]+/[0-9]+ Test +#.*Skipped" "$log" || true)
failed=$(grep -cE "^ *[0-9]+/[0-9]+ Test +#.*(Failed|Timeout|Exception)" "$log" || true)
passed=$((total - skipped - failed))
echo "summary: $total gpu tests: $passed passed, $failed failed, $skipped skipped (log: $log)"
if [ "$total" -eq 0 ]; then
  echo "test-gpu: ctest found no gpu-labelled test" >&2
  exit 1
fi
if [ "$passed" -eq 0 ] && [ "$failed" -eq 0 ]; then
  echo "test-gpu: nothing ran: every GPU test skipped (no GPU, driver or vendor library here)"
  [ "${REQUIRE_GPU:-0}" = "1" ] && exit 1
fi
[ "$status" -eq 0 ] && [ "$failed" -eq 0 ]
