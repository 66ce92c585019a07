// Device planes: what AppendDevicePlanes writes (planes, stream lines,
// stats, launches, the clock plane), the line base it chooses or follows,
// what it counts instead of writing, the requests it refuses (leaving the
// trace as it was), and that the result reads back and aligns.
#include "collector/export/device_planes.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>

#include "collector/clock/device_clock_map.h"
#include "trace/align/trace_aligner.h"
#include "trace/exporters/xspace_writer.h"
#include "trace/importers/xspace/line_base.h"
#include "trace/importers/xspace/xspace_reader.h"
#include "trace/model/xplane_edit.h"

namespace chronolink::collector {
namespace {

constexpr int64_t kOffset = 1'795'000'000'000'000'000;  // REALTIME - the test domain
constexpr int64_t kBound = 123;

// A HostDomainConversion test double: REALTIME = ns + kOffset with a fixed
// bound, inside [lo, hi] only.
class FixedOffsetConversion : public HostDomainConversion {
 public:
  FixedOffsetConversion(int64_t lo, int64_t hi) : lo_(lo), hi_(hi) {}
  std::string_view domain_name() const override { return "test"; }
  ConvertedStamp ToRealtime(int64_t ns) const override {
    if (ns < lo_ || ns > hi_) return {};
    return {ns + kOffset, kBound, true};
  }
  std::vector<DeviceClockKnot> Samples() const override {
    return {{lo_, lo_ + kOffset, 50, 0}, {hi_, hi_ + kOffset, 60, 0}};
  }

