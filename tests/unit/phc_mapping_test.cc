#include "clock/phc_mapping.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include <filesystem>
#include <vector>

namespace chronolink {
namespace {

constexpr int64_t kSys = 1'790'000'000'000'000'000LL;  // a REALTIME instant
constexpr int64_t kPhc = 1'790'000'037'000'000'000LL;  // PHC in TAI, 37 s ahead

TEST(PtpClockTime, ConvertsAndRejectsGarbage) {
  int64_t ns = 0;
  ASSERT_TRUE(PtpClockTimeToNs(12, 345, &ns));
  EXPECT_EQ(ns, 12'000'000'345LL);
  EXPECT_FALSE(PtpClockTimeToNs(1, 1'000'000'000u, &ns));
  EXPECT_FALSE(PtpClockTimeToNs(-1, 0, &ns));
  EXPECT_FALSE(PtpClockTimeToNs(INT64_MAX / 2, 0, &ns));
}

TEST(PhcOffsetMaths, Precise) {
  PhcOffset o;
  std::string error;
  ASSERT_TRUE(PhcOffsetFromPrecise(kPhc, kSys, &o, &error)) << error;
  EXPECT_EQ(o.method, PhcMethod::kPrecise);
  EXPECT_EQ(o.offset_ns, kPhc - kSys);
  EXPECT_EQ(o.error_ns, kPhcPreciseErrorNs);
  EXPECT_EQ(o.phc_ns, kPhc);
  EXPECT_EQ(o.sys_ns, kSys);
  EXPECT_FALSE(PhcOffsetFromPrecise(kPhc, 0, &o, &error));  // kernel left it zero
  EXPECT_NE(error.find("PRECISE"), std::string::npos);
}

TEST(PhcOffsetMaths, ExtendedPicksTheNarrowestTriplet) {
  const std::vector<PhcTriplet> t = {
      {kSys, kPhc + 700, kSys + 1'400},        // width 1400
      {kSys + 2'000, kPhc + 2'130, kSys + 2'200},  // width 200, centre 2100: offset +30
      {kSys + 3'000, kPhc + 3'400, kSys + 3'900},  // width 900
  };
  PhcOffset o;
  std::string error;
  ASSERT_TRUE(PhcOffsetFromTriplets(t, PhcMethod::kExtended, &o, &error)) << error;
  EXPECT_EQ(o.method, PhcMethod::kExtended);
  EXPECT_EQ(o.bracket_ns, 200);
  EXPECT_EQ(o.sys_ns, kSys + 2'100);
  EXPECT_EQ(o.phc_ns, kPhc + 2'130);
  EXPECT_EQ(o.offset_ns, kPhc - kSys + 30);
  EXPECT_EQ(o.error_ns, 100 + kPhcReadGranularityNs);
  EXPECT_EQ(o.samples, 3);
  EXPECT_EQ(o.rejected, 0);
}

TEST(PhcOffsetMaths, OddWidthRoundsTheBoundUp) {
  const std::vector<PhcTriplet> t = {{kSys, kPhc, kSys + 101}};
  PhcOffset o;
  std::string error;
  ASSERT_TRUE(PhcOffsetFromTriplets(t, PhcMethod::kExtended, &o, &error));
  EXPECT_EQ(o.sys_ns, kSys + 50);
  EXPECT_EQ(o.error_ns, 51 + kPhcReadGranularityNs);
  // Whatever instant in [sys, sys + 101] the PHC was read at, the bound holds.
  for (int64_t at : {kSys, kSys + 50, kSys + 101}) {
    EXPECT_LE(std::abs((kPhc - at) - o.offset_ns), o.error_ns);
  }
}

TEST(PhcOffsetMaths, GarbageTripletsAreRejected) {
  const std::vector<PhcTriplet> t = {
      {kSys + 500, kPhc, kSys},                      // negative width: narrowest if trusted
      {0, kPhc, kSys},                               // zero time
      {kSys, -5, kSys + 10},                         // negative PHC
      {kSys, kPhc, kSys + kPhcMaxBracketNs + 1},     // absurdly wide
      {kSys, kPhc + 4'000, kSys + 8'000},            // the only good one
  };
  PhcOffset o;
  std::string error;
  ASSERT_TRUE(PhcOffsetFromTriplets(t, PhcMethod::kExtended, &o, &error)) << error;
  EXPECT_EQ(o.rejected, 4);
  EXPECT_EQ(o.bracket_ns, 8'000);
  EXPECT_EQ(o.offset_ns, kPhc - kSys);

  const std::vector<PhcTriplet> all_bad = {t[0], t[1], t[2], t[3]};
  EXPECT_FALSE(PhcOffsetFromTriplets(all_bad, PhcMethod::kExtended, &o, &error));
  EXPECT_NE(error.find("no valid sample"), std::string::npos) << error;
  EXPECT_FALSE(PhcOffsetFromTriplets({}, PhcMethod::kExtended, &o, &error));
}

TEST(PhcOffsetMaths, BasicInterleaved) {
  // sys0, phc0, sys1, phc1, sys2: windows (sys0, phc0, sys1) and (sys1, phc1, sys2).
  const std::vector<int64_t> ts = {kSys, kPhc + 900, kSys + 2'000, kPhc + 2'600, kSys + 3'000};
  PhcOffset o;
  std::string error;
  ASSERT_TRUE(PhcOffsetFromInterleaved(ts, &o, &error)) << error;
  EXPECT_EQ(o.method, PhcMethod::kBasic);
  EXPECT_EQ(o.bracket_ns, 1'000);
  EXPECT_EQ(o.sys_ns, kSys + 2'500);
  EXPECT_EQ(o.offset_ns, kPhc - kSys + 100);
  EXPECT_EQ(o.error_ns, 500 + kPhcReadGranularityNs);
  EXPECT_EQ(o.samples, 2);

  EXPECT_FALSE(PhcOffsetFromInterleaved(std::vector<int64_t>{kSys, kPhc}, &o, &error));
  EXPECT_NE(error.find("2n + 1"), std::string::npos);
  // A system clock that goes backwards inside every window is garbage.
  const std::vector<int64_t> backwards = {kSys + 9'000, kPhc, kSys + 5'000, kPhc, kSys};
  EXPECT_FALSE(PhcOffsetFromInterleaved(backwards, &o, &error));
}

TEST(HwToRealtime, OneMeasurementWithDrift) {
  PhcOffset o;
  std::string error;
  ASSERT_TRUE(PhcOffsetFromTriplets(std::vector<PhcTriplet>{{kSys, kPhc, kSys + 200}},
                                    PhcMethod::kExtended, &o, &error));
  // At the measurement: real = phc - offset, the measurement's own bound.
  ConvertedStamp c = HwToRealtime(kPhc, o);
  ASSERT_TRUE(c.ok);
  EXPECT_EQ(c.realtime_ns, kSys + 100);
  EXPECT_EQ(c.error_ns, 101);
  // 1 ms later with 100 ppm allowed drift: +100 ns; earlier is symmetric.
  c = HwToRealtime(kPhc + 1'000'000, o);
  EXPECT_EQ(c.realtime_ns, kSys + 100 + 1'000'000);
  EXPECT_EQ(c.error_ns, 201);
  EXPECT_EQ(HwToRealtime(kPhc - 1'000'000, o).error_ns, 201);
  EXPECT_EQ(HwToRealtime(kPhc + 1'000'000, o, 0).error_ns, 101);
  // No measurement: no conversion.
  EXPECT_FALSE(HwToRealtime(kPhc, PhcOffset{}).ok);
}

TEST(PhcMapping, InterpolatesADriftingPhc) {
  // The PHC runs 20 ppm fast: phc = sys + 37 s + 20e-6 (sys - kSys).
  auto phc_at = [](int64_t sys) { return kPhc + (sys - kSys) / 50'000; };
  PhcMapping m;
  for (int i = 0; i < 10; ++i) {
    const int64_t sys = kSys + i * 100'000'000LL;  // every 100 ms
    const std::vector<PhcTriplet> t = {{sys - 150, phc_at(sys) + (sys - kSys), sys + 150}};
    PhcOffset o;
    std::string error;
    ASSERT_TRUE(PhcOffsetFromTriplets(t, PhcMethod::kExtended, &o, &error));
    EXPECT_FALSE(m.Add(o));
  }
  for (int64_t sys = kSys; sys < kSys + 1'000'000'000LL; sys += 7'000'000) {
    const int64_t phc = phc_at(sys) + (sys - kSys);
    const ConvertedStamp c = m.HwToRealtime(phc);
    ASSERT_TRUE(c.ok);
    EXPECT_LE(std::abs(c.realtime_ns - sys), c.error_ns) << sys - kSys;
  }
}

TEST(PhcMapping, PhcStepIsDetected) {
  PhcMapping m;
  std::string error;
  for (int i = 0; i < 6; ++i) {
    const int64_t sys = kSys + i * 100'000'000LL;
    const int64_t step = i >= 3 ? 1'000'000 : 0;  // ptp4l stepped the PHC by 1 ms
    PhcOffset o;
    ASSERT_TRUE(PhcOffsetFromTriplets(
        std::vector<PhcTriplet>{{sys - 100, kPhc + (sys - kSys) + step, sys + 100}},
        PhcMethod::kExtended, &o, &error));
    EXPECT_EQ(m.Add(o), i == 3) << i;
  }
}

TEST(PhcClock, OpenFailsClearlyWithoutADevice) {
  PhcClock phc;
  std::string error;
  // Pick an index that does not exist here (on a machine with PHCs too).
  int index = 0;
  while (std::filesystem::exists("/dev/ptp" + std::to_string(index))) ++index;
  EXPECT_FALSE(phc.Open(std::to_string(index), &error));
  EXPECT_NE(error.find("/dev/ptp" + std::to_string(index)), std::string::npos) << error;
  EXPECT_NE(error.find("No such file"), std::string::npos) << error;
  if (!std::filesystem::exists("/dev/ptp0")) {
    EXPECT_NE(error.find("no PTP hardware clock"), std::string::npos) << error;
  }
  EXPECT_FALSE(phc.is_open());
  std::printf("Open(\"%d\"): %s\n", index, error.c_str());

  EXPECT_FALSE(phc.Open("ptp" + std::to_string(index), &error));
  EXPECT_NE(error.find("/dev/ptp" + std::to_string(index)), std::string::npos) << error;
}

TEST(PhcClock, RejectsThingsThatAreNotPtpClocks) {
  PhcClock phc;
  std::string error;
  EXPECT_FALSE(phc.Open("eth0", &error));
  EXPECT_NE(error.find("not a PTP clock"), std::string::npos) << error;
  EXPECT_FALSE(phc.Open("", &error));
  EXPECT_FALSE(phc.Open("/dev/null", &error));
  EXPECT_NE(error.find("not a PTP hardware clock"), std::string::npos) << error;
  EXPECT_FALSE(phc.is_open());
}

TEST(PhcClock, MeasureWithoutOpenFails) {
  PhcClock phc;
  PhcOffset o;
  std::string error;
  EXPECT_FALSE(phc.Measure(&o, &error));
  EXPECT_EQ(error, "PHC not open");
  int64_t ns = 0;
  EXPECT_FALSE(phc.ReadTime(&ns, &error));
  EXPECT_EQ(phc.method(), PhcMethod::kNone);
}

// The PHC descriptor outlives the privilege drop: a writable one would let
// the agent (or whoever takes it over) set the NIC clock with no capability.
// Test double for /dev/ptpN: a regular file the test may write, opened
// through the agent's PTP open; the descriptor's access mode must be
// read-only all the same.
TEST(PhcClock, DeviceIsOpenedReadOnly) {
  char path[] = "/tmp/phc_mapping_test_fake_ptp.XXXXXX";
  const int made = mkstemp(path);
  ASSERT_GE(made, 0);
  close(made);
  std::string error;
  const int fd = OpenPtpDeviceReadOnly(path, &error);
  ASSERT_GE(fd, 0) << error;
  const int flags = fcntl(fd, F_GETFL);
  EXPECT_EQ(flags & O_ACCMODE, O_RDONLY) << "the PHC must not be opened writable";
  EXPECT_NE(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
  EXPECT_EQ(write(fd, "x", 1), -1);
  EXPECT_EQ(errno, EBADF);
  close(fd);
  // Through PhcClock::Open the double is refused (no PTP_CLOCK_GETCAPS), with no descriptor left.
  PhcClock phc;
  EXPECT_FALSE(phc.Open(path, &error));
  EXPECT_NE(error.find("not a PTP hardware clock"), std::string::npos) << error;
  unlink(path);
}

// Runs only where a PHC exists (not on these VMs).
}  // namespace
}  // namespace chronolink
