#include "trace/align/trace_aligner.h"

#include <gtest/gtest.h>

#include <cmath>

#include "trace/align/correction_record.h"
#include "trace/model/xplane_edit.h"

namespace chronolink::trace {

// Found by gtest (argument-dependent lookup) only in the type's own namespace.
void PrintTo(const TraceInstant& t, std::ostream* os) { *os << t.ns << " ns + " << t.ps << " ps"; }

namespace {

constexpr int64_t kT0 = 1'795'320'000'000'000'000;  // an epoch instant, ns

// A test double for a solved correction: the host clock is the true clock
// skewed by v = t + offset + drift*(t - t0) (the test bed's virtual clock);
// the map inverts it exactly, so an aligned event must land on its true time.
class SkewedClockMap : public HostClockMap {
 public:
  SkewedClockMap(int64_t offset_ns, double drift_ppm, int64_t solved_until_ns = INT64_MAX)
      : offset_ns_(offset_ns), rate_(drift_ppm * 1e-6), solved_until_ns_(solved_until_ns) {}

  std::optional<MappedInstant> Map(const TraceInstant& host) const override {
    // t = t0 + (v - offset - t0) / (1 + rate); the correction is t - v.
    const double since = static_cast<double>(host.ns - kT0 - offset_ns_) + host.ps * 1e-3;
    const double correction_ns = since / (1 + rate_) - since - static_cast<double>(offset_ns_);
    MappedInstant m;
    m.correction_ns = correction_ns;
    m.uncertainty_ns = 50;
    const auto t = AddPs(host, std::llround(correction_ns * 1000));
    if (!t) return std::nullopt;
    m.cluster = *t;
    if (host.ns > solved_until_ns_) {
      m.quality = MapQuality::kExtrapolated;
      m.beyond_span_ns = host.ns - solved_until_ns_;
    }
    return m;
  }
  std::string Describe() const override { return "skewed clock (test double)"; }

  int64_t ToHost(int64_t true_ns) const {
    return true_ns + offset_ns_ + std::llround(rate_ * static_cast<double>(true_ns - kT0));
  }

