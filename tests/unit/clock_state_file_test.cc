// The test bed's shared node clock (clock/clock_state_file.h): what readers
// see of the oscillator and of the discipline's changes, never a torn
// state while a writer appends, refusals of what is not such a file, and
// the same readings from the Python truth (tools/testbed/clock_trajectory.py)
// to the nanosecond.
#include "clock/clock_state_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "clock/clock_reader.h"
#include "clock/fit_clock.h"
#include "clock/oscillator_model.h"

namespace chronolink {
namespace {

constexpr int64_t kT0 = 1'795'320'926'000'000'000;
constexpr int64_t kSecond = 1'000'000'000;

class ClockStateFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("clock_state_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "node1.clock").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static ClockTrajectory Oscillator(uint64_t seed = 1) {
    OscillatorParams p;
    p.offset_ns = 3'000'000;
    p.frequency_ppm = -12.25;
    p.white_fm_adev_1s = 2e-9;
    p.random_walk_fm_adev_1s = 1e-11;
    p.seed = seed;
    return OscillatorTrajectory(p, kT0, kT0 + 120 * kSecond);
  }

  // The start's check of an anchor taken in a short slew (below), with
  // this much divergence allowed.
  void ExpectTheStartsCheck(int64_t max_divergence_ns);

  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(ClockStateFileTest, ReadersSeeTheOscillatorAndEachChangeOfTheDiscipline) {
  const ClockTrajectory raw = Oscillator();
  std::string error;
  ASSERT_TRUE(CreateClockStateFile(path_, 1, raw, 64, &error)) << error;
  ClockStateReader reader;
  ASSERT_TRUE(reader.Open(path_, &error)) << error;
  EXPECT_EQ(reader.node(), 1u);
  EXPECT_EQ(reader.raw().knots(), raw.knots());
  const int64_t t = kT0 + 10 * kSecond + 123;
  EXPECT_EQ(reader.RealtimeAt(t), raw.ReadAt(t));
  EXPECT_EQ(reader.MonotonicAt(t), raw.ReadAt(t));

  ClockStateWriter writer;
  ASSERT_TRUE(writer.Open(path_, &error)) << error;
  // +0.1 ppm from 20 s, then a step of -5 µs at 30 s with the rate kept.
  ASSERT_TRUE(writer.ChangeAt(kT0 + 20 * kSecond, 100'000'000, 0, &error)) << error;
  ASSERT_TRUE(writer.ChangeAt(kT0 + 30 * kSecond, 100'000'000, static_cast<FineNs>(-5000) * kFinePerNs, &error));
  EXPECT_FALSE(writer.ChangeAt(kT0 + 30 * kSecond, 0, 0, &error)) << "not after the last change";
  ASSERT_TRUE(reader.Refresh(&error)) << error;
  const int64_t before = kT0 + 19 * kSecond, mid = kT0 + 25 * kSecond, after = kT0 + 40 * kSecond;
  EXPECT_EQ(reader.RealtimeAt(before), raw.ReadAt(before));
  EXPECT_EQ(reader.RealtimeAt(mid) - raw.ReadAt(mid), 500);  // 5 s at 0.1 ppm (floors agree here)
  EXPECT_NEAR(static_cast<double>(reader.RealtimeAt(after) - raw.ReadAt(after)), 2000 - 5000, 1);
  EXPECT_NEAR(static_cast<double>(reader.MonotonicAt(after) - raw.ReadAt(after)), 2000, 1);
  EXPECT_EQ(reader.RawAt(after), raw.ReadAt(after));
  // The inverse used for deadlines.
  for (int64_t v : {reader.RealtimeAt(mid), reader.RealtimeAt(after) + 17}) {
    const int64_t when = reader.TrueInstantOfRealtime(v);
    EXPECT_GE(reader.RealtimeAt(when), v);
    EXPECT_LT(reader.RealtimeAt(when - 1), v);
  }
  // A withdrawal takes the later knots back.
  ASSERT_TRUE(writer.WithdrawAfter(kT0 + 25 * kSecond, &error));
  ASSERT_TRUE(reader.Refresh(&error)) << error;
  EXPECT_EQ(reader.correction().knots().size(), 2u);
  EXPECT_EQ(reader.MonotonicAt(after), reader.RealtimeAt(after));
}

TEST_F(ClockStateFileTest, AReaderNeverSeesAHalfWrittenChange) {
  std::string error;
  ASSERT_TRUE(CreateClockStateFile(path_, 1, Oscillator(), 20'000, &error)) << error;
  std::atomic<bool> done{false}, reading{false};
  ClockStateReader reader;
  ASSERT_TRUE(reader.Open(path_, &error)) << error;
  std::thread writing([&] {
    struct SayDone {  // on every way out, a failed assertion's too
      std::atomic<bool>& done;
      ~SayDone() { done = true; }
    } say_done{done};
    ClockStateWriter writer;
    std::string e;
    ASSERT_TRUE(writer.Open(path_, &e)) << e;
    for (int i = 0; i < 5000 && !reading; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    for (int i = 1; i < 20'000; ++i) {
      // Knot i: slope i, value continuing; the reader checks that pattern.
      ASSERT_TRUE(writer.ChangeAt(kT0 + i * 1000, i, 0, &e)) << e;
      // Pauses, so that even a loaded machine runs the reader in between.
      if (i % 1000 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  // Every state a refresh gives is a whole prefix of what the writer wrote.
  auto check = [&] {
    const auto& knots = reader.correction().knots();
    FineNs value = 0;
    for (size_t i = 0; i < knots.size(); ++i) {
      ASSERT_EQ(knots[i].t_ns, kT0 + static_cast<int64_t>(i) * 1000) << i;
      ASSERT_EQ(knots[i].slope, static_cast<int64_t>(i)) << i;
      ASSERT_TRUE(knots[i].value == value) << i;
      value += static_cast<FineNs>(1000) * knots[i].slope;
    }
  };
  size_t refreshes = 0, seen_midway = 0;
  while (!done) {
    reading = true;
    ASSERT_TRUE(reader.Refresh(&error)) << error;
    ++refreshes;
    const size_t n = reader.correction().knots().size();
    if (n > 1 && n < 20'000) ++seen_midway;
    ASSERT_NO_FATAL_FAILURE(check());
  }
  writing.join();
  ASSERT_TRUE(reader.Refresh(&error)) << error;
  ASSERT_NO_FATAL_FAILURE(check());
  EXPECT_EQ(reader.correction().knots().size(), 20'000u);
  EXPECT_GT(seen_midway, 0u) << "the reader never ran beside the writer (" << refreshes << " refreshes)";
}

// A writer that died mid-change leaves seq odd: readers keep what they had
// and say so within their patience, and the next writer carries on.
TEST_F(ClockStateFileTest, AWriterThatDiedMidChangeStallsNoReaderAndTheNextOneCarriesOn) {
  std::string error;
  ASSERT_TRUE(CreateClockStateFile(path_, 1, Oscillator(), 8, &error)) << error;
  ClockStateWriter writer;
  ASSERT_TRUE(writer.Open(path_, &error)) << error;
  ASSERT_TRUE(writer.ChangeAt(kT0 + kSecond, 5, 0, &error)) << error;
  ClockStateReader reader;
  ASSERT_TRUE(reader.Open(path_, &error)) << error;
  ASSERT_EQ(reader.correction().knots().size(), 2u);
  {
    std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(16);  // the header's seq (clock_state_file.h)
    const uint64_t odd = 7;
    f.write(reinterpret_cast<const char*>(&odd), sizeof odd);
  }
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(reader.Refresh(&error));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_NE(error.find("did not finish"), std::string::npos) << error;
  EXPECT_EQ(reader.correction().knots().size(), 2u) << "the last state read is kept";
  ASSERT_TRUE(writer.ChangeAt(kT0 + 2 * kSecond, 9, 0, &error)) << error;
  ASSERT_TRUE(reader.Refresh(&error)) << error;
  EXPECT_EQ(reader.correction().knots().size(), 3u);
}

TEST_F(ClockStateFileTest, WhatIsNotAClockStateIsRefusedWithAReason) {
  std::string error;
  ClockStateReader reader;
  EXPECT_FALSE(reader.Open((dir_ / "missing").string(), &error));
  EXPECT_NE(error.find("cannot open"), std::string::npos) << error;
  std::ofstream(dir_ / "text") << "not a clock";
  EXPECT_FALSE(reader.Open((dir_ / "text").string(), &error));
  EXPECT_NE(error.find("too short"), std::string::npos) << error;
  ASSERT_TRUE(CreateClockStateFile(path_, 1, Oscillator(), 8, &error)) << error;
  EXPECT_FALSE(CreateClockStateFile(path_, 1, Oscillator(), 8, &error)) << "an existing file is not overwritten";
  // A file cut short no longer matches its capacities.
  std::filesystem::resize_file(path_, std::filesystem::file_size(path_) - 48);
  EXPECT_FALSE(reader.Open(path_, &error));
  EXPECT_NE(error.find("capacities"), std::string::npos) << error;
  ClockStateWriter writer;
  EXPECT_FALSE(writer.Open(path_, &error));
  // A full correction list refuses more.
  const std::string small = (dir_ / "small.clock").string();
  ASSERT_TRUE(CreateClockStateFile(small, 2, Oscillator(), 2, &error)) << error;
  ASSERT_TRUE(writer.Open(small, &error)) << error;
  EXPECT_TRUE(writer.ChangeAt(kT0 + kSecond, 1, 0, &error)) << error;
  EXPECT_FALSE(writer.ChangeAt(kT0 + 2 * kSecond, 1, 0, &error));
  EXPECT_NE(error.find("full"), std::string::npos) << error;
}

// The agent's node clock in test mode reads the state file, and sees a
// discipline's change made after it opened it.
TEST_F(ClockStateFileTest, TheAgentsNodeClockFollowsTheStateFile) {
  const ClockTrajectory raw = Oscillator(3);
  std::string error;
  ASSERT_TRUE(CreateClockStateFile(path_, 1, raw, 8, &error)) << error;
  auto testbed = std::make_shared<TestbedNodeClock>();
  ASSERT_TRUE(testbed->Open(path_, &error)) << error;
  const NodeClock clock(testbed);
  ASSERT_NE(clock.testbed(), nullptr);
  EXPECT_EQ(clock.testbed()->path(), path_);
  const int64_t t = kT0 + 50 * kSecond + 321;
  EXPECT_EQ(clock.Ingest(t), raw.ReadAt(t));
  ClockStateWriter writer;
  ASSERT_TRUE(writer.Open(path_, &error)) << error;
  ASSERT_TRUE(writer.ChangeAt(kT0 + 40 * kSecond, 0, static_cast<FineNs>(1'000'000) * kFinePerNs, &error));
  EXPECT_EQ(clock.Ingest(t), raw.ReadAt(t) + 1'000'000) << "a step of 1 ms at 40 s";
  const int64_t v = clock.Ingest(t);
  const int64_t back = clock.ToReal(v);
  EXPECT_EQ(clock.Ingest(back), v);
  EXPECT_LT(clock.Ingest(back - 1), v);
  const NodeClock linear;
  EXPECT_EQ(linear.testbed(), nullptr);
  EXPECT_EQ(linear.Ingest(t), t);
}

// The agent's samples of REALTIME against RAW: on the test bed's node clock
// both at one real instant, exactly as the state file has them; on the
// kernel's clocks a narrow bracket; a linear virtual clock is its own RAW.
TEST_F(ClockStateFileTest, TheAgentSamplesRealtimeAgainstRawAsEachClockHasThem) {
  const ClockTrajectory raw = Oscillator(4);
  std::string error;
  ASSERT_TRUE(CreateClockStateFile(path_, 1, raw, 8, &error)) << error;
  ClockStateWriter writer;
  ASSERT_TRUE(writer.Open(path_, &error)) << error;
  const int64_t now = ReadClockNs(CLOCK_REALTIME);
  ASSERT_TRUE(writer.ChangeAt(now - kSecond, 250'000'000, static_cast<FineNs>(77'000) * kFinePerNs, &error));
  auto testbed = std::make_shared<TestbedNodeClock>();
  ASSERT_TRUE(testbed->Open(path_, &error)) << error;
  const NodeClock clock(testbed);
  const ClockPairSample s = clock.SamplePair();
  ClockStateReader reader;
  ASSERT_TRUE(reader.Open(path_, &error)) << error;
  const int64_t t = reader.raw().TrueInstantOf(s.raw_ns);  // the real instant it was taken at
  EXPECT_LE(std::llabs(reader.RealtimeAt(t) - s.realtime_ns), 1);
  EXPECT_EQ(s.bracket_ns, 0);
  EXPECT_NEAR(static_cast<double>(s.rate_fine), 250'000'000.0, 1e4) << "the correction's 0.25 ppm, against RAW";
  // REALTIME is RAW plus the correction: a 77 µs step and 0.25 ppm since.
  EXPECT_NEAR(static_cast<double>(s.realtime_ns - s.raw_ns), 77'000 + 0.25e-6 * static_cast<double>(t - (now - kSecond)),
              2);

  const NodeClock kernel;
  const ClockPairSample k = kernel.SamplePair();
  EXPECT_GE(k.bracket_ns, 0);
  EXPECT_LT(k.bracket_ns, 1'000'000) << "three tries at a bracket of RAW between two REALTIME reads";
  if (k.rate_fine != kRateUnknown) {
    EXPECT_LT(std::llabs(k.rate_fine), 500'000'000'000 + 100'000'000'000) << "the kernel's tick and frequency";
  }
  const int64_t kernel_offset = ReadClockNs(CLOCK_REALTIME) - ReadClockNs(CLOCK_MONOTONIC_RAW);
  EXPECT_LT(std::llabs((k.realtime_ns - k.raw_ns) - kernel_offset), 1'000'000);

  VirtualClockParams p;
  p.offset_ns = 5'000;
  p.drift_ppm = 3;
  p.t0_ns = now;
  const ClockPairSample linear = NodeClock(p).SamplePair();
  EXPECT_EQ(linear.realtime_ns, linear.raw_ns);

  FitClock fit(clock, FitClockMode::kRaw, /*sample_interval_ns=*/1'000'000);
  EXPECT_TRUE(fit.Poll(ReadClockNs(CLOCK_MONOTONIC)).sample.has_value());
  const int64_t start = ReadClockNs(CLOCK_MONOTONIC);
  int polls = 0;
  int64_t elapsed = 0;
  while ((elapsed = ReadClockNs(CLOCK_MONOTONIC) - start) < 20'000'000 || fit.stats().samples < 3) {
    fit.Poll(ReadClockNs(CLOCK_MONOTONIC));
    ++polls;
    ASSERT_LT(elapsed, 5'000'000'000) << "no third sample in 5 s";
  }
  // The one taken when the clock was made, and at most one a millisecond since.
  EXPECT_LE(fit.stats().samples, static_cast<uint64_t>(elapsed / 1'000'000 + 3)) << "at most one a millisecond";
  EXPECT_LT(fit.stats().samples, static_cast<uint64_t>(polls)) << "the polls between samples took none";
}

// Anchored while a daemon slews (here 2 000 ppm, stopping 30 ms later),
// the fit clock leaves REALTIME at the slew's rate; past the allowed
// divergence it is anchored again at REALTIME, at REALTIME's mean rate, and
// each anchor keeps the stretch of F it made.
TEST_F(ClockStateFileTest, AFitClockAnchoredDuringASlewIsAnchoredAgainAndKeepsBothStretches) {
  const ClockTrajectory raw = Oscillator(6);
  std::string error;
  ASSERT_TRUE(CreateClockStateFile(path_, 1, raw, 16, &error)) << error;
  ClockStateWriter writer;
  ASSERT_TRUE(writer.Open(path_, &error)) << error;
  const int64_t now = ReadClockNs(CLOCK_REALTIME);
  ASSERT_TRUE(writer.ChangeAt(now - kSecond, 2'000'000'000'000, 0, &error));  // slewing at +2000 ppm
  auto testbed = std::make_shared<TestbedNodeClock>();
  ASSERT_TRUE(testbed->Open(path_, &error)) << error;
  // At most 50 µs from REALTIME; its mean rate over the last 40-160 ms. The
  // start's check comes two baselines (80 ms) in, after the divergence
  // (about 55 ms), so this is the divergence's re-anchor.
  FitClock fit(NodeClock(testbed), FitClockMode::kRaw, 1'000'000, 50'000, 40'000'000);
  EXPECT_NEAR(static_cast<double>(fit.anchor()->rate_fine), 2e12, 1e8) << "anchored at the slew's rate";
  // The slew ends 30 ms after the anchor, not after a fixed instant: under
  // qemu the set-up alone can take longer than that.
  ASSERT_TRUE(writer.ChangeAt(ReadClockNs(CLOCK_REALTIME) + 30'000'000, 0, 0, &error));
  FitClockPoll reanchored;
  const int64_t start = ReadClockNs(CLOCK_MONOTONIC);
  while (!reanchored.reanchored && ReadClockNs(CLOCK_MONOTONIC) - start < 5 * kSecond) {
    const FitClockPoll p = fit.Poll(ReadClockNs(CLOCK_MONOTONIC));
    if (p.reanchored) reanchored = p;
  }
  ASSERT_TRUE(reanchored.reanchored) << "never anchored again";
  EXPECT_FALSE(reanchored.at_start_check);
  EXPECT_GT(reanchored.fit_before_ns - reanchored.fit_after_ns, 50'000) << "F had run ahead at the slew's rate";
  EXPECT_EQ(fit.stats().reanchors, 1u);
  // The new anchor starts at REALTIME: F is within the divergence of it now.
  // F is read before and after REALTIME, not once beside it: under qemu the
  // sample alone takes longer than 50 µs.
  const int64_t fit_before_sample = fit.Now();
  const ClockPairSample s = NodeClock(testbed).SamplePair();
  const int64_t fit_after_sample = fit.Now();
  EXPECT_GT(s.realtime_ns, fit_before_sample - 50'000);
  EXPECT_LT(s.realtime_ns, fit_after_sample + 50'000);
  // The first stretch keeps its anchor: an F value from before maps back
  // through the first anchor, one from now through the second.
  const FitAnchor first = *fit.AnchorFor(reanchored.fit_before_ns - 1'000'000);
  const FitAnchor second = *fit.AnchorFor(fit.Now());
  EXPECT_NE(first, second);
  EXPECT_NEAR(static_cast<double>(first.rate_fine), 2e12, 1e8);
  EXPECT_LT(std::llabs(second.rate_fine), 2'000'000'000'000) << "the mean rate, the slew partly averaged out";
}

// Anchored during a short slew (+300 ppm, ending 5 ms after the anchor),
// the fit clock is anchored again two baselines in (40 ms here), long
// before F has left REALTIME by the allowed divergence (1 s here), at the
// last baseline's mean rate, and only once. A clock whose rate holds at the
// same +300 ppm is not.
TEST_F(ClockStateFileTest, AnAnchorOffTheRecentMeanRateTwoBaselinesInIsAnchoredAgainOnce) {
  ExpectTheStartsCheck(kSecond);
}

// Allowed 32 us of divergence, F is about 10.5 us off REALTIME at the check
// (the slew's 300 ppm for the 35 ms since it ended): more than a quarter of
// the allowed (8 us), so F jumps back to REALTIME instead of bending.
TEST_F(ClockStateFileTest, AtTheStartsCheckFFarFromRealtimeJumpsBack) { ExpectTheStartsCheck(32'000); }

void ClockStateFileTest::ExpectTheStartsCheck(int64_t max_divergence_ns) {
  const bool bends = max_divergence_ns > 4 * 11'000;
  for (const bool slew_ends : {true, false}) {
    SCOPED_TRACE(slew_ends ? "the slew ends" : "the rate holds");
    std::filesystem::remove(path_);
    std::string error;
    ASSERT_TRUE(CreateClockStateFile(path_, 1, Oscillator(8), 16, &error)) << error;
    ClockStateWriter writer;
    ASSERT_TRUE(writer.Open(path_, &error)) << error;
    ASSERT_TRUE(writer.ChangeAt(ReadClockNs(CLOCK_REALTIME) - kSecond, 300'000'000'000, 0, &error));
    auto testbed = std::make_shared<TestbedNodeClock>();
    ASSERT_TRUE(testbed->Open(path_, &error)) << error;
    // A baseline of 20 ms; never past the divergence.
    FitClock fit(NodeClock(testbed), FitClockMode::kRaw, 1'000'000, max_divergence_ns, 20'000'000);
    EXPECT_NEAR(static_cast<double>(fit.anchor()->rate_fine), 3e11, 1e8) << "anchored at the slew's rate";
    if (slew_ends) {
      ASSERT_TRUE(writer.ChangeAt(ReadClockNs(CLOCK_REALTIME) + 5'000'000, 0, 0, &error));
    }
    // Polled for 200 ms of the real clock (checked after 40).
    const int64_t start = ReadClockNs(CLOCK_MONOTONIC);
    FitClockPoll reanchored;
    while (ReadClockNs(CLOCK_MONOTONIC) - start < 200'000'000) {
      const FitClockPoll p = fit.Poll(ReadClockNs(CLOCK_MONOTONIC));
      if (p.reanchored) reanchored = p;
    }
    EXPECT_EQ(fit.stats().reanchors, slew_ends ? 1u : 0u);
    if (slew_ends) {
      EXPECT_TRUE(reanchored.at_start_check) << "by the start's check, not the divergence";
      EXPECT_NEAR(static_cast<double>(reanchored.rate_before_fine), 3e11, 1e8);
      EXPECT_EQ(reanchored.rate_after_fine, fit.anchor()->rate_fine);
      EXPECT_LT(std::llabs(fit.anchor()->rate_fine), FitClock::kStartRateToleranceFine)
          << "the new anchor runs at the last baseline's mean rate, after the slew";
      if (!bends) {
        EXPECT_FALSE(reanchored.remap.has_value());
        EXPECT_NEAR(static_cast<double>(reanchored.fit_after_ns),
                    static_cast<double>(fit.PointAt(reanchored.fit_after_ns).realtime_ns), 2.0)
            << "F back at REALTIME";
        EXPECT_GT(reanchored.fit_before_ns - reanchored.fit_after_ns, 5'000) << "a jump back of over a quarter";
        continue;
      }
      // A new rate, not a step: F keeps its value at the bend, off REALTIME.
      ASSERT_TRUE(reanchored.remap.has_value());
      const FitClockRemap& m = *reanchored.remap;
      EXPECT_EQ(reanchored.fit_before_ns, m.at_fit_ns);
      EXPECT_EQ(reanchored.fit_after_ns, m.at_fit_ns);
      EXPECT_EQ(m.rate_before_fine, reanchored.rate_before_fine);
      EXPECT_EQ(m.rate_after_fine, reanchored.rate_after_fine);
      const FitAnchor before = *fit.AnchorFor(m.at_fit_ns - 1'000'000), after = *fit.AnchorFor(fit.Now());
      EXPECT_NE(before, after);
      EXPECT_EQ(after.realtime_ns, m.at_fit_ns) << "the new anchor starts at F's value there";
      EXPECT_NEAR(static_cast<double>(before.FitOfRaw(after.raw_ns)), static_cast<double>(m.at_fit_ns), 1.0);
      EXPECT_NE(fit.PointAt(m.at_fit_ns).realtime_ns, m.at_fit_ns) << "F still off REALTIME, as the slew left it";
    }
  }
}

// The Python truth reads the same file and must read the same clocks.
TEST_F(ClockStateFileTest, ThePythonTruthReadsTheSameClocks) {
  const ClockTrajectory raw = Oscillator(7);
  std::string error;
  ASSERT_TRUE(CreateClockStateFile(path_, 3, raw, 64, &error)) << error;
  ClockStateWriter writer;
  ASSERT_TRUE(writer.Open(path_, &error)) << error;
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int64_t> slope(-300'000'000, 300'000'000), step(-100'000, 100'000);
  for (int i = 1; i <= 20; ++i) {
    ASSERT_TRUE(writer.ChangeAt(kT0 + i * 5 * kSecond + i * 7, slope(rng),
                                i % 4 == 0 ? static_cast<FineNs>(step(rng)) * kFinePerNs + 123 : 0, &error));
  }
  ClockStateReader reader;
  ASSERT_TRUE(reader.Open(path_, &error)) << error;
  std::uniform_int_distribution<int64_t> instant(kT0 - kSecond, kT0 + 130 * kSecond);
  std::vector<int64_t> at;
  std::ostringstream command;
  command << "python3 " << CHRONOLINK_SOURCE_DIR << "/tools/testbed/clock_trajectory.py " << path_;
  for (int i = 0; i < 300; ++i) {
    at.push_back(instant(rng));
    command << ' ' << at.back();
  }
  FILE* out = ::popen(command.str().c_str(), "r");
  ASSERT_NE(out, nullptr);
  size_t compared = 0;
  long long t, raw_ns, realtime, monotonic;
  while (std::fscanf(out, "%lld %lld %lld %lld", &t, &raw_ns, &realtime, &monotonic) == 4) {
    ASSERT_LT(compared, at.size());
    EXPECT_EQ(t, at[compared]);
    EXPECT_EQ(raw_ns, reader.RawAt(t)) << t;
    EXPECT_EQ(realtime, reader.RealtimeAt(t)) << t;
    EXPECT_EQ(monotonic, reader.MonotonicAt(t)) << t;
    ++compared;
  }
  EXPECT_EQ(::pclose(out), 0);
  EXPECT_EQ(compared, at.size());
}

}  // namespace
}  // namespace chronolink
