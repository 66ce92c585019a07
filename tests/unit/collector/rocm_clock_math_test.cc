// The ROCm backend's pure parts, on constructed reads (no GPU needed): the
// amdkfd read -> host bracket, PCI ids -> KFD nodes, the counter-rate
// choice, and the anchored placement of HIP events with its bound.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "collector/device/rocm/hip_region_math.h"
#include "collector/device/rocm/kfd_clock_read.h"
#include "collector/device/rocm/kfd_topology.h"
#include "collector/device/rocm/rocm_device_clock.h"

namespace chronolink::collector {
namespace {

// A read where host = raw + 1'000'000'000'000 exactly, the ioctl takes
// 4 us and the in-kernel raw read comes 3 us into it.
KfdClockRead SyntheticRead() {
  const int64_t offset = 1'000'000'000'000;
  KfdClockRead r;
  r.raw_before_ns = 5'000'000;
  r.host_before_ns = r.raw_before_ns + offset - 20;
  r.gpu_counter = 123456789;
  r.kernel_raw_ns = r.raw_before_ns + 3'000;
  r.raw_after_ns = r.raw_before_ns + 4'000;
  r.host_after_ns = r.raw_after_ns + offset + 20;
  r.raw_after2_ns = r.raw_after_ns + 40;
  return r;
}

TEST(KfdClockRead, InKernelRawReadTightensTheUpperEnd) {
  const KfdClockRead r = SyntheticRead();
  KfdBracket b;
  std::string why;
  ASSERT_TRUE(BracketFromKfdRead(r, &b, &why)) << why;
  EXPECT_TRUE(b.tightened);
  EXPECT_EQ(b.host_before_ns, r.host_before_ns);
  EXPECT_LT(b.host_after_ns, r.host_after_ns);
  // The true host instant of the in-kernel read is inside the bracket.
  const int64_t kernel_host = r.kernel_raw_ns + 1'000'000'000'000;
  EXPECT_GE(b.host_after_ns, kernel_host);
  // And the bound is the triplet's half width plus a little, not the ioctl's return path.
  EXPECT_LE(b.host_after_ns - kernel_host, 30);
}

TEST(KfdClockRead, KernelValueOutsideTheRawBracketKeepsThePlainBracket) {
  KfdClockRead r = SyntheticRead();
  r.kernel_raw_ns = r.raw_after_ns + 10;  // not MONOTONIC_RAW of this ioctl
  KfdBracket b;
  std::string why;
  ASSERT_TRUE(BracketFromKfdRead(r, &b, &why)) << why;
  EXPECT_FALSE(b.tightened);
  EXPECT_EQ(b.host_before_ns, r.host_before_ns);
  EXPECT_EQ(b.host_after_ns, r.host_after_ns);
  r.kernel_raw_ns = 12;  // BOOTTIME-like or garbage
  ASSERT_TRUE(BracketFromKfdRead(r, &b, &why));
  EXPECT_FALSE(b.tightened);
}

TEST(KfdClockRead, OutOfOrderReadsAreRefused) {
  KfdClockRead r = SyntheticRead();
  r.host_after_ns = r.host_before_ns - 1;  // host clock stepped back
  KfdBracket b;
  std::string why;
  EXPECT_FALSE(BracketFromKfdRead(r, &b, &why));
  EXPECT_NE(why.find("backwards"), std::string::npos);
  r = SyntheticRead();
  r.raw_after2_ns = r.raw_after_ns - 1;
  EXPECT_FALSE(BracketFromKfdRead(r, &b, &why));
  EXPECT_NE(why.find("MONOTONIC_RAW"), std::string::npos);
}

TEST(KfdClockRead, ZeroAndAllOnesCountersAreInvalid) {
  EXPECT_FALSE(KfdGpuCounterValid(0));
  EXPECT_FALSE(KfdGpuCounterValid(~uint64_t{0}));
  EXPECT_TRUE(KfdGpuCounterValid(1));
}

TEST(KfdTopology, ParsesHipPciBusIds) {
  PciLocation p;
  ASSERT_TRUE(ParsePciBusId("0000:c1:00.0", &p));
  EXPECT_EQ(p.domain, 0u);
  EXPECT_EQ(p.bus, 0xc1u);
  EXPECT_EQ(p.device, 0u);
  EXPECT_EQ(p.function, 0u);
  EXPECT_EQ(p.KfdLocationId(), 0xc100u);
  ASSERT_TRUE(ParsePciBusId("1:0A:1f.7", &p));
  EXPECT_EQ(p.domain, 1u);
  EXPECT_EQ(p.KfdLocationId(), (0x0au << 8) | (0x1fu << 3) | 7u);
  for (const char* bad : {"", "0000:c1:00", "0000:c1:00.8", "0000:c1:20.0", "zz:c1:00.0", "0000:c1:00.0x",
                          "0000:1c1:00.0", "0000::00.0"}) {
    EXPECT_FALSE(ParsePciBusId(bad, &p)) << bad;
  }
}

TEST(KfdTopology, MatchesGpuNodesOnlyByDomainAndLocation) {
  std::vector<KfdNode> nodes(3);
  nodes[0] = {0, false, 0, 0xc100, 0, 0, "CPU"};  // a CPU node never matches
  nodes[1] = {1, true, 0, 0xc100, 0x1002, 0x740c, "GPU a"};
  nodes[2] = {2, true, 1, 0xc100, 0x1002, 0x740c, "GPU b"};
  PciLocation where;
  ASSERT_TRUE(ParsePciBusId("0001:c1:00.0", &where));
  const KfdNode* n = FindKfdNode(nodes, where);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->node_id, 2u);
  ASSERT_TRUE(ParsePciBusId("0000:c2:00.0", &where));
  EXPECT_EQ(FindKfdNode(nodes, where), nullptr);
}

TEST(CounterRate, HipNominalKeptWhenTheMeasurementAgrees) {
  std::string note;
  EXPECT_EQ(ChooseCounterRate(100'000'000, 100'003'000, 2'000, &note), 100'000'000u);
  EXPECT_NE(note.find("HIP"), std::string::npos);
  EXPECT_EQ(ChooseCounterRate(100'000'000, 25'000'400, 2'000, &note), 25'000'000u);
  EXPECT_NE(note.find("measured"), std::string::npos);
  EXPECT_EQ(ChooseCounterRate(0, 99'999'700, 2'000, &note), 100'000'000u);
}

TEST(HipRegionMath, FloatUlpGrowsWithTheElapsedTime) {
  EXPECT_EQ(FloatMsUlpNs(0.0f), 1);
  EXPECT_LE(FloatMsUlpNs(1.0f), 1);            // 2^-23 ms = 0.12 ns
  EXPECT_LE(FloatMsUlpNs(1000.0f), 62);        // ~61 ns at 1 s
  EXPECT_GE(FloatMsUlpNs(100'000.0f), 7'000);  // ~7.8 us at 100 s
  EXPECT_EQ(FloatMsUlpNs(-1000.0f), FloatMsUlpNs(1000.0f));
}

TEST(HipRegionMath, PlacementAddsAnchorRoundingRateAndConversionBounds) {
  RegionAnchor a{1, 1'000'000'000, 5'000, 1'000'005'000};
  EventTimingModel m;
  m.rate_tolerance_ppm = 100;
  m.event_clock_error_ns = 1'000;
  PlacedInstant p;
  ASSERT_TRUE(PlaceEvent(a, 10.0f, m, &p));  // 10 ms after the anchor
  EXPECT_EQ(p.device_ns, 1'010'000'000);
  // 5 us anchor + 1 us conversion + 1 us rate (100 ppm of 10 ms) + < 1 ns rounding.
  EXPECT_GE(p.error_ns, 7'000);
  EXPECT_LE(p.error_ns, 7'002);
  EXPECT_FALSE(PlaceEvent(a, std::numeric_limits<float>::quiet_NaN(), m, &p));
  EXPECT_FALSE(PlaceEvent(a, std::numeric_limits<float>::infinity(), m, &p));
  EXPECT_FALSE(PlaceEvent(a, 1e12f, m, &p));  // 31 years is not a region
}

TEST(HipRegionMath, AnchorBeforePicksTheNewestCertainlyEarlierOne) {
  std::vector<RegionAnchor> anchors = {{1, 100, 5, 105}, {2, 200, 5, 205}, {3, 300, 5, 305}};
  EXPECT_EQ(AnchorBefore(anchors, 99), nullptr);
  EXPECT_EQ(AnchorBefore(anchors, 105)->seq, 1u);
  EXPECT_EQ(AnchorBefore(anchors, 304)->seq, 2u);
  EXPECT_EQ(AnchorBefore(anchors, 1'000)->seq, 3u);
}

TEST(HipRegionMath, ImplausibleRegionsAreNamed) {
  const int64_t unknown_floor = std::numeric_limits<int64_t>::min();
  const int64_t unknown_ceiling = std::numeric_limits<int64_t>::max();
  PlacedInstant begin{1'000, 10}, end{2'000, 10};
  EXPECT_EQ(RegionImplausible(begin, end, 995, 2'005), nullptr);
  EXPECT_EQ(RegionImplausible(begin, end, unknown_floor, unknown_ceiling), nullptr);
  EXPECT_NE(RegionImplausible(begin, end, 1'020, 2'005), nullptr);  // begin before its record
  EXPECT_NE(RegionImplausible(begin, end, 995, 1'980), nullptr);    // end after seen complete
  EXPECT_NE(RegionImplausible(end, begin, unknown_floor, unknown_ceiling), nullptr);  // end before begin
  EXPECT_EQ(
      RegionImplausible(PlacedInstant{1'000, 10}, PlacedInstant{990, 10}, unknown_floor, unknown_ceiling),
      nullptr);  // within the bounds: kept, end clamped by the timer
}

}  // namespace
}  // namespace chronolink::collector
