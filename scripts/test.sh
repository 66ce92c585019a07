#!/usr/bin/env bash
# Sets everything up and runs the whole test suite: unit tests, privileged
# integration tests (network namespaces; need root), and a bounded fuzz run
# of the probe decoder. Under CI (CI=true) a privileged test that cannot run
# fails instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
echo "== unit and integration tests"
(cd "${BUILD_DIR:-build}" && ctest --output-on-failure --timeout 300 -j 1)
echo "== fuzzing the probe decoder for ${FUZZ_SECONDS:-30} s"
scripts/run-fuzz.sh
