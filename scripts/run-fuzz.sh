#!/usr/bin/env bash
# Builds the fuzz targets (libFuzzer + ASan + UBSan, clang) in their own
# build directory and runs each for a bounded time or number of executions:
# every decoder that reads untrusted bytes (the probe datagram, the
# coordination channel's frames and handshake, the coordination messages,
# sealed etcd values and etcd's answers, the config and cluster files,
# XSpace, Chrome/Kineto JSON, offsets.jsonl, rocprof CSV and JSON,
# host-clocks recordings), and the XSpace writers on generated valid hosts. Exits non-zero if the build fails or a fuzzer
# finds a crash, leak, sanitizer report or timeout.
#
# Environment:
#   FUZZ_SECONDS   how long to fuzz each target (default 30)
#   FUZZ_RUNS      instead: run each target for this many executions
#                  (-runs=; the long run is FUZZ_RUNS=10000000), with
#                  FUZZ_SECONDS as a cap only when it is set too
#   FUZZ_MERGE     1: afterwards minimise the seeds and what the run found
#                  (-set_cover_merge=1) into tests/fuzz/corpus/<target>,
#                  at most FUZZ_CORPUS_CAP files (default 100; see below)
#   FUZZ_TARGETS   which targets (default: all of them, as tests/fuzz/CMakeLists.txt
#                  lists them in $FUZZ_BUILD_DIR/fuzz-targets.txt)
#   FUZZ_BUILD_DIR build directory (default build-fuzz, relative to the repo)
#   FUZZ_JOBS      parallel compile jobs (default 2)
#   CXX / CC       compilers (default clang++ / clang)
# Extra arguments are passed to the fuzzer (e.g. -seed=1 -max_len=256).
#
# Per target it prints one line: executions, executions per second,
# crashes, and the corpus size (files and bytes of seeds plus what the run
# added). New interesting inputs go to $FUZZ_BUILD_DIR/fuzz-corpus/<target>,
# crash inputs to $FUZZ_BUILD_DIR/fuzz-artifacts/<target>; the seed corpus
# in tests/fuzz/corpus/<target without _fuzz> is read, and written only by
# FUZZ_MERGE=1.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${FUZZ_SECONDS:-30}"
runs="${FUZZ_RUNS:-}"
merge="${FUZZ_MERGE:-0}"
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
if [ -n "$runs" ] && { ! [[ "$runs" =~ ^[0-9]+$ ]] || [ "$runs" -lt 1 ]; }; then
  echo "run-fuzz: FUZZ_RUNS must be a positive integer, got '$runs'" >&2
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
# Every target: what CMake hangs on chronolink_fuzz_all, listed by the
# configure step (tests/fuzz/CMakeLists.txt), so that the list has one source.
[ -s "$build/fuzz-targets.txt" ] || { echo "run-fuzz: the configure step wrote no $build/fuzz-targets.txt" >&2; exit 1; }
all_targets=$(tr '\n' ' ' <"$build/fuzz-targets.txt")
targets="${FUZZ_TARGETS:-$all_targets}"
# All of them as one target (tests/fuzz/CMakeLists.txt): make builds a list
# of targets one at a time.
build_targets="${FUZZ_TARGETS:-chronolink_fuzz_all}"
# shellcheck disable=SC2086
cmake --build "$build" --target $build_targets -j "$jobs"

# The stop condition: executions for a long run, else time.
limit=(-max_total_time="$seconds")
what="${seconds}s"
if [ -n "$runs" ]; then
  limit=(-runs="$runs")
  [ -n "${FUZZ_SECONDS:-}" ] && limit+=(-max_total_time="$seconds")
  what="$runs runs"
fi

stat() { grep -m1 -o "stat::$1: *[0-9]*" "$2" | grep -o '[0-9]*$' || echo '?'; }