 private:
  int64_t offset_ns_;
  double rate_;
  int64_t solved_until_ns_;
};

// A host with a Task Environment, a CPU plane and a GPU plane whose events
// happen at the given TRUE instants, stamped on the host's skewed clock,
// with line timestamps relative to the profile start like JAX writes them.
HostTrace MakeHost(const std::string& name, const SkewedClockMap& clock,
                   const std::vector<int64_t>& true_starts, int64_t duration_ns) {
  HostTrace h;
  h.host = name;
  const int64_t start = clock.ToHost(true_starts.front() - 1'000);
  SetProfileStartTime(h.space, start);
  SetProfileStopTime(h.space, clock.ToHost(true_starts.back() + duration_ns + 1'000));
  h.line_base_ns = start;
  for (const char* plane_name : {"/host:CPU", "/device:GPU:0"}) {
    xspace::XPlane* plane = GetOrCreatePlane(h.space, plane_name);
    const int64_t md = GetOrCreateEventMetadata(plane, "all-reduce.1")->id();
    xspace::XLine* line = GetOrCreateLine(plane, "Stream #1(Compute)");
    line->set_timestamp_ns(500);
    for (int64_t t : true_starts) {
      xspace::XEvent* e = line->add_events();
      e->set_metadata_id(md);
      e->set_offset_ps((clock.ToHost(t) - start - 500) * 1000);
      e->set_duration_ps((clock.ToHost(t + duration_ns) - clock.ToHost(t)) * 1000);
    }
  }
  SetHostnames(h.space, {name});
  return h;
}

std::vector<TraceInstant> Starts(const HostTrace& h, const char* plane_name) {
  std::vector<TraceInstant> out;
  const xspace::XPlane* plane = FindPlane(*h.space, plane_name);
  for (const auto& line : plane->lines()) {
    if (line.name() != "Stream #1(Compute)") continue;  // not the counters line alignment adds
    for (const auto& e : line.events()) out.push_back(*EventStart(h.line_base_ns, line, e));
  }
  return out;
}

TEST(TraceAlignerTest, HostsSkewedByOffsetAndDriftLandOnTheirTrueTimes) {
  // 60 s apart events: 100 ppm of drift is 6 ms over the profile, which a
  // single offset would leave in place.
  const std::vector<int64_t> truth = {kT0 + 1'000'000'000, kT0 + 31'000'000'000, kT0 + 61'000'000'000};
  const SkewedClockMap a(-48'000'000, 100.0), b(37'000'000, -95.0);
  HostTrace ha = MakeHost("a", a, truth, 2'000'000);
  HostTrace hb = MakeHost("b", b, truth, 2'000'000);
  AlignResult result;
  std::string error;
  ASSERT_TRUE(AlignHosts({&ha, &hb}, {&a, &b}, AlignOptions{}, &result, &error)) << error;

  EXPECT_EQ(ha.clock, TraceClock::kClusterTime);
  EXPECT_EQ(ha.line_base_ns, result.origin_ns);
  EXPECT_EQ(hb.line_base_ns, result.origin_ns);
  for (const HostTrace* h : {&ha, &hb}) {
    for (const char* plane : {"/host:CPU", "/device:GPU:0"}) {
      const auto starts = Starts(*h, plane);
      ASSERT_EQ(starts.size(), truth.size());
      for (size_t i = 0; i < truth.size(); ++i) {
        EXPECT_LE(std::abs(starts[i].ns - truth[i]), 1) << h->host << " " << plane << " event " << i;
      }
    }
  }
  // Durations follow the drift too: the 2 ms event is 2 ms of true time.
  const auto& e = FindPlane(*ha.space, "/host:CPU")->lines(0).events(0);
  EXPECT_NEAR(static_cast<double>(e.duration_ps()), 2e9, 2'000);
  // The origin precedes every event and is what XProf reads as the start.
  EXPECT_LE(result.origin_ns, truth.front());
  EXPECT_EQ(ProfileStartTime(*ha.space), static_cast<uint64_t>(result.origin_ns));
  EXPECT_EQ(ProfileStartTime(*hb.space), static_cast<uint64_t>(result.origin_ns));
  EXPECT_EQ(result.hosts[0].events, 6);
}

TEST(TraceAlignerTest, TheCorrectionAndItsSourceAreRecordedInTheTrace) {
  const SkewedClockMap a(5'000'000, 20.0);
  HostTrace ha = MakeHost("a", a, {kT0 + 1'000'000'000, kT0 + 2'000'000'000}, 1'000);
  AlignOptions options;
  options.offsets_source = "offsets.jsonl (leader 1)";
  AlignResult result;
  std::string error;
  ASSERT_TRUE(AlignHosts({&ha}, {&a}, options, &result, &error)) << error;
  const xspace::XPlane* record = FindPlane(*ha.space, kCorrectionPlane);
  ASSERT_NE(record, nullptr);
  EXPECT_EQ(GetPlaneStatStr(*record, "offsets_source"), "offsets.jsonl (leader 1)");
  EXPECT_EQ(GetPlaneStatStr(*record, "correction_model"), "skewed clock (test double)");
  EXPECT_EQ(GetPlaneStatInt64(*record, "common_origin_ns"), result.origin_ns);
  EXPECT_NEAR(*GetPlaneStatDouble(*record, "correction_first_ns"), -5'000'000, 100'000);
  EXPECT_EQ(GetPlaneStatDouble(*record, "uncertainty_max_ns"), 50.0);
  // The counters line XProf draws sits on the CPU plane, not the GPU one.
  const xspace::XPlane* cpu = FindPlane(*ha.space, "/host:CPU");
  bool counters = false;
  for (const auto& line : cpu->lines()) counters |= line.name() == kCountersLine && line.events_size() > 0;
  EXPECT_TRUE(counters);
}

// A producer's own `_counters_` line (XProf draws it as counter tracks):
// the correction's samples join it at their own instants, whatever the
// line's start, and an empty one's far timestamp is not kept (the output
// would mix absolute and relative line times and not read back).
TEST(TraceAlignerTest, ACountersLineAlreadyThereGetsTheSamplesAtTheirInstants) {
  const SkewedClockMap a(5'000'000, 20.0);
  const std::vector<int64_t> truth = {kT0 + 1'000'000'000, kT0 + 3'000'000'000};
  for (const bool empty : {false, true}) {
    HostTrace ha = MakeHost("a", a, truth, 1'000);
    xspace::XLine* own = GetOrCreateLine(GetOrCreatePlane(ha.space, "/host:CPU"), kCountersLine);
    own->set_timestamp_ns(empty ? 4'000'000'000'000'000'000 : 700'000'000);
    if (!empty) own->add_events()->set_offset_ps(1'000'000);
    AlignResult result;
    std::string error;
    ASSERT_TRUE(AlignHosts({&ha}, {&a}, AlignOptions{}, &result, &error)) << error;
    const xspace::XPlane* cpu = FindPlane(*ha.space, "/host:CPU");
    int lines = 0, samples = 0;
    for (const auto& line : cpu->lines()) {
      if (line.name() != kCountersLine) continue;
      ++lines;
      for (const auto& e : line.events()) {
        if (e.stats_size() == 0) continue;  // the producer's own
        ++samples;
        const auto t = EventStart(ha.line_base_ns, line, e);
        ASSERT_TRUE(t);
        EXPECT_GE(t->ns, truth.front() - 2'000) << "a sample before the profile";  // the session starts 1 µs early
        EXPECT_LE(t->ns, truth.back() + 3'000) << "a sample after the profile";
      }
    }
    EXPECT_EQ(lines, 1);
    EXPECT_GT(samples, 0);
  }
}

TEST(TraceAlignerTest, AnnotatedEventsCarryTheirOwnBound) {
  const SkewedClockMap a(5'000'000, 20.0);
  HostTrace ha = MakeHost("a", a, {kT0 + 1'000'000'000}, 1'000);
  AlignOptions options;
  options.annotate_events = true;
  AlignResult result;
  std::string error;
  ASSERT_TRUE(AlignHosts({&ha}, {&a}, options, &result, &error)) << error;
  const xspace::XPlane* gpu = FindPlane(*ha.space, "/device:GPU:0");
  const auto id = FindStatMetadataId(*gpu, kEventBoundStat);
  ASSERT_TRUE(id);
  const xspace::XEvent& e = gpu->lines(0).events(0);
  ASSERT_EQ(e.stats_size(), 1);
  EXPECT_EQ(e.stats(0).metadata_id(), *id);
  EXPECT_EQ(e.stats(0).double_value(), 50.0);
}

TEST(TraceAlignerTest, AProducersOwnBoundIsAddedToTheCorrections) {
  // The GPU collector states each device event's GPU -> host bound; the
  // event's whole bound on cluster time is that plus the correction's.
  const SkewedClockMap a(5'000'000, 20.0);
  HostTrace ha = MakeHost("a", a, {kT0 + 1'000'000'000}, 1'000);
  xspace::XPlane* gpu = FindMutablePlane(ha.space, "/device:GPU:0");
  const int64_t source_id = GetOrCreateStatMetadata(gpu, kSourceBoundStat)->id();
  xspace::XStat* own = gpu->mutable_lines(0)->mutable_events(0)->add_stats();
  own->set_metadata_id(source_id);
  own->set_int64_value(300);
  AlignOptions options;
  options.annotate_events = true;
  AlignResult result;
  std::string error;
  ASSERT_TRUE(AlignHosts({&ha}, {&a}, options, &result, &error)) << error;
  const auto id = FindStatMetadataId(*gpu, kEventBoundStat);
  ASSERT_TRUE(id);
  const xspace::XEvent& e = gpu->lines(0).events(0);
  ASSERT_EQ(e.stats_size(), 2);
  EXPECT_EQ(e.stats(1).metadata_id(), *id);
  EXPECT_EQ(e.stats(1).double_value(), 350.0);  // 50 (correction) + 300 (GPU -> host)
}

TEST(TraceAlignerTest, ABoundBeyondTheLimitIsRefusedNotShipped) {
  const SkewedClockMap a(0, 0.0);  // states a 50 ns bound
  HostTrace ha = MakeHost("gpu3", a, {kT0 + 1'000}, 10);
  AlignOptions options;
  options.max_bound_ns = 40;
  AlignResult result;
  std::string error;
  EXPECT_FALSE(AlignHosts({&ha}, {&a}, options, &result, &error));
  EXPECT_NE(error.find("host gpu3"), std::string::npos) << error;
  EXPECT_NE(error.find("--max-bound-us"), std::string::npos) << error;
}

TEST(TraceAlignerTest, EventOrderOnEveryLineIsKept) {
  std::vector<int64_t> truth;
  for (int i = 0; i < 1000; ++i) truth.push_back(kT0 + i * 7'919);  // dense, 7.9 µs apart
  const SkewedClockMap a(-1'234'567, 99.9);
  HostTrace ha = MakeHost("a", a, truth, 10);
  AlignResult result;
  std::string error;
  ASSERT_TRUE(AlignHosts({&ha}, {&a}, AlignOptions{}, &result, &error)) << error;
  const auto starts = Starts(ha, "/host:CPU");
  for (size_t i = 1; i < starts.size(); ++i) ASSERT_LT(starts[i - 1], starts[i]) << i;
}

TEST(TraceAlignerTest, ATraceFarOutsideTheSolvedSpanIsRefused) {
  const SkewedClockMap a(0, 0.0, /*solved_until_ns=*/kT0);
  HostTrace ha = MakeHost("gpu7", a, {kT0 + 3'600'000'000'000}, 10);
  AlignOptions options;
  options.max_extrapolation_ns = 60'000'000'000;
  AlignResult result;
  std::string error;
  EXPECT_FALSE(AlignHosts({&ha}, {&a}, options, &result, &error));
  EXPECT_NE(error.find("gpu7"), std::string::npos) << error;
  EXPECT_NE(error.find("outside the solved offsets"), std::string::npos) << error;
}

TEST(TraceAlignerTest, ExtrapolatedEventsAreCountedWithTheirDistance) {
  const SkewedClockMap a(0, 0.0, /*solved_until_ns=*/kT0 + 1'500'000'000);
  HostTrace ha = MakeHost("a", a, {kT0 + 1'000'000'000, kT0 + 2'000'000'000}, 10);
  AlignResult result;
  std::string error;
  ASSERT_TRUE(AlignHosts({&ha}, {&a}, AlignOptions{}, &result, &error)) << error;
  EXPECT_EQ(result.hosts[0].events_extrapolated, 2);  // one per plane
  EXPECT_NEAR(result.hosts[0].max_beyond_span_ns, 500'000'000, 10);
}

TEST(TraceAlignerTest, RelativeTimesWithoutAKnownStartAreRefused) {
  const SkewedClockMap a(0, 0.0);
  HostTrace ha = MakeHost("rank3", a, {kT0 + 1'000}, 10);
  ha.line_base_known = false;
  ha.source = "rank3.json";
  AlignResult result;
  std::string error;
  EXPECT_FALSE(AlignHosts({&ha}, {&a}, AlignOptions{}, &result, &error));
  EXPECT_NE(error.find("rank3.json"), std::string::npos) << error;
  EXPECT_NE(error.find("--origin"), std::string::npos) << error;
}

TEST(TraceAlignerTest, AlignedTracesAreNotAlignedTwice) {
  const SkewedClockMap a(0, 0.0);
  HostTrace ha = MakeHost("a", a, {kT0 + 1'000}, 10);
  AlignResult result;
  std::string error;
  ASSERT_TRUE(AlignHosts({&ha}, {&a}, AlignOptions{}, &result, &error)) << error;
  EXPECT_FALSE(AlignHosts({&ha}, {&a}, AlignOptions{}, &result, &error));
  EXPECT_NE(error.find("already on cluster time"), std::string::npos) << error;
}

}  // namespace
}  // namespace chronolink::trace
