// The wire-level span scan (trace/wire/xspace_span_scan.h)
// against the parsed model: the same line base and the same first and last
// instants on generated runs (relative and absolute lines) and on messages
// built to hit each rule (fields out of order, oneof members overriding
// each other, negative durations, session bounds outside the events), and
// a decline, never a wrong answer, on what it leaves to the parser.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "tools/trace_fixture/xspace_fixture.h"
#include "trace/importers/xspace/xspace_reader.h"
#include "trace/model/host_span.h"
#include "trace/model/xplane_edit.h"
#include "trace/wire/xspace_span_scan.h"

namespace chronolink::trace {
namespace {

constexpr uint64_t kStart = 1'795'320'926'000'000'000;

// The model's answer for serialized bytes: parsed, then HostSpan.
HostSpanInstants ModelSpan(const std::string& bytes, int64_t* base) {
  HostTrace trace;
  std::string error;
  EXPECT_TRUE(ParseXSpace(bytes, &trace, &error)) << error;
  HostSpanInstants span;
  EXPECT_TRUE(HostSpan(trace, &span, &error)) << error;
  *base = trace.line_base_ns;
  return span;
}

void ExpectScanMatchesModel(const xspace::XSpace& space) {
  const std::string bytes = space.SerializeAsString();
  int64_t base = 0;
  const HostSpanInstants model = ModelSpan(bytes, &base);
  std::string why;
  const auto scanned = ScanXSpaceSpan(bytes, &why);
  ASSERT_TRUE(scanned) << why;
  EXPECT_EQ(scanned->base.base_ns, base);
  EXPECT_EQ(scanned->span.first.ns, model.first.ns);
  EXPECT_EQ(scanned->span.first.ps, model.first.ps);
  EXPECT_EQ(scanned->span.last.ns, model.last.ns);
  EXPECT_EQ(scanned->span.last.ps, model.last.ps);
}

TEST(XSpaceSpanScanTest, GeneratedRunsRelativeAndAbsolute) {
  for (const bool absolute : {false, true}) {
    XSpaceFixtureOptions options;
    options.absolute_line_timestamps = absolute;
    std::vector<FixtureHost> hosts;
    std::string error;
    ASSERT_TRUE(ResolveFixtureHosts(options, &hosts, &error)) << error;
    for (const auto& host : hosts) {
      HostTrace trace;
      ASSERT_TRUE(GenerateFixtureHost(options, host, &trace, &error)) << error;
      SCOPED_TRACE(host.host + (absolute ? " absolute" : " relative"));
      ExpectScanMatchesModel(*trace.space);
    }
  }
}

TEST(XSpaceSpanScanTest, EventsOutsideTheSessionBoundsAndSubNanosecondEdges) {
  xspace::XSpace space;
  SetProfileStartTime(&space, kStart);
  SetProfileStopTime(&space, kStart + 1'000'000);
  auto* line = space.add_planes()->add_lines();
  line->set_timestamp_ns(-5'000);  // a thread that began before the session
  auto* e = line->add_events();
  e->set_offset_ps(1'234);
  e->set_duration_ps(-999);  // a negative duration: its end precedes its start
  auto* late = line->add_events();
  late->set_offset_ps(3'000'000'000'777);  // past profile_stop_time
  late->set_duration_ps(5);
  ExpectScanMatchesModel(space);
}

TEST(XSpaceSpanScanTest, OneofMembersAndUntimedEvents) {
  xspace::XSpace space;
  SetProfileStartTime(&space, kStart);
  auto* line = space.add_planes()->add_lines();
  line->set_timestamp_ns(10);
  auto* counted = line->add_events();  // counts occurrences: no time
  counted->set_num_occurrences(7);
  counted->set_duration_ps(900'000'000'000'000);
  line->add_events()->set_duration_ps(40);  // neither member: timed at offset 0
  // The same event with offset_ps written after num_occurrences: timed again.
  xspace::XEvent overridden;
  overridden.set_num_occurrences(3);
  std::string event_bytes = overridden.SerializeAsString();
  xspace::XEvent offset_only;
  offset_only.set_offset_ps(-77'000);
  event_bytes += offset_only.SerializeAsString();
  xspace::XEvent parsed;
  ASSERT_TRUE(parsed.ParseFromString(event_bytes));
  ASSERT_EQ(parsed.data_case(), xspace::XEvent::kOffsetPs);
  *line->add_events() = parsed;
  ExpectScanMatchesModel(space);
}

TEST(XSpaceSpanScanTest, LineFieldsAfterItsEventsAndTaskEnvironmentLast) {
  // protobuf writes fields in number order; a producer need not. Concatenated
  // messages merge: the line's timestamp arrives after its events, and the
  // Task Environment plane after every other.
  xspace::XLine events_only;
  events_only.add_events()->set_offset_ps(5'000);
  xspace::XLine stamp_only;
  stamp_only.set_timestamp_ns(2'000);
  xspace::XLine merged;
  ASSERT_TRUE(merged.ParseFromString(events_only.SerializeAsString() + stamp_only.SerializeAsString()));
  ASSERT_EQ(merged.timestamp_ns(), 2'000);
  xspace::XSpace space;
  *space.add_planes()->add_lines() = merged;
  SetProfileStartTime(&space, kStart);
  ExpectScanMatchesModel(space);
}

TEST(XSpaceSpanScanTest, DeclinesWhatItLeavesToTheParser) {
  std::string why;
  EXPECT_FALSE(ScanXSpaceSpan(std::string("\x0a\x05\x12\x03", 4), &why));  // truncated
  EXPECT_FALSE(why.empty());
  EXPECT_FALSE(ScanXSpaceSpan(std::string("\x0b\x0c", 2), &why));  // a group
  xspace::XSpace no_events;
  SetProfileStartTime(&no_events, kStart);
  no_events.add_planes()->add_lines()->set_timestamp_ns(1);
  // Only the session bounds: the model's span is those, and so is the scan's.
  ExpectScanMatchesModel(no_events);
  xspace::XSpace relative_no_start;
  relative_no_start.add_planes()->add_lines()->add_events()->set_offset_ps(1);
  EXPECT_FALSE(ScanXSpaceSpan(relative_no_start.SerializeAsString(), &why));
  EXPECT_EQ(why, "relative line times with no start");
  xspace::XSpace overflow;
  auto* line = overflow.add_planes()->add_lines();
  line->set_timestamp_ns(std::numeric_limits<int64_t>::max() - 1);
  line->add_events()->set_offset_ps(std::numeric_limits<int64_t>::max());
  EXPECT_FALSE(ScanXSpaceSpan(overflow.SerializeAsString(), &why));
}

TEST(XSpaceSpanScanTest, ReadsAFileIntoAReusedBuffer) {
  XSpaceFixtureOptions options;
  std::vector<FixtureHost> hosts;
  std::string error;
  ASSERT_TRUE(ResolveFixtureHosts(options, &hosts, &error)) << error;
  HostTrace trace;
  ASSERT_TRUE(GenerateFixtureHost(options, hosts[0], &trace, &error)) << error;
  const auto path = std::filesystem::temp_directory_path() / "span_scan_test.xplane.pb";
  {
    std::ofstream out(path, std::ios::binary);
    out << trace.space->SerializeAsString();
  }
  ScanBuffer buffer;
  std::string why;
  const auto a = ScanXSpaceFileSpan(path, &buffer, &why);
  const auto b = ScanXSpaceFileSpan(path, &buffer, &why);
  ASSERT_TRUE(a && b) << why;
  EXPECT_EQ(a->span, b->span);
  EXPECT_FALSE(ScanXSpaceFileSpan(path.string() + ".missing", &buffer, &why));
  std::filesystem::remove(path);
}

// The predicted span reads only headers: on the fixture's hosts (lines in
// start order) its first instant is the exact one, its last a guess; on
// a line whose first event is not its earliest its first instant is wrong,
// which the rewrite that checks it must see (xspace_wire_align_test.cc).
TEST(XSpaceSpanPredictTest, ExactOnOrderedLinesAndLateOnAnUnorderedOne) {
  XSpaceFixtureOptions options;
  options.hosts = 2;
  options.absolute_line_timestamps = true;  // and no session: the events alone make the span
  std::vector<FixtureHost> hosts;
  std::string error;
  ASSERT_TRUE(ResolveFixtureHosts(options, &hosts, &error)) << error;
  HostTrace trace;
  ASSERT_TRUE(GenerateFixtureHost(options, hosts[1], &trace, &error)) << error;
  auto* planes = trace.space->mutable_planes();
  planes->erase(std::remove_if(planes->begin(), planes->end(),
                               [](const xspace::XPlane& p) { return p.name() == kTaskEnvPlaneName; }),
                planes->end());
  const auto path = std::filesystem::temp_directory_path() / ("span_predict_test_" + std::to_string(getpid()));
  auto write = [&] {
    std::ofstream out(path, std::ios::binary);
    out << trace.space->SerializeAsString();
  };
  write();
  std::string why;
  ScanBuffer buffer;
  const auto exact = ScanXSpaceFileSpan(path, &buffer, &why);
  const auto predicted = PredictXSpaceFileSpan(path, &why);
  ASSERT_TRUE(exact && predicted) << why;
  EXPECT_EQ(predicted->base.base_ns, exact->base.base_ns);
  EXPECT_EQ(predicted->span.first, exact->span.first);
  EXPECT_LE(predicted->span.last, exact->span.last);  // no session stop here: only guessed

  // An event a second before every other, appended at the end of a line.
  xspace::XLine* line = trace.space->mutable_planes(0)->mutable_lines(0);
  xspace::XEvent* early = line->add_events();
  *early = line->events(0);
  early->set_offset_ps(-1'000'000'000'000);
  write();
  const auto exact2 = ScanXSpaceFileSpan(path, &buffer, &why);
  const auto predicted2 = PredictXSpaceFileSpan(path, &why);
  ASSERT_TRUE(exact2 && predicted2) << why;
  EXPECT_LT(exact2->span.first, predicted2->span.first);

  // Bad headers: no prediction, with a reason.
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << std::string("\x0a\xff\xff\xff\xff\x0f", 6);
  }
  EXPECT_FALSE(PredictXSpaceFileSpan(path, &why));
  EXPECT_FALSE(why.empty());
  EXPECT_FALSE(PredictXSpaceFileSpan(path.string() + ".missing", &why));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace chronolink::trace
