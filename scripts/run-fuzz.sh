#!/usr/bin/env bash
# Builds the fuzz targets (libFuzzer + ASan + UBSan, clang) in their own
# build directory and runs each for a bounded time: every decoder that reads
# untrusted bytes (the probe datagram, XSpace, Chrome/Kineto JSON,
# offsets.jsonl, rocprof CSV and JSON, host-clocks recordings). Exits
# non-zero if the build fails or a fuzzer finds a crash, leak, sanitizer
# report or timeout.
#
# Environment:
#   FUZZ_SECONDS   how long to fuzz each target (default 30)
#   FUZZ_TARGETS   which targets (default: all of them, see below)
#   FUZZ_BUILD_DIR build directory (default build-fuzz, relative to the repo)
#   FUZZ_JOBS      parallel compile jobs (default 2)
#   CXX / CC       compilers (default clang++ / clang)
# Extra arguments are passed to the fuzzer (e.g. -seed=1 -max_len=256).
#
# New interesting inputs go to $FUZZ_BUILD_DIR/fuzz-corpus/<target>, crash
# inputs to $FUZZ_BUILD_DIR/fuzz-artifacts/<target>; the seed corpus in
# tests/fuzz/corpus/<target without _fuzz> is read, never written.
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
targets="${FUZZ_TARGETS:-probe_decoder_fuzz xspace_reader_fuzz chrome_json_reader_fuzz offsets_reader_fuzz rocprof_csv_fuzz rocprof_json_fuzz host_clocks_fuzz}"
# shellcheck disable=SC2086
cmake --build "$build" --target $targets -j "$jobs"

status=0
for target in $targets; do
  seeds="$repo/tests/fuzz/corpus/${target%_fuzz}"
  work_corpus="$build/fuzz-corpus/$target"
  artifacts="$build/fuzz-artifacts/$target"
  mkdir -p "$work_corpus" "$artifacts"
  max_len=512
  [ "$target" = probe_decoder_fuzz ] || max_len=65536
  echo "run-fuzz: $target for ${seconds}s"
  target_status=0
  "$build/tests/fuzz/$target" "$work_corpus" "$seeds" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len="$max_len" \
    -artifact_prefix="$artifacts/" -print_final_stats=1 "$@" \
    >"$build/fuzz-$target.log" 2>&1 || target_status=$?
  if [ "$target_status" -ne 0 ]; then
    tail -n 40 "$build/fuzz-$target.log" >&2
    echo "run-fuzz: $target FAILED (exit $target_status); reproducer(s) in $artifacts:" >&2
    ls -l "$artifacts" >&2 || true
    status=1
    continue
  fi
  echo "run-fuzz: $target: no crash in ${seconds}s ($(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$build/fuzz-$target.log" || echo 'execs unknown'))"
done
exit "$status"
