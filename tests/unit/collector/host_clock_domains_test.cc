// Host clock domains: the bracketed recorder (on synthetic clocks with a
// known truth, and on this machine's), the JSONL file written and read
// back, the conversion's bound against truth across chunks, steps and the
// recording's ends, and every kind of bad file.
#include "collector/importers/host_clock_domains.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "clock/clock_reader.h"
#include "collector/importers/host_clocks_loader.h"
#include "collector/importers/host_domain_track.h"

namespace chronolink::collector {
namespace {

namespace fs = std::filesystem;

TEST(HostClockDomainsTest, NamesRoundTrip) {
  for (HostClockDomain d : {HostClockDomain::kBoottime, HostClockDomain::kMonotonic,
                            HostClockDomain::kMonotonicRaw, HostClockDomain::kRealtime}) {
    HostClockDomain back{};
    ASSERT_TRUE(ParseHostClockDomain(HostClockDomainName(d), &back));
    EXPECT_EQ(back, d);
  }
  HostClockDomain d{};
  EXPECT_FALSE(ParseHostClockDomain("tai", &d));
  EXPECT_EQ(HostClockId(HostClockDomain::kBoottime), CLOCK_BOOTTIME);
  EXPECT_EQ(ToClockDomain(HostClockDomain::kMonotonicRaw), ClockDomain::kMonotonicRaw);
}

// Synthetic clocks (a test double for the kernel's): every read takes
// `step_ns` of true time; REALTIME and each domain are true time plus their
// own offsets; a read of the domain can be made slow.
struct FakeClocks {
  int64_t true_ns = 1'000'000'000'000;
  int64_t step_ns = 40;
  int64_t realtime_offset = 1'700'000'000'000'000'000;
  int64_t boottime_offset = 5'000'000'000;
  int64_t monotonic_offset = 3'000'000'000;
  int64_t raw_offset = 2'999'000'000;
  int64_t slow_ns = 0;  // added to every domain read after the REALTIME one