 private:
  int64_t lo_, hi_;
};

GpuActivity Act(ActivityKind kind, uint32_t stream, uint64_t corr, int64_t start, int64_t end,
                const std::string& name = "") {
  GpuActivity a;
  a.kind = kind;
  a.stream = stream;
  a.correlation_id = corr;
  a.start_device_ns = start;
  a.end_device_ns = end;
  a.name = name;
  return a;
}

// Reading back.
struct Ev {
  std::string line, name;
  int64_t start_ns = 0, end_ns = 0;  // on the trace's clock
  std::map<std::string, const xspace::XStat*> stats;
};

std::vector<Ev> Events(const trace::HostTrace& t, std::string_view plane_name) {
  std::vector<Ev> out;
  const xspace::XPlane* p = trace::FindPlane(*t.space, plane_name);
  if (p == nullptr) return out;
  for (const auto& line : p->lines()) {
    for (const auto& e : line.events()) {
      Ev ev;
      ev.line = line.name();
      ev.name = p->event_metadata().at(e.metadata_id()).name();
      ev.start_ns = t.line_base_ns + line.timestamp_ns() + e.offset_ps() / 1000;
      ev.end_ns = ev.start_ns + e.duration_ps() / 1000;
      for (const auto& s : e.stats()) ev.stats[p->stat_metadata().at(s.metadata_id()).name()] = &s;
      out.push_back(ev);
    }
  }
  return out;
}

DeviceExport TestDevice(uint32_t ordinal, const HostDomainConversion* conv,
                        std::vector<GpuActivity> activity) {
  DeviceExport d;
  d.info.ordinal = ordinal;
  d.info.name = "test GPU " + std::to_string(ordinal);
  d.host_domain = conv;
  for (auto& a : activity) a.device = ordinal;
  d.activity = std::move(activity);
  return d;
}

TEST(DevicePlanesTest, WritesXProfsDevicePlaneLinesAndStats) {
  const FixedOffsetConversion conv(1'000, 1'000'000);
  GpuActivity k = Act(ActivityKind::kKernel, 1, 7, 10'000, 15'000, "gemm");
  k.details = "grid:64,1,1 block:256,1,1";
  k.device_error_ns = 40;
  GpuActivity copy = Act(ActivityKind::kMemcpyHtoD, 1, 8, 16'000, 20'000);
  copy.bytes = 4096;
  GpuActivity set = Act(ActivityKind::kMemset, 2, 9, 12'000, 13'000);
  set.bytes = 64;
  const std::vector<DeviceExport> devices = {TestDevice(3, &conv, {copy, k, set})};
  trace::HostTrace t;
  DeviceExportOptions o;
  o.backend = "test";
  DeviceExportStats stats;
  std::string error;
  ASSERT_TRUE(AppendDevicePlanes(devices, o, &t, &stats, &error)) << error;

  const xspace::XPlane* p = trace::FindPlane(*t.space, "/device:GPU:3");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->id(), 3);
  std::vector<std::string> lines;
  for (const auto& l : p->lines()) lines.push_back(l.name());
  EXPECT_EQ(lines, (std::vector<std::string>{"Stream #1(Compute,MemcpyH2D)", "Stream #2(Memset)"}));
  EXPECT_EQ(p->lines(0).id(), 1);

  const std::vector<Ev> ev = Events(t, "/device:GPU:3");
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].name, "gemm");  // the stream's events in time order
  EXPECT_EQ(ev[0].start_ns, 10'000 + kOffset);
  EXPECT_EQ(ev[0].end_ns, 15'000 + kOffset);
  EXPECT_EQ(ev[0].stats.at("correlation_id")->uint64_value(), 7u);
  EXPECT_EQ(ev[0].stats.at("kernel_details")->str_value(), "grid:64,1,1 block:256,1,1");
  EXPECT_EQ(ev[0].stats.at("chronolink_gpu_bound_ns")->int64_value(),
            kBound + 40);  // the record's own error added
  EXPECT_EQ(ev[1].name, "MemcpyH2D");
  EXPECT_EQ(ev[1].stats.at("memcpy_details")->str_value(), "kind:unknown size:4096 dest:3");
  EXPECT_EQ(ev[1].stats.at("chronolink_gpu_bound_ns")->int64_value(), kBound);
  EXPECT_EQ(ev[2].name, "Memset");
  EXPECT_EQ(ev[2].stats.at("Memset_details")->str_value(), "size:64");

  EXPECT_EQ(stats.events_written, 3);
  EXPECT_EQ(stats.max_bound_ns, kBound + 40);
  EXPECT_NEAR(stats.mean_bound_ns, kBound + 40.0 / 3, 1e-9);
  EXPECT_EQ(t.space->warnings_size(), 0);

  // A fresh space: lines relative to a start set to the earliest instant (the clock plane's first sample).
  EXPECT_EQ(trace::ProfileStartTime(*t.space).value_or(0), static_cast<uint64_t>(1'000 + kOffset));
  EXPECT_EQ(trace::ProfileStopTime(*t.space).value_or(0), static_cast<uint64_t>(1'000'000 + kOffset));
  EXPECT_EQ(t.line_base_ns, 1'000 + kOffset);
  EXPECT_NE(trace::FindPlane(*t.space, "Task Environment")->id(), 3);
}

TEST(DevicePlanesTest, LaunchesGoToTheHostCpuPlaneOneLinePerThread) {
  const FixedOffsetConversion conv(1'000, 1'000'000);
  GpuActivity a = Act(ActivityKind::kKernel, 1, 7, 10'000, 15'000, "gemm");
  a.launch_host_start_ns = kOffset + 8'000;
  a.launch_host_end_ns = kOffset + 9'000;
  a.launch_thread = 77;
  GpuActivity b = Act(ActivityKind::kMemcpyDtoH, 1, 8, 16'000, 20'000);
  b.launch_host_start_ns = kOffset + 5'000;
  b.launch_host_end_ns = kOffset + 6'000;
  b.launch_thread = 77;
  trace::HostTrace t;
  DeviceExportStats stats;
  std::string error;
  ASSERT_TRUE(AppendDevicePlanes({TestDevice(0, &conv, {a, b})}, {}, &t, &stats, &error)) << error;
  const xspace::XPlane* cpu = trace::FindPlane(*t.space, "/host:CPU");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->id(), 49);
  const std::vector<Ev> ev = Events(t, "/host:CPU");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].line, "GPU launches (thread 77)");
  EXPECT_EQ(ev[0].name, "Launch MemcpyD2H");
  EXPECT_EQ(ev[0].start_ns, kOffset + 5'000);
  EXPECT_EQ(ev[1].name, "Launch gemm");
  EXPECT_EQ(ev[1].stats.at("correlation_id")->uint64_value(), 7u);
  EXPECT_EQ(ev[1].stats.count("chronolink_gpu_bound_ns"), 0u);  // host stamps: nothing converted
  EXPECT_EQ(stats.launch_events_written, 2);
  // The Task Environment plane a fresh space gets made way for GPU 0.
  EXPECT_EQ(trace::FindPlane(*t.space, "/device:GPU:0")->id(), 0);
  EXPECT_NE(trace::FindPlane(*t.space, "Task Environment")->id(), 0);
}

TEST(DevicePlanesTest, TheClockPlaneRecordsTheConversionAndTheClusterMapping) {
  const FixedOffsetConversion conv(1'000, 1'000'000);
  DeviceExportOptions o;
  o.backend = "rocprof import";
  // Two mappings read during the run, each of an instant before its read.
  o.cluster_mappings.node_id = 4;
  o.cluster_mappings.mappings = {
      {.ref_ns = kOffset - 5'000, .offset_ns = -12'000, .uncertainty_ns = 700, .read_ns = kOffset + 2'100},
      {.ref_ns = kOffset - 3'000, .offset_ns = -12'345, .uncertainty_ns = 800, .read_ns = kOffset + 2'600}};
  trace::HostTrace t;
  DeviceExportStats stats;
  std::string error;
  // Two devices sharing one recording: one line for it.
  ASSERT_TRUE(
      AppendDevicePlanes({TestDevice(0, &conv, {Act(ActivityKind::kKernel, 1, 1, 2'000, 3'000, "k")}),
                          TestDevice(1, &conv, {Act(ActivityKind::kKernel, 1, 2, 2'000, 3'000, "k")})},
                         o, &t, &stats, &error))
      << error;
  const xspace::XPlane* clock = trace::FindPlane(*t.space, kGpuClockPlane);
  ASSERT_NE(clock, nullptr);
  EXPECT_EQ(trace::GetPlaneStatStr(*clock, "backend").value_or(""), "rocprof import");
  EXPECT_EQ(trace::GetPlaneStatInt64(*clock, "cluster_offset_ns").value_or(0), -12'345);
  EXPECT_EQ(trace::GetPlaneStatInt64(*clock, "cluster_uncertainty_ns").value_or(0), 800);
  EXPECT_EQ(trace::GetPlaneStatInt64(*clock, "events_written").value_or(-1), 2);
  ASSERT_EQ(clock->lines_size(), 2);
  const std::vector<Ev> ev = Events(t, kGpuClockPlane);
  ASSERT_EQ(ev.size(), 5u);  // the map's span, its two samples, the two mappings
  EXPECT_EQ(ev[0].name, "map");
  EXPECT_EQ(ev[0].stats.at("domain")->str_value(), "test");
  EXPECT_EQ(ev[1].name, "knot");
  EXPECT_EQ(ev[1].start_ns, 1'000 + kOffset);
  EXPECT_EQ(ev[1].stats.at("device_ns")->int64_value(), 1'000);
  EXPECT_EQ(ev[2].stats.at("error_ns")->int64_value(), 60);
  // Each mapping where it was read, its instant a stat.
  EXPECT_EQ(ev[3].line, trace::kRecordedMappingLine);
  EXPECT_EQ(ev[3].start_ns, kOffset + 2'100);
  EXPECT_EQ(ev[3].stats.at(trace::kRecordedRefStat)->int64_value(), kOffset - 5'000);
  EXPECT_EQ(ev[4].stats.at(trace::kRecordedOffsetStat)->int64_value(), -12'345);
  // As chronolink-trace align --recorded-mapping reads them back.
  const auto read = trace::ReadRecordedMappings(*t.space, nullptr);
  ASSERT_TRUE(read);
  EXPECT_EQ(read->node_id, 4u);
  ASSERT_EQ(read->mappings.size(), 2u);
  EXPECT_EQ(read->mappings[0].offset_ns, -12'000);
  EXPECT_EQ(read->mappings[0].read_ns, kOffset + 2'100);
  EXPECT_EQ(read->mappings[1].uncertainty_ns, 800);
}

// One kernel exported with these mapping options: the trace, and where its
// clock plane placed each mapping event.
struct MappingExport {
  trace::HostTrace trace;
  std::vector<int64_t> placed;
};
MappingExport ExportWithMappings(const DeviceExportOptions& o) {
  const FixedOffsetConversion conv(1'000, 1'000'000);
  MappingExport out;
  DeviceExportStats stats;
  std::string error;
  EXPECT_TRUE(AppendDevicePlanes({TestDevice(0, &conv, {Act(ActivityKind::kKernel, 1, 1, 2'000, 3'000, "k")})}, o,
                                 &out.trace, &stats, &error))
      << error;
  for (const Ev& e : Events(out.trace, kGpuClockPlane)) {
    if (e.line == trace::kRecordedMappingLine) out.placed.push_back(e.start_ns);
  }
  return out;
}

// A host clock step back between two reads: the later read is placed
// earlier. Both are written, the line in placement order.
TEST(DevicePlanesTest, MappingsReadAcrossAHostClockStepAreAllWritten) {
  DeviceExportOptions o;
  o.cluster_mappings.node_id = 2;
  o.cluster_mappings.mappings = {{.ref_ns = kOffset - 5'000, .offset_ns = 10, .read_ns = kOffset + 2'600},
                                 {.ref_ns = kOffset - 3'000, .offset_ns = 20, .read_ns = kOffset + 2'100}};
  const MappingExport x = ExportWithMappings(o);
  EXPECT_EQ(x.placed, (std::vector<int64_t>{kOffset + 2'100, kOffset + 2'600}));
  const auto read = trace::ReadRecordedMappings(*x.trace.space, nullptr);
  ASSERT_TRUE(read);
  EXPECT_EQ(read->mappings.size(), 2u);
}

// A stopped run's mappings read after its stop (the wait for one that maps
// the stop) sit at the stop, so the clock plane stays within the profile;
// their read stat keeps when they were read.
TEST(DevicePlanesTest, MappingsReadAfterTheStopArePlacedAtIt) {
  DeviceExportOptions o;
  o.cluster_mappings.node_id = 2;
  o.cluster_mappings.mappings = {{.ref_ns = kOffset - 5'000, .offset_ns = 10, .read_ns = kOffset + 2'100},
                                 {.ref_ns = kOffset + 4'000, .offset_ns = 20, .read_ns = kOffset + 9'000}};
  o.stopped_at_ns = kOffset + 3'500;
  const MappingExport x = ExportWithMappings(o);
  EXPECT_EQ(x.placed, (std::vector<int64_t>{kOffset + 2'100, kOffset + 3'500}));
  const auto read = trace::ReadRecordedMappings(*x.trace.space, nullptr);
  ASSERT_TRUE(read);
  ASSERT_EQ(read->mappings.size(), 2u);
  EXPECT_EQ(read->mappings[1].ref_ns, kOffset + 4'000);
  EXPECT_EQ(read->mappings[1].read_ns, kOffset + 9'000);
}

TEST(DevicePlanesTest, WhatCannotBePlacedIsCountedAndSummarisedOncePerDevice) {
  const FixedOffsetConversion conv(1'000, 1'000'000);
  std::vector<GpuActivity> acts = {Act(ActivityKind::kKernel, 1, 1, 2'000, 3'000, "ok"),
                                   Act(ActivityKind::kKernel, 1, 2, 2'000'000, 3'000'000, "outside"),
                                   Act(ActivityKind::kKernel, 1, 3, 500, 900, "before"),
                                   Act(ActivityKind::kKernel, 1, 4, 9'000, 8'000, "backwards")};
  DeviceExport d = TestDevice(0, &conv, acts);
  d.activity.push_back(Act(ActivityKind::kKernel, 1, 5, 2'000, 3'000, "another device's"));
  d.activity.back().device = 9;
  trace::HostTrace t;
  DeviceExportStats stats;
  std::string error;
  ASSERT_TRUE(AppendDevicePlanes({d}, {}, &t, &stats, &error)) << error;
  EXPECT_EQ(stats.events_written, 1);
  EXPECT_EQ(stats.events_unconvertible, 2);
  EXPECT_EQ(stats.events_invalid, 2);
  ASSERT_EQ(t.space->warnings_size(), 1);
  const std::string& w = t.space->warnings(0);
  EXPECT_NE(w.find("/device:GPU:0: 4 of 5 events not written"), std::string::npos) << w;
  EXPECT_NE(w.find("first at test ns 500"), std::string::npos) << w;
  EXPECT_NE(w.find("2 invalid"), std::string::npos) << w;
}

TEST(DevicePlanesTest, RequestsItCannotHonourAreRefusedAndTheTraceIsUnchanged) {
  const FixedOffsetConversion conv(1'000, 1'000'000);
  const std::vector<GpuActivity> one = {Act(ActivityKind::kKernel, 1, 1, 2'000, 3'000, "k")};
  trace::HostTrace t;
  trace::GetOrCreatePlane(t.space, "/device:GPU:0")->set_id(0);  // another profiler's
  const std::string before = t.space->SerializeAsString();
  DeviceExportStats stats;
  std::string error;
  EXPECT_FALSE(AppendDevicePlanes({TestDevice(0, &conv, one)}, {}, &t, &stats, &error));
  EXPECT_NE(error.find("already has a /device:GPU:0"), std::string::npos) << error;
  EXPECT_FALSE(
      AppendDevicePlanes({TestDevice(1, &conv, one), TestDevice(1, &conv, one)}, {}, &t, &stats, &error));
  EXPECT_NE(error.find("listed twice"), std::string::npos) << error;
  DeviceExport none = TestDevice(2, nullptr, one);
  EXPECT_FALSE(AppendDevicePlanes({none}, {}, &t, &stats, &error));
  EXPECT_NE(error.find("exactly one time conversion"), std::string::npos) << error;
  EXPECT_EQ(t.space->SerializeAsString(), before);

  trace::HostTrace aligned;
  aligned.clock = trace::TraceClock::kClusterTime;
  EXPECT_FALSE(AppendDevicePlanes({TestDevice(1, &conv, one)}, {}, &aligned, &stats, &error));
  EXPECT_NE(error.find("cluster time"), std::string::npos) << error;

  trace::HostTrace unknown_base;
  auto* line = trace::GetOrCreateLine(trace::GetOrCreatePlane(unknown_base.space, "/host:CPU"), "python3");
  line->add_events()->set_duration_ps(1);
  unknown_base.line_base_known = false;
  EXPECT_FALSE(AppendDevicePlanes({TestDevice(1, &conv, one)}, {}, &unknown_base, &stats, &error));
  EXPECT_NE(error.find("unknown start"), std::string::npos) << error;
}

TEST(DevicePlanesTest, AnAbsoluteSpaceGetsAbsoluteLinesARelativeOneRelativeLines) {
  const FixedOffsetConversion conv(1'000, 1'000'000);
  const std::vector<GpuActivity> one = {Act(ActivityKind::kKernel, 1, 1, 2'000, 3'000, "k")};
  std::string error;
  DeviceExportStats stats;
  {  // A host profile with absolute epoch line timestamps.
    trace::HostTrace t;
    auto* line = trace::GetOrCreateLine(trace::GetOrCreatePlane(t.space, "/host:CPU"), "python3");
    line->set_timestamp_ns(kOffset);
    line->add_events()->set_duration_ps(1000);
    ASSERT_TRUE(AppendDevicePlanes({TestDevice(0, &conv, one)}, {}, &t, &stats, &error)) << error;
    EXPECT_EQ(trace::FindPlane(*t.space, "/device:GPU:0")->lines(0).timestamp_ns(), 2'000 + kOffset);
    EXPECT_FALSE(trace::ProfileStartTime(*t.space).has_value());
    trace::LineBase base;
    ASSERT_TRUE(trace::DetectLineBase(*t.space, &base, &error)) << error;
    EXPECT_FALSE(base.relative);
  }
  {  // One relative to its profile start (JAX).
    trace::HostTrace t;
    trace::SetProfileStartTime(t.space, static_cast<uint64_t>(kOffset));
    auto* line = trace::GetOrCreateLine(trace::GetOrCreatePlane(t.space, "/host:CPU"), "python3");
    line->set_timestamp_ns(500);
    line->add_events()->set_duration_ps(1000);
    t.line_base_ns = kOffset;
    ASSERT_TRUE(AppendDevicePlanes({TestDevice(0, &conv, one)}, {}, &t, &stats, &error)) << error;
    EXPECT_EQ(trace::FindPlane(*t.space, "/device:GPU:0")->lines(0).timestamp_ns(), 2'000);
    trace::LineBase base;
    ASSERT_TRUE(trace::DetectLineBase(*t.space, &base, &error)) << error;
    EXPECT_TRUE(base.relative);
    EXPECT_EQ(base.base_ns, kOffset);
  }
}

// A GPU counter at 100 MHz nominal running 20 ppm fast, read every 10 ms
// with 200 ns brackets: the real map (collector/clock/) converts it.
TEST(DevicePlanesTest, AGpuClockMapsTimesLandWithinTheirBound) {
  constexpr int64_t kHost0 = 1'795'000'000'000'000'000;
  auto device_at = [](int64_t host_ns) {  // the device's ns at a true host instant
    const int64_t since = host_ns - kHost0;
    return 5'000'000'000 + since + since / 50'000;  // +20 ppm
  };
  DeviceClockMap map;
  for (int64_t t = kHost0; t <= kHost0 + 2'000'000'000; t += 10'000'000) {
    const SnapshotReading r{t - 100, device_at(t), t + 100};
    map.AddSample(std::span<const SnapshotReading>(&r, 1));
  }
  DeviceExport d;
  d.info.ordinal = 0;
  d.info.name = "sim";
  d.map = &map;
  std::vector<int64_t> true_starts;
  for (int i = 0; i < 100; ++i) {
    const int64_t true_start = kHost0 + 10'000'000 + i * 19'000'000 + i * 37;
    true_starts.push_back(true_start);
    GpuActivity a =
        Act(ActivityKind::kKernel, 13, 100 + i, device_at(true_start), device_at(true_start + 50'000), "k");
    d.activity.push_back(a);
  }
  trace::HostTrace t;
  DeviceExportStats stats;
  std::string error;
  ASSERT_TRUE(AppendDevicePlanes({d}, {}, &t, &stats, &error)) << error;
  ASSERT_EQ(stats.events_written, 100);
  const std::vector<Ev> ev = Events(t, "/device:GPU:0");
  ASSERT_EQ(ev.size(), 100u);
  for (size_t i = 0; i < ev.size(); ++i) {
    const int64_t bound = ev[i].stats.at("chronolink_gpu_bound_ns")->int64_value();
    EXPECT_LE(std::llabs(ev[i].start_ns - true_starts[i]), bound) << i;
    EXPECT_LT(bound, 10'000) << i;  // loose: 100 ns brackets every 10 ms
  }
  const std::vector<Ev> clock = Events(t, kGpuClockPlane);
  ASSERT_GT(clock.size(), 2u);
  EXPECT_EQ(clock[0].line, "GPU 0 clock map");
  EXPECT_EQ(clock[0].stats.at("samples")->uint64_value(), map.stats().samples);
}

// A HostClockMap test double: cluster = host - 2 ms, bound 300 ns.
class ShiftMap : public trace::HostClockMap {
 public:
  std::optional<trace::MappedInstant> Map(const trace::TraceInstant& host) const override {
    trace::MappedInstant m;
    m.cluster = {host.ns - 2'000'000, host.ps};
    m.uncertainty_ns = 300;
    m.correction_ns = -2e6;
    return m;
  }
  std::string Describe() const override { return "shift (test double)"; }
};

TEST(DevicePlanesTest, TheSpaceReadsBackAndAlignsWithTheBoundsAdded) {
  const FixedOffsetConversion conv(1'000, 1'000'000);
  trace::HostTrace t;
  t.host = "n1";
  trace::SetHostnames(t.space, {"n1"});
  DeviceExportStats stats;
  std::string error;
  ASSERT_TRUE(
      AppendDevicePlanes({TestDevice(0, &conv, {Act(ActivityKind::kKernel, 1, 1, 20'000, 30'000, "k")})}, {},
                         &t, &stats, &error))
      << error;
  std::string bytes;
  ASSERT_TRUE(trace::SerializeXSpace(*t.space, &bytes, &error)) << error;
  trace::HostTrace back;
  ASSERT_TRUE(trace::ParseXSpace(bytes, &back, &error)) << error;
  EXPECT_EQ(back.line_base_ns, t.line_base_ns);
  ASSERT_EQ(Events(back, "/device:GPU:0").at(0).start_ns, 20'000 + kOffset);

  const ShiftMap map;
  trace::AlignOptions o;
  o.annotate_events = true;
  trace::AlignResult result;
  ASSERT_TRUE(trace::AlignHosts({&back}, {&map}, o, &result, &error)) << error;
  const Ev e = Events(back, "/device:GPU:0").at(0);
  EXPECT_EQ(e.start_ns, 20'000 + kOffset - 2'000'000);
  EXPECT_DOUBLE_EQ(e.stats.at("chronolink_bound_ns")->double_value(), 300.0 + kBound);
}

}  // namespace
}  // namespace chronolink::collector
