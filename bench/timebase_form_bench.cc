// What the leader's cluster-timebase.jsonl costs to store, a line per knot
// against columns (docs/formats.md "cluster-timebase.jsonl"), on generated
// knots with the test bed's digits: each node's knots come at a rate
// (chronyd on the test bed: 0.36-0.71 a second; a kernel PLL at 4 s polls:
// about 2), REALTIME's rate against RAW starts within +-100 ppm and walks by
// a normal step at each knot (chronyd: p90 of the change 0.04-0.5 ppm; the
// PLL: 5-90 ppm), and each node's knots reach the leader with its window
// summary, once per 2 s window at the node's own phase, and are written at
// the leader's next 100 ms turn, as ClusterService writes them. Both files
// are written by the leader's writer, read back with the trace tools'
// reader (which must find the same knots in both), and compressed with
// gzip -6 as a rotation stores them.
//
//   build/bench/timebase_form_bench [--nodes 10000] [--seconds 60]
//       [--knots-per-s 0.5] [--rate-walk-ppm 0.05] [--seed 1]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "agent/export/timebase_jsonl_writer.h"
#include "common/gzip_file.h"
#include "trace/correct/timebase_file.h"

namespace fs = std::filesystem;
using chronolink::RelayedKnot;

namespace {

constexpr int64_t kWindowNs = 2'000'000'000, kTurnNs = 100'000'000;
constexpr double kSecondsPerDay = 86400;

struct Options {
  uint32_t nodes = 10000;
  double seconds = 60;
  double knots_per_s = 0.5;
  double rate_walk_ppm = 0.05;
  uint64_t seed = 1;
  std::string dir;
};

struct NodeClock {
  uint64_t session = 0;
  int64_t raw_ns = 0, offset_ns = 0;  // the last knot: RAW, REALTIME − RAW
  double rate_ppm = 0;
  int64_t next_ns = 0;   // the next knot, as time since the start
  int64_t phase_ns = 0;  // when in each window its summary reaches the leader
};

// Every leader turn's knots, in the order the leader writes them.
std::vector<std::vector<RelayedKnot>> GenerateTurns(const Options& o) {
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> uniform(0, 1);
  std::normal_distribution<double> normal(0, 1);
  std::exponential_distribution<double> gap_s(o.knots_per_s);
  std::vector<NodeClock> nodes(o.nodes);
  for (NodeClock& n : nodes) {
    n.session = rng();
    n.raw_ns = static_cast<int64_t>(1e12 + uniform(rng) * 1e15);  // up to 11 days up
    n.offset_ns = 1'796'240'253'000'000'000 - n.raw_ns + static_cast<int64_t>(uniform(rng) * 1e9);
    n.rate_ppm = -100 + 200 * uniform(rng);
    n.phase_ns = static_cast<int64_t>(uniform(rng) * kWindowNs) / kTurnNs * kTurnNs;
  }
  const auto end_ns = static_cast<int64_t>(o.seconds * 1e9);
  std::vector<std::vector<RelayedKnot>> turns(static_cast<size_t>(end_ns / kTurnNs) + 1);
  for (uint32_t id = 0; id < o.nodes; ++id) {
    NodeClock& n = nodes[id];
    int64_t t = 0;  // time of the last knot since the start
    for (;;) {
      // A segment ends after 10 s at most (docs/formats.md), and knots are at least 1 ms apart.
      const auto step = static_cast<int64_t>(std::clamp(gap_s(rng), 0.001, 10.0) * 1e9);
      t += step;
      if (t >= end_ns) break;
      n.rate_ppm = std::clamp(n.rate_ppm + o.rate_walk_ppm * normal(rng), -500.0, 500.0);
      n.raw_ns += step;
      n.offset_ns += std::llround(n.rate_ppm * 1e-6 * static_cast<double>(step));
      // Sent with the summary of the window holding it, at that node's phase.
      const int64_t arrives = (t / kWindowNs + 1) * kWindowNs + n.phase_ns;
      if (arrives / kTurnNs >= static_cast<int64_t>(turns.size())) break;
      RelayedKnot k;
      k.node = id;
      k.session = n.session;
      k.knot = {n.raw_ns, n.raw_ns + n.offset_ns, false};
      turns[static_cast<size_t>(arrives / kTurnNs)].push_back(k);
    }
  }
  return turns;
}

bool WriteForm(const fs::path& dir, const char* name, bool columns, const std::vector<std::vector<RelayedKnot>>& turns,
               std::string* error) {
  chronolink::TimebaseJsonlWriter writer;
  if (!writer.Open(dir.string(), 0, 0, error, name, {.max_bytes = 0})) return false;
  for (const auto& turn : turns) {
    if (!writer.WriteKnots(turn, columns, error)) return false;
  }
  writer.Close();
  return true;
}

bool ReadBack(const fs::path& file, std::map<uint32_t, chronolink::trace::NodeTimebase>* out, std::string* error) {
  chronolink::trace::TimebaseReader reader;
  return reader.AddFile(file.string(), error) && reader.Finish(out, error);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "timebase_form_bench: what cluster-timebase.jsonl costs to store, rows against columns, "
      "on generated knots (docs/PERFORMANCE.md §15e)"};
  app.add_option("--nodes", o.nodes, "nodes")->capture_default_str()->check(CLI::Range(1u, 100000u));
  app.add_option("--seconds", o.seconds, "seconds of knots")->capture_default_str()->check(CLI::Range(4.0, 3600.0));
  app.add_option("--knots-per-s", o.knots_per_s, "knots per node per second")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 100.0));
  app.add_option("--rate-walk-ppm", o.rate_walk_ppm, "sigma of REALTIME's rate change at each knot, ppm")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 500.0));
  app.add_option("--seed", o.seed, "random seed")->capture_default_str();
  app.add_option("--dir", o.dir, "where the two files go (default: a new directory in the temp directory)");
  CLI11_PARSE(app, argc, argv);

  std::error_code ec;
  const fs::path dir =
      o.dir.empty() ? fs::temp_directory_path() / ("timebase_form_bench." + std::to_string(getpid())) : fs::path(o.dir);
  fs::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "timebase_form_bench: cannot create %s: %s\n", dir.c_str(), ec.message().c_str());
    return 1;
  }
  const auto turns = GenerateTurns(o);
  size_t knots = 0;
  for (const auto& t : turns) knots += t.size();
  std::string error;
  std::map<uint32_t, chronolink::trace::NodeTimebase> rows_read, columns_read;
  if (!WriteForm(dir, "rows.jsonl", false, turns, &error) || !WriteForm(dir, "columns.jsonl", true, turns, &error) ||
      !ReadBack(dir / "rows.jsonl", &rows_read, &error) || !ReadBack(dir / "columns.jsonl", &columns_read, &error)) {
    std::fprintf(stderr, "timebase_form_bench: %s\n", error.c_str());
    return 1;
  }
  if (rows_read != columns_read) {
    std::fprintf(stderr, "timebase_form_bench: the columns file does not read back as the rows file\n");
    return 1;
  }
  const double knots_per_day = o.knots_per_s * o.nodes * kSecondsPerDay;
  std::printf(
      "%u nodes, %.0f s, %.2f knots per node per s (%zu knots), rate walk %.3g ppm per knot; "
      "both forms read back alike\n",
      o.nodes, o.seconds, o.knots_per_s, knots, o.rate_walk_ppm);
  std::printf("%-8s %12s %10s %12s %10s %16s\n", "form", "bytes", "B/knot", "gzip -6", "B/knot", "GB/day gzipped");
  for (const char* name : {"rows.jsonl", "columns.jsonl"}) {
    const auto bytes = static_cast<double>(fs::file_size(dir / name));
    if (!chronolink::GzipFileInPlace(dir / name, &error)) {
      std::fprintf(stderr, "timebase_form_bench: %s\n", error.c_str());
      return 1;
    }
    const auto gz = static_cast<double>(fs::file_size(dir / (std::string(name) + ".gz")));
    std::printf("%-8s %12.0f %10.1f %12.0f %10.1f %16.2f\n", name, bytes, bytes / static_cast<double>(knots), gz,
                gz / static_cast<double>(knots), gz / static_cast<double>(knots) * knots_per_day / 1e9);
  }
  if (o.dir.empty()) fs::remove_all(dir, ec);
  return 0;
}
