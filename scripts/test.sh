#!/usr/bin/env bash
# Sets everything up and runs the whole test suite: unit tests, privileged
# integration tests (network namespaces; need root), and a bounded fuzz run
# of the probe decoder. Under CI (CI=true) a privileged test that cannot run
# fails instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
scripts/install-deps.sh
scripts/build.sh
echo "== unit and integration tests"
log="$BUILD_DIR/ctest.log"
status=0
(cd "$BUILD_DIR" && ctest --output-on-failure --timeout 300 -j 1) 2>&1 | tee "$log" || status=$?
echo "== fuzzing the probe decoder for ${FUZZ_SECONDS:-30} s"
fuzz_status=0
scripts/run-fuzz.sh >"$BUILD_DIR/fuzz-run.log" 2>&1 || fuzz_status=$?
tail -n 3 "$BUILD_DIR/fuzz-run.log"

total=$(sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' "$log" | tail -n 1)
failed=$(sed -n 's/.* \([0-9]*\) tests failed out of.*/\1/p' "$log" | tail -n 1)
skipped=$(grep -c '(Skipped)' "$log" || true)
total=${total:-0}
failed=${failed:-$total}
[ "$fuzz_status" -eq 0 ] || failed=$((failed + 1))
passed=$((total + 1 - failed - skipped))
echo "summary: $passed passed, $failed failed, $skipped skipped"
[ "$status" -eq 0 ] && [ "$fuzz_status" -eq 0 ] && [ "$total" -gt 0 ]