status=0
for target in $targets; do
  seeds="$repo/tests/fuzz/corpus/${target%_fuzz}"
  work_corpus="$build/fuzz-corpus/$target"
  artifacts="$build/fuzz-artifacts/$target"
  mkdir -p "$work_corpus" "$artifacts" "$seeds"
  max_len=512
  [ "$target" = probe_decoder_fuzz ] || max_len=65536
  echo "run-fuzz: $target for $what"
  log="$build/fuzz-$target.log"
  target_status=0
  # Artifacts of this run only (the folder keeps earlier runs' reproducers).
  started="$build/fuzz-started-$target"
  touch "$started"
  "$build/tests/fuzz/$target" "$work_corpus" "$seeds" \
    "${limit[@]}" -timeout=10 -rss_limit_mb=4096 -max_len="$max_len" \
    -artifact_prefix="$artifacts/" -print_final_stats=1 "$@" \
    >"$log" 2>&1 || target_status=$?
  # libFuzzer names what it found crash-, leak-, timeout-, oom- or
  # slow-unit-; a slow unit (one input over -report_slow_units, 10 s, such
  # as one run while the process was stopped) is a report, not a failure.
  crashes=$(find "$artifacts" -type f -newer "$started" ! -name 'slow-unit-*' | wc -l)
  slow=$(find "$artifacts" -type f -newer "$started" -name 'slow-unit-*' | wc -l)
  files=$(find "$work_corpus" "$seeds" -type f | wc -l)
  bytes=$(find "$work_corpus" "$seeds" -type f -exec cat {} + | wc -c)
  summary="$(stat number_of_executed_units "$log") execs, $(stat average_exec_per_sec "$log") exec/s, $crashes crashes, $slow slow units, corpus $files files $bytes bytes"
  if [ "$target_status" -ne 0 ]; then
    tail -n 40 "$log" >&2
    echo "run-fuzz: $target FAILED (exit $target_status; $summary); reproducer(s) in $artifacts:" >&2
    ls -l "$artifacts" >&2 || true
    status=1
    continue
  fi
  echo "run-fuzz: $target: no crash ($summary; limit $what)"
  if [ "$merge" = 1 ]; then
    # The smallest set of the seeds and the run's inputs that keeps every
    # feature (-set_cover_merge=1 into an empty directory). The named seeds
    # (encoder-made examples, regressions) stay whatever it says; of the
    # rest (hash-named), up to FUZZ_CORPUS_CAP files in all are kept, spread
    # evenly over the sizes (the smallest alone would be mostly refusals),
    # so that the repo corpus stays small.
    cap="${FUZZ_CORPUS_CAP:-100}"
    merged="$build/fuzz-merged/$target"
    rm -rf "$merged" && mkdir -p "$merged"
    "$build/tests/fuzz/$target" -set_cover_merge=1 "$merged" "$seeds" "$work_corpus" -max_len="$max_len" \
      >"$build/fuzz-merge-$target.log" 2>&1 || { echo "run-fuzz: merging $target failed" >&2; status=1; continue; }
    find "$seeds" -type f -regextype posix-extended -regex '.*/[0-9a-f]{40}' -delete
    named=$(find "$seeds" -type f | wc -l)
    # A named seed is in the merge under its SHA-1: not twice.
    find "$seeds" -type f -exec sha1sum {} + | while read -r sum _; do rm -f "$merged/$sum"; done
    find "$merged" -type f -printf '%s %p\n' | sort -n |
      awk -v keep="$((cap > named ? cap - named : 0))" '{ line[NR] = $2 }
        END { for (i = 0; i < keep && i < NR; i++) print line[int(i * NR / (keep < NR ? keep : NR)) + 1] }' |
      while read -r file; do cp "$file" "$seeds/"; done
    echo "run-fuzz: $target: corpus minimised to $(find "$seeds" -type f | wc -l) files, $(find "$seeds" -type f -exec cat {} + | wc -c) bytes (the merge kept $(find "$merged" -type f | wc -l) inputs besides the named seeds)"
  fi
done
exit "$status"
