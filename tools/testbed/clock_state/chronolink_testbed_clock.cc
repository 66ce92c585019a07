// chronolink-testbed-clock: makes and drives a test bed node's clock state
// file (clock/clock_state_file.h; docs/testbed.md "Clocks as deployed").
//
//   chronolink-testbed-clock create FILE --node N [--offset-ns NS]
//       [--drift-ppm PPM] [--white-fm-adev A] [--random-walk-fm-adev A]
//       [--seed S] [--start-ns T] [--duration-s S] [--corrections N]
//   chronolink-testbed-clock change FILE --at-ns T [--rate-ppb R] [--step-ns S]
//   chronolink-testbed-clock read FILE T...
//
// `create` draws the oscillator (clock/oscillator_model.h) from --start-ns
// (default: now) for --duration-s, with room for --corrections discipline
// knots. `change` appends one: from true T on the correction runs at R ppb
// (after a step of S ns). `read` prints, per true instant, what RAW,
// REALTIME and MONOTONIC read. Test-only: no production node has one.
#include <time.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "clock/clock_state_file.h"
#include "clock/oscillator_model.h"

namespace chronolink {
namespace {

int Fail(const std::string& what) {
  std::fprintf(stderr, "chronolink-testbed-clock: %s\n", what.c_str());
  return 1;
}

int64_t RealtimeNow() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

struct CreateFlags {
  std::string file;
  uint32_t node = 0;
  OscillatorParams osc;
  int64_t start_ns = 0;
  double duration_s = 3600;
  uint32_t corrections = 65536;
};

int Create(const CreateFlags& f) {
  const int64_t start = f.start_ns != 0 ? f.start_ns : RealtimeNow();
  if (!(f.duration_s > 0 && f.duration_s <= 7 * 86400)) return Fail("--duration-s must be in (0, 604800]");
  if (std::fabs(f.osc.frequency_ppm) > 1000) return Fail("--drift-ppm must be within +/-1000 ppm");
  if (!(f.osc.white_fm_adev_1s >= 0 && f.osc.white_fm_adev_1s < 1e-5) ||
      !(f.osc.random_walk_fm_adev_1s >= 0 && f.osc.random_walk_fm_adev_1s < 1e-5)) {
    return Fail("Allan deviations must be in [0, 1e-5)");
  }
  const auto end = start + static_cast<int64_t>(f.duration_s * 1e9);
  const ClockTrajectory raw = OscillatorTrajectory(f.osc, start, end);
  std::string error;
  if (!CreateClockStateFile(f.file, f.node, raw, f.corrections, &error)) return Fail(error);
  std::printf("%s: node %u, %zu oscillator knots from %lld, room for %u corrections\n", f.file.c_str(), f.node,
              raw.knots().size(), static_cast<long long>(start), f.corrections);
  return 0;
}

int Change(const std::string& file, int64_t at_ns, double rate_ppb, int64_t step_ns) {
  if (!(std::fabs(rate_ppb) <= 1e6)) return Fail("--rate-ppb must be within +/-1e6 (1000 ppm)");
  ClockStateWriter writer;
  std::string error;
  if (!writer.Open(file, &error)) return Fail(error);
  const auto slope = static_cast<int64_t>(std::llround(rate_ppb * 1e6));  // fine units per ns
  if (!writer.ChangeAt(at_ns, slope, static_cast<FineNs>(step_ns) * kFinePerNs, &error)) return Fail(error);
  return 0;
}

int Read(const std::string& file, const std::vector<int64_t>& instants) {
  ClockStateReader reader;
  std::string error;
  if (!reader.Open(file, &error)) return Fail(error);
  for (const int64_t t : instants) {
    std::printf("%lld %lld %lld %lld\n", static_cast<long long>(t), static_cast<long long>(reader.RawAt(t)),
                static_cast<long long>(reader.RealtimeAt(t)), static_cast<long long>(reader.MonotonicAt(t)));
  }
  return 0;
}

}  // namespace
}  // namespace chronolink

int main(int argc, char** argv) {
  using namespace chronolink;
  CLI::App app{"Makes and drives a test bed node's clock state file (test-only; docs/testbed.md)."};
  app.require_subcommand(1);
  CreateFlags c;
  auto* create = app.add_subcommand("create", "Draw a node's oscillator into a new state file");
  create->add_option("file", c.file, "The state file to create (an existing file is refused)")->required();
  create->add_option("--node", c.node, "The node's id")->required();
  create->add_option("--offset-ns", c.osc.offset_ns, "Reading minus true time at the start (default: 0)");
  create->add_option("--drift-ppm", c.osc.frequency_ppm, "Constant frequency error (default: 0)");
  create->add_option("--white-fm-adev", c.osc.white_fm_adev_1s,
                     "Allan deviation at 1 s of white FM, a phase random walk (default: 0)");
  create->add_option("--random-walk-fm-adev", c.osc.random_walk_fm_adev_1s,
                     "Allan deviation at 1 s of random-walk FM, the frequency wandering (default: 0)");
  create->add_option("--seed", c.osc.seed, "Seed of the noise (default: 1)");
  create->add_option("--start-ns", c.start_ns, "True instant of the first knot, REALTIME ns (default: now)");
  create->add_option("--duration-s", c.duration_s, "Knots drawn this far ahead (default: 3600)");
  create->add_option("--corrections", c.corrections, "Room for discipline knots (default: 65536)")
      ->check(CLI::Range(1u, 10'000'000u));
  std::string file;
  int64_t at_ns = 0, step_ns = 0;
  double rate_ppb = 0;
  auto* change = app.add_subcommand("change", "Append a discipline knot: a new rate, optionally a step");
  change->add_option("file", file, "The state file")->required();
  change->add_option("--at-ns", at_ns, "True instant, REALTIME ns")->required();
  change->add_option("--rate-ppb", rate_ppb, "The correction's rate from then on, ppb (default: 0)");
  change->add_option("--step-ns", step_ns, "A step of the clock at that instant (default: 0)");
  std::vector<int64_t> instants;
  auto* read = app.add_subcommand("read", "Print RAW, REALTIME and MONOTONIC at true instants");
  read->add_option("file", file, "The state file")->required();
  read->add_option("instants", instants, "True instants, REALTIME ns")->required();
  CLI11_PARSE(app, argc, argv);
  if (create->parsed()) return Create(c);
  if (change->parsed()) return Change(file, at_ns, rate_ppb, step_ns);
  return Read(file, instants);
}
