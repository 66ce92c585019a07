#!/usr/bin/env bash
# Builds the probe decoder fuzzer (libFuzzer + ASan + UBSan, clang) in its own
# build directory and runs it for a bounded time. Exits non-zero if the build
# fails or the fuzzer finds a crash, leak, sanitizer report or timeout.
#
# Environment:
#   FUZZ_SECONDS   how long to fuzz (default 30)
#   FUZZ_BUILD_DIR build directory (default build-fuzz, relative to the repo)
#   FUZZ_JOBS      parallel compile jobs (default 2)
#   CXX / CC       compilers (default clang++ / clang)
# Extra arguments are passed to the fuzzer (e.g. -seed=1 -max_len=256).
#
# New interesting inputs go to $FUZZ_BUILD_DIR/fuzz-corpus, crash inputs to
# $FUZZ_BUILD_DIR/fuzz-artifacts; the seed corpus in tests/fuzz/corpus is
# read, never written.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${FUZZ_SECONDS:-30}"
build="${FUZZ_BUILD_DIR:-build-fuzz}"
jobs="${FUZZ_JOBS:-2}"
cxx="${CXX:-clang++}"
cc="${CC:-clang}"

case "$build" in
  /*) ;;
  *) build="$repo/$build" ;;
esac
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "run-fuzz: FUZZ_SECONDS must be a positive integer, got '$seconds'" >&2
  exit 2
fi
if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "run-fuzz: $cxx not found (libFuzzer needs clang)" >&2
  exit 2
fi

echo "run-fuzz: configuring $build with $cxx"
mkdir -p "$build"
cmake -S "$repo" -B "$build" \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCHRONOLINK_BUILD_FUZZ=ON -DCHRONOLINK_BUILD_TESTS=OFF -DCHRONOLINK_BUILD_BENCH=OFF \
  >"$build/configure.log" 2>&1 || { cat "$build/configure.log" >&2; exit 1; }
cmake --build "$build" --target probe_decoder_fuzz -j "$jobs"

fuzzer="$build/tests/fuzz/probe_decoder_fuzz"
work_corpus="$build/fuzz-corpus"
artifacts="$build/fuzz-artifacts"
mkdir -p "$work_corpus" "$artifacts"

echo "run-fuzz: fuzzing for ${seconds}s"
status=0
"$fuzzer" "$work_corpus" "$repo/tests/fuzz/corpus" \
  -max_total_time="$seconds" -timeout=10 -max_len=512 \
  -artifact_prefix="$artifacts/" -print_final_stats=1 "$@" \
  2>&1 | tee "$build/fuzz.log" || status=$?

if [ "$status" -ne 0 ]; then
  echo "run-fuzz: FAILED (exit $status); reproducer(s) in $artifacts:" >&2
  ls -l "$artifacts" >&2 || true
  exit "$status"
fi
echo "run-fuzz: no crash in ${seconds}s ($(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$build/fuzz.log" || echo 'execs unknown'))"