  int64_t Read(clockid_t id) {
    true_ns += step_ns;
    switch (id) {
      case CLOCK_REALTIME:
        true_ns += slow_ns;
        return true_ns + realtime_offset;
      case CLOCK_BOOTTIME:
        return true_ns + boottime_offset;
      case CLOCK_MONOTONIC:
        return true_ns + monotonic_offset;
      default:
        return true_ns + raw_offset;
    }
  }
  int64_t TrueOffset(HostClockDomain d) const {
    switch (d) {
      case HostClockDomain::kBoottime:
        return realtime_offset - boottime_offset;
      case HostClockDomain::kMonotonic:
        return realtime_offset - monotonic_offset;
      default:
        return realtime_offset - raw_offset;
    }
  }
};

TEST(HostClockRecorderTest, EachDomainsOffsetIsWithinItsStatedError) {
  FakeClocks clocks;
  HostClockRecorderOptions o;
  o.read_granularity_ns = 1;
  HostClockRecorder rec(o, [&clocks](clockid_t id) { return clocks.Read(id); });
  const std::vector<HostClockSample> samples = rec.Measure();
  ASSERT_EQ(samples.size(), 3u);
  for (const HostClockSample& s : samples) {
    EXPECT_EQ(s.bracket_ns, 80);
    EXPECT_EQ(s.error_ns, 41);
    EXPECT_LE(std::llabs(s.offset_ns - clocks.TrueOffset(s.domain)), s.error_ns)
        << HostClockDomainName(s.domain);
  }
}

TEST(HostClockRecorderTest, ADomainWhoseEveryBracketIsTooWideIsLeftOutAndCounted) {
  FakeClocks clocks;
  clocks.slow_ns = 100'000;  // every bracket spans a 100 us stall
  HostClockRecorderOptions o;
  o.max_bracket_ns = 50'000;
  HostClockRecorder rec(o, [&clocks](clockid_t id) { return clocks.Read(id); });
  EXPECT_TRUE(rec.Measure().empty());
  EXPECT_EQ(rec.rejected(), 3u);
  EXPECT_EQ(rec.measured(), 3u);
}

TEST(HostClockRecorderTest, ThisMachinesClocksGiveSaneSamples) {
  HostClockRecorder rec;
  const int64_t boottime_offset = ReadClockNs(CLOCK_REALTIME) - ReadClockNs(CLOCK_BOOTTIME);
  std::vector<HostClockSample> samples;
  for (int i = 0; i < 20 && samples.size() < 3; ++i)
    samples = rec.Measure();  // a loaded machine may refuse some
  ASSERT_FALSE(samples.empty());
  for (const HostClockSample& s : samples) {
    EXPECT_GE(s.error_ns, 1);
    EXPECT_LE(s.bracket_ns, 50'000);
    if (s.domain == HostClockDomain::kBoottime) {
      EXPECT_LT(std::llabs(s.offset_ns - boottime_offset), 10'000'000);  // loose: the same offset, read twice
    }
  }
}

// Samples of one domain whose true offset moves by `ppm` (test double of a
// REALTIME slewed against BOOTTIME), each off by up to its error.
std::vector<HostClockSample> Synthetic(int n, int64_t period_ns, double ppm,
                                       int64_t start_ref = 10'000'000'000) {
  std::vector<HostClockSample> out;
  for (int k = 0; k < n; ++k) {
    HostClockSample s;
    s.domain = HostClockDomain::kBoottime;
    s.ref_ns = start_ref + k * period_ns;
    const int64_t truth = 1'000'000'000'000 + std::llround(ppm * 1e-6 * static_cast<double>(k * period_ns));
    s.error_ns = 300;
    s.bracket_ns = 598;
    s.offset_ns = truth + ((k * 7919) % 581) - 290;  // deterministic noise in [-290, 290]
    out.push_back(s);
  }
  return out;
}

int64_t TrueOffsetAt(int64_t ref_ns, double ppm, int64_t start_ref = 10'000'000'000) {
  return 1'000'000'000'000 + std::llround(ppm * 1e-6 * static_cast<double>(ref_ns - start_ref));
}

TEST(HostDomainTrackTest, TheBoundCoversTheTruthAcrossManyChunks) {
  HostDomainTrack track(HostClockDomain::kBoottime, ClockOffsetTrackOptions{});
  const int64_t period = 100'000'000;
  for (const HostClockSample& s : Synthetic(1000, period, 40.0)) EXPECT_FALSE(track.Add(s));
  EXPECT_EQ(track.steps(), 0u);
  EXPECT_EQ(track.size(), 1000u);
  int checked = 0;
  for (int64_t ref = 10'000'000'000; ref < 10'000'000'000 + 999 * period; ref += 7'777'777) {
    const ConvertedStamp c = track.ToRealtime(ref);
    ASSERT_TRUE(c.ok) << ref;
    const int64_t err = std::llabs(c.realtime_ns - (ref + TrueOffsetAt(ref, 40.0)));
    EXPECT_LE(err, c.error_ns) << ref;
    EXPECT_LT(c.error_ns, 1'000) << ref;  // 300 ns samples, 100 ms apart: well under a microsecond
    ++checked;
  }
  EXPECT_GT(checked, 10'000);
}

TEST(HostDomainTrackTest, InstantsAcrossAStepAreNotConvertible) {
  HostDomainTrack track(HostClockDomain::kBoottime, ClockOffsetTrackOptions{});
  std::vector<HostClockSample> s = Synthetic(200, 100'000'000, 0.0);
  for (size_t i = 100; i < s.size(); ++i) s[i].offset_ns += 5'000'000;  // REALTIME stepped by 5 ms
  int steps = 0;
  for (const HostClockSample& x : s) steps += track.Add(x) ? 1 : 0;
  EXPECT_EQ(steps, 1);
  EXPECT_EQ(track.steps(), 1u);
  const int64_t between = (s[99].ref_ns + s[100].ref_ns) / 2;
  EXPECT_FALSE(track.ToRealtime(between).ok);
  EXPECT_TRUE(track.ToRealtime(s[50].ref_ns + 1).ok);
  const ConvertedStamp after = track.ToRealtime(s[150].ref_ns + 1);
  ASSERT_TRUE(after.ok);
  EXPECT_LE(std::llabs(after.realtime_ns - (s[150].ref_ns + 1 + TrueOffsetAt(0, 0.0) + 5'000'000)),
            after.error_ns);
}

TEST(HostDomainTrackTest, NothingBeforeTheFirstSampleOrFarAfterTheLast) {
  ClockOffsetTrackOptions o;
  o.max_extrapolation_ns = 1'000'000'000;
  HostDomainTrack track(HostClockDomain::kBoottime, o);
  const std::vector<HostClockSample> s = Synthetic(10, 100'000'000, 10.0);
  for (const HostClockSample& x : s) track.Add(x);
  EXPECT_FALSE(track.ToRealtime(s.front().ref_ns - 1).ok);
  EXPECT_TRUE(track.ToRealtime(s.back().ref_ns + 500'000'000).ok);
  EXPECT_FALSE(track.ToRealtime(s.back().ref_ns + 2'000'000'000).ok);
  EXPECT_EQ(track.Samples().size(), 10u);
  EXPECT_EQ(track.Samples()[3].host_ns, s[3].ref_ns + s[3].offset_ns);
}

TEST(HostDomainTrackTest, ALongGapIsNotInterpolatedAcross) {
  HostDomainTrack track(HostClockDomain::kBoottime, ClockOffsetTrackOptions{});
  std::vector<HostClockSample> s = Synthetic(20, 100'000'000, 0.0);
  const int64_t gap = HostDomainTrack::kMaxGapNs + 1'000'000'000;
  for (size_t i = 10; i < s.size(); ++i) s[i].ref_ns += gap;  // the recorder was stopped
  for (const HostClockSample& x : s) track.Add(x);
  EXPECT_TRUE(track.ToRealtime(s[9].ref_ns + 500'000'000).ok);  // extrapolated a little
  EXPECT_FALSE(track.ToRealtime(s[9].ref_ns + gap / 2).ok);     // deep in the gap
  EXPECT_TRUE(track.ToRealtime(s[15].ref_ns + 1).ok);
}

// ---------------------------------------------------------------------------
// The file

fs::path TempFile(const std::string& name) { return fs::path(::testing::TempDir()) / name; }

HostClocksHeader TestHeader(const std::string& boot_id) {
  HostClocksHeader h;
  h.host = "node7";
  h.boot_id = boot_id;
  h.started_realtime_ns = 1'700'000'000'000'000'000;
  h.period_ns = 100'000'000;
  h.granularity_ns = 1;
  return h;
}

TEST(HostClocksFileTest, WrittenSamplesLoadBackIntoTracks) {
  const fs::path path = TempFile("clocks_roundtrip.jsonl");
  HostClocksWriter w;
  std::string error;
  ASSERT_TRUE(w.Open(path, TestHeader("boot-a"), &error)) << error;
  for (HostClockSample s : Synthetic(300, 100'000'000, -25.0)) {
    ASSERT_TRUE(w.Write(s, &error)) << error;
    s.domain = HostClockDomain::kMonotonic;
    s.ref_ns -= 2'000'000'000;
    ASSERT_TRUE(w.Write(s, &error)) << error;
  }
  ASSERT_TRUE(w.Close(&error)) << error;
  EXPECT_EQ(w.samples_written(), 600u);

  HostClocksFile f;
  HostClocksLoadOptions o;
  o.expected_boot_id = "boot-a";
  ASSERT_TRUE(LoadHostClocksFile(path, o, &f, &error)) << error;
  EXPECT_EQ(f.header.host, "node7");
  EXPECT_EQ(f.samples, 600u);
  EXPECT_EQ(f.bad_lines, 0u);
  ASSERT_NE(f.track(HostClockDomain::kBoottime), nullptr);
  ASSERT_NE(f.track(HostClockDomain::kMonotonic), nullptr);
  EXPECT_EQ(f.track(HostClockDomain::kMonotonicRaw), nullptr);
  const int64_t ref = 10'000'000'000 + 12'345'678'901;
  const ConvertedStamp c = f.track(HostClockDomain::kBoottime)->ToRealtime(ref);
  ASSERT_TRUE(c.ok);
  EXPECT_LE(std::llabs(c.realtime_ns - (ref + TrueOffsetAt(ref, -25.0))), c.error_ns);
}

TEST(HostClocksFileTest, ARecordingOnThisMachineConvertsItsOwnBoottime) {
  const fs::path path = TempFile("clocks_live.jsonl");
  std::string boot_id, error;
  ASSERT_TRUE(CurrentBootId(&boot_id, &error)) << error;
  HostClockRecorder rec;
  HostClocksWriter w;
  ASSERT_TRUE(w.Open(path, TestHeader(boot_id), &error)) << error;
  // Until a few BOOTTIME samples are in (a loaded machine may refuse some).
  auto record = [&](int want) {
    int boottime = 0;
    for (int i = 0; i < 2000 && boottime < want; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the loader wants samples >= 100 us apart
      for (const HostClockSample& s : rec.Measure()) {
        ASSERT_TRUE(w.Write(s, &error)) << error;
        boottime += s.domain == HostClockDomain::kBoottime ? 1 : 0;
      }
    }
  };
  record(5);
  // A stamp as a profiler takes it, bracketed by REALTIME reads.
  const int64_t real_before = ReadClockNs(CLOCK_REALTIME);
  const int64_t boottime = ReadClockNs(CLOCK_BOOTTIME);
  const int64_t real_after = ReadClockNs(CLOCK_REALTIME);
  record(5);
  ASSERT_TRUE(w.Close(&error)) << error;

  HostClocksFile f;
  HostClocksLoadOptions o;
  o.expected_boot_id = boot_id;
  ASSERT_TRUE(LoadHostClocksFile(path, o, &f, &error)) << error;
  const HostDomainTrack* t = f.track(HostClockDomain::kBoottime);
  ASSERT_NE(t, nullptr);
  const ConvertedStamp c = t->ToRealtime(boottime);
  ASSERT_TRUE(c.ok);
  // Only possible to state loosely: the stamp happened between the two reads.
  EXPECT_GE(c.realtime_ns + c.error_ns, real_before);
  EXPECT_LE(c.realtime_ns - c.error_ns, real_after);
}

HostClocksFile Parse(const std::string& text, bool* ok, std::string* error, HostClocksLoadOptions o = {}) {
  HostClocksFile f;
  *ok = ParseHostClocks(text, o, &f, error);
  return f;
}

std::string Header(const std::string& boot = "b1") { return HeaderLine(TestHeader(boot)); }

std::string GoodLines(int n, int64_t start_ref = 1'000'000) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    HostClockSample s;
    s.ref_ns = start_ref + i * 1'000'000;
    s.offset_ns = 42'000'000'000;
    s.error_ns = 100;
    s.bracket_ns = 198;
    out += SampleLine(s);
  }
  return out;
}

TEST(HostClocksFileTest, AnotherBootsRecordingIsRefused) {
  bool ok = false;
  std::string error;
  HostClocksLoadOptions o;
  o.expected_boot_id = "b2";
  Parse(Header("b1") + GoodLines(5), &ok, &error, o);
  EXPECT_FALSE(ok);
  EXPECT_NE(error.find("another boot"), std::string::npos) << error;
  // Two boots in one file.
  Parse(Header("b1") + GoodLines(3) + Header("b2") + GoodLines(3, 900'000'000), &ok, &error);
  EXPECT_FALSE(ok);
  EXPECT_NE(error.find("line 5"), std::string::npos) << error;
  // The same boot appended: fine.
  const HostClocksFile f =
      Parse(Header("b1") + GoodLines(3) + Header("b1") + GoodLines(3, 900'000'000), &ok, &error);
  EXPECT_TRUE(ok) << error;
  EXPECT_EQ(f.samples, 6u);
}

TEST(HostClocksFileTest, BadLinesAreCountedWithTheirNumbers) {
  std::string text = Header() + GoodLines(10);
  text += "not json\n";  // line 12
  text += R"({"domain":"tai","ref_ns":1,"offset_ns":1,"error_ns":1,"bracket_ns":1})"
          "\n";  // 13: unknown domain
  text += R"({"domain":"boottime","ref_ns":"5","offset_ns":1,"error_ns":1,"bracket_ns":1})"
          "\n";  // 14: a string
  text += R"({"domain":"boottime","ref_ns":99999999999,"offset_ns":1,"error_ns":-1,"bracket_ns":1})"
          "\n";  // 15
  text += R"({"domain":"boottime","ref_ns":5,"offset_ns":1,"error_ns":1,"bracket_ns":1})"
          "\n";  // 16: not after
  text +=
      R"({"domain":"boottime","ref_ns":99999999999,"offset_ns":9223372036854775807,"error_ns":1,"bracket_ns":1})"
      "\n";  // 17: overflow
  text += R"({"domain":"boottime","ref_ns":18446744073709551615,"offset_ns":1,"error_ns":1,"bracket_ns":1})"
          "\n";       // 18
  text += "\n   \n";  // blank lines are not counted
  bool ok = false;
  std::string error;
  const HostClocksFile f = Parse(text, &ok, &error);
  ASSERT_TRUE(ok) << error;
  EXPECT_EQ(f.samples, 10u);
  EXPECT_EQ(f.bad_lines, 7u);
  EXPECT_EQ(f.bad_line_numbers, (std::vector<uint64_t>{12, 13, 14, 15, 16, 17, 18}));
  EXPECT_NE(f.first_bad_reason.find("line 12"), std::string::npos) << f.first_bad_reason;
}

TEST(HostClocksFileTest, WhatIsNotARecordingFailsWithOneMessage) {
  bool ok = true;
  std::string error;
  Parse("", &ok, &error);
  EXPECT_FALSE(ok);
  Parse(GoodLines(3), &ok, &error);  // no header
  EXPECT_FALSE(ok);
  EXPECT_NE(error.find("not a chronolink host-clocks file"), std::string::npos) << error;
  Parse(R"({"schema":"chronolink.host_clocks/1","host":"x"})"
        "\n" +
            GoodLines(2),
        &ok, &error);  // no boot id
  EXPECT_FALSE(ok);
  Parse(Header(), &ok, &error);  // a header and nothing else
  EXPECT_FALSE(ok);
  EXPECT_NE(error.find("no clock samples"), std::string::npos) << error;
  std::string garbage = Header() + GoodLines(2);
  for (int i = 0; i < 10; ++i) garbage += "{\"domain\": 1}\n";
  Parse(garbage, &ok, &error);
  EXPECT_FALSE(ok);
  EXPECT_NE(error.find("mostly not host-clock samples"), std::string::npos) << error;
  std::string binary(3000, '\0');
  for (size_t i = 0; i < binary.size(); ++i) binary[i] = static_cast<char>((i * 97 + 13) & 0xff);
  Parse(binary, &ok, &error);
  EXPECT_FALSE(ok);
}

// Values no recorder writes, chosen so that unchecked they would overflow
// the tracks' int64 arithmetic (found by host_clocks_fuzz under UBSan).
TEST(HostClocksFileTest, ExtremeValuesAreRefusedBeforeAnyArithmetic) {
  const std::string text =
      Header() +
      R"({"domain":"boottime","ref_ns":1000,"offset_ns":4611686018427387904,"error_ns":0,"bracket_ns":1})"
      "\n"
      R"({"domain":"boottime","ref_ns":2000,"offset_ns":-4611686018427387904,"error_ns":0,"bracket_ns":1})"
      "\n"
      R"({"domain":"boottime","ref_ns":1152921504606846976,"offset_ns":0,"error_ns":0,"bracket_ns":1})"
      "\n"
      R"({"domain":"boottime","ref_ns":5000,"offset_ns":0,"error_ns":1000000000,"bracket_ns":1})"
      "\n" +
      GoodLines(8, 1'000'000'000);
  bool ok = false;
  std::string error;
  const HostClocksFile f = Parse(text, &ok, &error);
  ASSERT_TRUE(ok) << error;
  EXPECT_EQ(f.bad_line_numbers, (std::vector<uint64_t>{2, 3, 4, 5}));
  EXPECT_EQ(f.samples, 8u);
  // Closer than 100 us to the previous sample: refused too.
  HostClockSample close;
  close.ref_ns = 1'000'000'000 + 7 * 1'000'000 + 50'000;
  close.offset_ns = 42'000'000'000;
  close.error_ns = 1;
  const HostClocksFile g = Parse(Header() + GoodLines(8, 1'000'000'000) + SampleLine(close), &ok, &error);
  ASSERT_TRUE(ok) << error;
  EXPECT_EQ(g.bad_line_numbers, (std::vector<uint64_t>{10}));
}

TEST(HostClocksFileTest, AnOverlongLineIsCutAndCounted) {
  HostClocksLoadOptions o;
  o.max_line_bytes = 512;
  const std::string text = Header() + GoodLines(5) + "{\"domain\":\"" + std::string(100'000, 'x') + "\"}\n" +
                           GoodLines(5, 900'000'000);
  bool ok = false;
  std::string error;
  const HostClocksFile f = Parse(text, &ok, &error, o);
  ASSERT_TRUE(ok) << error;
  EXPECT_EQ(f.bad_lines, 1u);
  EXPECT_EQ(f.bad_line_numbers.at(0), 7u);
  EXPECT_EQ(f.samples, 10u);
}

TEST(HostClocksFileTest, AMissingFileNamesItself) {
  HostClocksFile f;
  std::string error;
  EXPECT_FALSE(LoadHostClocksFile(TempFile("no-such-clocks.jsonl"), {}, &f, &error));
  EXPECT_NE(error.find("no-such-clocks.jsonl"), std::string::npos) << error;
}

}  // namespace
}  // namespace chronolink::collector
