// The wire-level align (trace/wire/xspace_wire_align.h) against the model
// path (AlignPlannedHost, then serialised as WriteXSpaceFile does): the same
// XSpace (MessageDifferencer, unknown fields included), the same bytes for
// files in canonical order (the fixture's), and the same HostAlignment to
// the bit; on fixture hosts, with counters on and off, offsets with gaps
// and extrapolation, lines with durations, num_occurrences events, unknown
// fields and fields out of order. And a decline, never a different output,
// for each kind of input it leaves to the model.
#include <google/protobuf/unknown_field_set.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "tools/trace_fixture/xspace_fixture.h"
#include "trace/align/correction_record.h"
#include "trace/align/trace_aligner.h"
#include "trace/correct/clock_correction.h"
#include "trace/correct/node_clock_map.h"
#include "trace/correct/recorded_mapping.h"
#include "trace/exporters/xspace_writer.h"
#include "trace/importers/xspace/xspace_reader.h"
#include "trace/model/host_span.h"
#include "trace/model/xplane_edit.h"
#include "trace/wire/xspace_span_scan.h"
#include "trace/wire/xspace_wire_align.h"
#include "trace/wire/xspace_wire_path.h"

namespace chronolink::trace {
namespace {

constexpr int64_t kStart = 1'795'320'926'000'000'000;
constexpr int64_t kPeriod = 2'000'000'000;

// Offsets of node 1 against reference node 2 at kStart + k·2 s for k in
// [first, last], node 1 unreachable at the instants in `missing`.
struct Correction {
  std::shared_ptr<ClusterCorrection> cluster = std::make_shared<ClusterCorrection>();
  std::unique_ptr<HostClockMap> map;
};

Correction MakeCorrection(int first, int last, const std::vector<int>& missing = {}) {
  OffsetsInput input;
  input.reference = ClockReference{.is_mean = false, .node = 2};
  input.files = {"test-offsets.jsonl"};
  for (uint32_t node : {1u, 2u}) {
    for (int k = first; k <= last; ++k) {
      OffsetRecord r;
      r.node = node;
      r.t_ns = kStart + k * kPeriod;
      r.reachable = node == 2 || std::find(missing.begin(), missing.end(), k) == missing.end();
      if (node == 1 && r.reachable) {
        r.offset_ns = 1.234567e6 + 37e-6 * static_cast<double>(k * kPeriod) + (k % 3) * 11.5;
        r.drift = 37e-6 + k * 1e-7;
        r.uncertainty_ns = 20 + k;
      }
      input.records.push_back(r);
    }
  }
  Correction c;
  std::string error;
  EXPECT_TRUE(ClusterCorrection::FromOffsets(input, c.cluster.get(), &error)) << error;
  c.map = MakeNodeClockMap(c.cluster, c.cluster->Node(1));
  return c;
}

struct BothPaths {
  std::string model_bytes;
  std::string wire_bytes;
  HostAlignment model;
  HostAlignment wire;
};

AlignResult Plan(const std::string& bytes, const HostClockMap& map, const AlignOptions& options) {
  HostTrace host;
  std::string error;
  EXPECT_TRUE(ParseXSpace(bytes, &host, &error)) << error;
  HostSpanInstants span;
  EXPECT_TRUE(HostSpan(host, &span, &error)) << error;
  AlignResult plan;
  EXPECT_TRUE(PlanAlignment({"h"}, {span}, {&map}, options, &plan, &error)) << error;
  return plan;
}

std::string ModelPath(const std::string& bytes, const HostClockMap& map, const AlignOptions& options,
                      AlignResult* result) {
  HostTrace host;
  std::string error, out;
  EXPECT_TRUE(ParseXSpace(bytes, &host, &error)) << error;
  host.host = "h";
  EXPECT_TRUE(AlignPlannedHost(0, &host, map, options, result, &error)) << error;
  EXPECT_TRUE(SerializeXSpace(*host.space, &out, &error)) << error;
  return out;
}

void ExpectSameStats(const HostAlignment& a, const HostAlignment& b) {
  EXPECT_EQ(a.events, b.events);
  EXPECT_EQ(a.events_gap, b.events_gap);
  EXPECT_EQ(a.events_extrapolated, b.events_extrapolated);
  EXPECT_EQ(a.max_beyond_span_ns, b.max_beyond_span_ns);
  EXPECT_EQ(a.uncertainty_min_ns, b.uncertainty_min_ns);  // to the bit: same instants, same order
  EXPECT_EQ(a.uncertainty_max_ns, b.uncertainty_max_ns);
  EXPECT_EQ(a.uncertainty_mean_ns, b.uncertainty_mean_ns);
  EXPECT_EQ(a.correction_first_ns, b.correction_first_ns);
  EXPECT_EQ(a.correction_last_ns, b.correction_last_ns);
}

// Both paths on one host; the wire path must not decline.
BothPaths AlignBoth(const std::string& bytes, const HostClockMap& map, const AlignOptions& options) {
  const AlignResult plan = Plan(bytes, map, options);
  BothPaths both;
  AlignResult model = plan;
  both.model_bytes = ModelPath(bytes, map, options, &model);
  AlignResult wire = plan;
  WireOutput out;
  std::vector<std::string> notes;
  std::string why;
  EXPECT_TRUE(WireAlignHost(bytes, "h.xplane.pb", "h", 0, map, options, &wire, &out, &notes, &why)) << why;
  both.wire_bytes = std::string(out.bytes());
  both.model = model.hosts[0];
  both.wire = wire.hosts[0];
  return both;
}

void ExpectSameXSpace(const BothPaths& both) {
  xspace::XSpace model, wire;
  ASSERT_TRUE(model.ParseFromString(both.model_bytes));
  ASSERT_TRUE(wire.ParseFromString(both.wire_bytes)) << "the wire output does not parse";
  google::protobuf::util::MessageDifferencer differ;
  std::string report;
  differ.ReportDifferencesToString(&report);
  EXPECT_TRUE(differ.Compare(model, wire)) << report;
  ExpectSameStats(both.model, both.wire);
}

std::string FixtureHostBytes(bool absolute, size_t index = 1) {
  XSpaceFixtureOptions options;
  options.hosts = 2;
  options.gpus_per_host = 1;
  options.steps = 3;
  options.kernels_per_step = 40;
  options.absolute_line_timestamps = absolute;
  std::vector<FixtureHost> hosts;
  std::string error;
  EXPECT_TRUE(ResolveFixtureHosts(options, &hosts, &error)) << error;
  HostTrace trace;
  EXPECT_TRUE(GenerateFixtureHost(options, hosts.at(index), &trace, &error)) << error;
  std::string bytes;
  EXPECT_TRUE(SerializeXSpace(*trace.space, &bytes, &error)) << error;
  return bytes;
}

// Offsets around the fixture's own profile (it starts near kStart).
Correction FixtureCorrection() { return MakeCorrection(-2, 12); }

TEST(XSpaceWireAlignTest, FixtureHostsAreTheModelsBytesWithCountersOnAndOff) {
  const Correction c = FixtureCorrection();
  for (const bool absolute : {false, true}) {
    for (const bool counters : {true, false}) {
      SCOPED_TRACE(std::string(absolute ? "absolute" : "relative") + (counters ? ", counters" : ""));
      AlignOptions options;
      options.counters_line = counters;
      options.offsets_source = "test";
      const BothPaths both = AlignBoth(FixtureHostBytes(absolute), *c.map, options);
      ExpectSameXSpace(both);
      EXPECT_EQ(both.model_bytes, both.wire_bytes);
      EXPECT_GT(both.wire.events, 0);
    }
  }
}

// A host built to hit every rule: line durations, a line at the session
// start (timestamp 0: no field), num_occurrences events, an event with no
// time at all, zero and 1 ps durations, negative offsets, and unknown fields
// on every level.
xspace::XSpace RuleHost(int64_t session_start, int64_t event_step_ps) {
  xspace::XSpace space;
  SetProfileStartTime(&space, static_cast<uint64_t>(session_start));
  SetProfileStopTime(&space, static_cast<uint64_t>(session_start + 9 * kPeriod));
  SetHostnames(&space, {"h"});
  xspace::XPlane* cpu = GetOrCreatePlane(&space, "/host:CPU");
  const int64_t md = GetOrCreateEventMetadata(cpu, "op")->id();
  const int64_t stat_md = GetOrCreateStatMetadata(cpu, "note")->id();
  for (int l = 0; l < 3; ++l) {
    xspace::XLine* line = GetOrCreateLine(cpu, "thread" + std::to_string(l));
    line->set_timestamp_ns(l == 0 ? 0 : l * 1'000'000'007LL);
    if (l == 1) line->set_duration_ps(7'000'000'000'003LL);
    for (int i = 0; i < 50; ++i) {
      xspace::XEvent* e = line->add_events();
      e->set_metadata_id(md);
      if (i % 10 == 3) {
        e->set_num_occurrences(i);
      } else if (i % 10 != 7) {  // 7: no time at all (offset 0)
        e->set_offset_ps(i * event_step_ps - (l == 2 ? 5'000'000 : 0));
      }
      e->set_duration_ps(i % 4 == 0 ? 0 : i % 4 == 1 ? 1 : 123'456'789 * i);
      xspace::XStat* st = e->add_stats();
      st->set_metadata_id(stat_md);
      if (i % 2) st->set_str_value("é" + std::to_string(i));
      else st->set_int64_value(-i);
      if (i % 5 == 0) e->GetReflection()->MutableUnknownFields(e)->AddVarint(99, i);
      if (i % 6 == 0) st->GetReflection()->MutableUnknownFields(st)->AddLengthDelimited(42, "x");
    }
    line->GetReflection()->MutableUnknownFields(line)->AddFixed32(6, 7);  // a reserved number
  }
  xspace::XPlane* gpu = GetOrCreatePlane(&space, "/device:GPU:0");
  xspace::XLine* stream = GetOrCreateLine(gpu, "stream");
  stream->set_timestamp_ns(3'000'000'000);
  stream->add_events()->set_offset_ps(1'000'000);
  gpu->GetReflection()->MutableUnknownFields(gpu)->AddFixed64(77, 1);
  space.GetReflection()->MutableUnknownFields(&space)->AddLengthDelimited(15, "newer producer");
  return space;
}

std::string Serialize(const xspace::XSpace& space) {
  std::string bytes, error;
  EXPECT_TRUE(SerializeXSpace(space, &bytes, &error)) << error;
  return bytes;
}

TEST(XSpaceWireAlignTest, EveryRuleOfTheModelOnABuiltHost) {
  const Correction c = MakeCorrection(0, 10);
  for (const bool counters : {true, false}) {
    AlignOptions options;
    options.counters_line = counters;
    const BothPaths both = AlignBoth(Serialize(RuleHost(kStart + 3 * kPeriod, 100'000'000'001LL)), *c.map, options);
    ExpectSameXSpace(both);
    EXPECT_EQ(both.model_bytes, both.wire_bytes);
  }
}

TEST(XSpaceWireAlignTest, GapsAndExtrapolationCountTheSame) {
  // Node 1 unreachable at instants 3 and 4; the trace runs past the last
  // solved instant (kStart + 12 s) into extrapolation.
  const Correction c = MakeCorrection(0, 6, /*missing=*/{3, 4});
  const BothPaths both = AlignBoth(Serialize(RuleHost(kStart + kPeriod, 250'000'000'001LL)), *c.map, {});
  ExpectSameXSpace(both);
  EXPECT_EQ(both.model_bytes, both.wire_bytes);
  EXPECT_GT(both.wire.events_gap, 0);
  EXPECT_GT(both.wire.events_extrapolated, 0);
}

// The GPU collector's clock record places each clock page mapping where it
// read it, the solve's lag after the instant it maps: its events are
// re-timed like the profile's, but they are not the profile and do not make
// it "extrapolated" (on both paths alike).
TEST(XSpaceWireAlignTest, TheCollectorsClockRecordIsRetimedButNotCounted) {
  const Correction c = MakeCorrection(0, 6);  // solved to kStart + 12 s
  xspace::XSpace space;
  SetProfileStartTime(&space, static_cast<uint64_t>(kStart));
  SetProfileStopTime(&space, static_cast<uint64_t>(kStart + 11 * kPeriod / 2));
  SetHostnames(&space, {"h"});
  xspace::XPlane* cpu = GetOrCreatePlane(&space, "/host:CPU");
  xspace::XLine* thread = GetOrCreateLine(cpu, "thread");
  for (int i = 1; i <= 10; ++i) thread->add_events()->set_offset_ps(i * 1'000'000'000'000LL);  // 1..10 s
  xspace::XPlane* record = GetOrCreatePlane(&space, kRecordedMappingPlane);
  xspace::XLine* mappings = GetOrCreateLine(record, kRecordedMappingLine);
  for (int i = 0; i < 4; ++i) mappings->add_events()->set_offset_ps((8 + 2 * i) * 1'000'000'000'000LL);  // to 14 s
  const BothPaths both = AlignBoth(Serialize(space), *c.map, {});
  ExpectSameXSpace(both);
  EXPECT_EQ(both.model.events, 10) << "the profile's events only";
  EXPECT_EQ(both.model.events_extrapolated, 0) << "the record's last ones lie past the solved span";
  EXPECT_EQ(both.wire.events, 10);
  EXPECT_EQ(both.wire.events_extrapolated, 0);
  xspace::XSpace out;
  ASSERT_TRUE(out.ParseFromString(both.wire_bytes));
  const xspace::XPlane* retimed = FindPlane(out, kRecordedMappingPlane);
  ASSERT_NE(retimed, nullptr);
  EXPECT_NE(retimed->lines(0).events(0).offset_ps(), 8'000'000'000'000LL) << "re-timed onto cluster time";
}

// ---- Hand-made wire bytes.

std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}
std::string VarintField(int field, uint64_t v) { return Varint(static_cast<uint64_t>(field) << 3) + Varint(v); }
std::string LenField(int field, const std::string& body) {
  return Varint(static_cast<uint64_t>(field) << 3 | 2) + Varint(body.size()) + body;
}

// A host of one Task Environment plane and one CPU plane whose one line
// holds a plain event, `event` (raw bytes) and another plain event.
// `metadata_name` names the event metadata; without `task_env` the line
// times are relative to nothing.
// `event_field`: the middle event's whole field, tag and length included.
std::string HandMadeHostWithField(const std::string& event_field, int64_t line_ts_ns = 2'000'000'000,
                                  bool task_env = true, const std::string& metadata_name = "op") {
  xspace::XSpace env;
  SetProfileStartTime(&env, static_cast<uint64_t>(kStart + 3 * kPeriod));
  xspace::XPlane cpu;
  cpu.set_id(7);
  cpu.set_name("/host:CPU");
  const int64_t md = GetOrCreateEventMetadata(&cpu, metadata_name)->id();
  GetOrCreateStatMetadata(&cpu, "note");
  const std::string plain = VarintField(1, md) + VarintField(2, 1'000'000) + VarintField(3, 5'000);
  const std::string line = VarintField(1, 3) + LenField(2, "python") + VarintField(3, static_cast<uint64_t>(line_ts_ns)) +
                           LenField(4, plain) + event_field + LenField(4, plain);
  std::string cpu_bytes;
  EXPECT_TRUE(cpu.SerializePartialToString(&cpu_bytes));
  return (task_env ? LenField(1, env.planes(0).SerializeAsString()) : "") + LenField(1, cpu_bytes + LenField(3, line)) +
         LenField(4, "h");
}

std::string HandMadeHost(const std::string& event, int64_t line_ts_ns = 2'000'000'000, bool task_env = true,
                         const std::string& metadata_name = "op") {
  return HandMadeHostWithField(LenField(4, event), line_ts_ns, task_env, metadata_name);
}

// Fields out of protobuf's order and written twice where protobuf merges
// them (metadata_id): the same XSpace once parsed.
TEST(XSpaceWireAlignTest, FieldsOutOfOrderParseTheSame) {
  const Correction c = MakeCorrection(0, 10);
  const std::string stat = VarintField(1, 2) + LenField(5, "ünïcode");
  // duration, offset, a stat, metadata_id twice, an unknown field between.
  const std::string event = VarintField(3, 777'777) + VarintField(2, 42'000'000) + LenField(4, stat) +
                            VarintField(1, 9) + VarintField(60, 5) + VarintField(1, 1);
  // No offset at all (the oneof unset): the model sets it.
  const std::string untimed = VarintField(3, 10) + VarintField(1, 1);
  for (const std::string& e : {event, untimed, VarintField(5, 3) + VarintField(3, 9)}) {
    for (const bool counters : {true, false}) {
      AlignOptions options;
      options.counters_line = counters;
      ExpectSameXSpace(AlignBoth(HandMadeHost(e), *c.map, options));
    }
  }
}

// ---- Declines: the result untouched, the reason said.

void ExpectDeclines(const std::string& bytes, const HostClockMap& map, const AlignOptions& options,
                    const AlignResult& plan, const std::string& reason_part) {
  AlignResult result = plan;
  WireOutput out;
  std::vector<std::string> notes;
  std::string why;
  EXPECT_FALSE(WireAlignHost(bytes, "h.xplane.pb", "h", 0, map, options, &result, &out, &notes, &why));
  EXPECT_NE(why.find(reason_part), std::string::npos) << why;
  EXPECT_EQ(result.hosts[0].events, plan.hosts[0].events);
  EXPECT_TRUE(notes.empty());
}

class XSpaceWireAlignDeclineTest : public ::testing::Test {
 protected:
  XSpaceWireAlignDeclineTest()
      : c_(MakeCorrection(0, 10)),
        space_(RuleHost(kStart + 3 * kPeriod, 100'000'000'001LL)),
        bytes_(Serialize(space_)),
        plan_(Plan(bytes_, *c_.map, {})),
        good_event_(VarintField(1, 1) + VarintField(2, 3'000'000) + VarintField(3, 10)),
        hand_plan_(Plan(HandMadeHost(good_event_), *c_.map, {})) {}

  // A hand-made host with `event` in it must decline for `reason_part`.
  void ExpectEventDeclines(const std::string& event, const std::string& reason_part) {
    ExpectDeclines(HandMadeHost(event), *c_.map, {}, hand_plan_, reason_part);
  }

  Correction c_;
  xspace::XSpace space_;
  std::string bytes_;
  AlignResult plan_;
  std::string good_event_;
  AlignResult hand_plan_;
};

TEST_F(XSpaceWireAlignDeclineTest, AnnotateEventsIsLeftToTheModel) {
  AlignOptions options;
  options.annotate_events = true;
  ExpectDeclines(bytes_, *c_.map, options, plan_, "annotate");
}

TEST_F(XSpaceWireAlignDeclineTest, TruncatedBytes) {
  ExpectDeclines(bytes_.substr(0, bytes_.size() - 5), *c_.map, {}, plan_, "malformed");
}

TEST_F(XSpaceWireAlignDeclineTest, MalformedWireData) {
  ExpectEventDeclines(good_event_ + Varint(6 << 3 | 3) + Varint(6 << 3 | 4), "malformed");  // a group
  ExpectEventDeclines(good_event_ + Varint(6 << 3 | 7), "malformed");                       // wire type 7
  ExpectEventDeclines(good_event_ + Varint(6 << 3) + std::string(10, '\xff') + '\x01', "malformed");  // 11-byte varint
  ExpectEventDeclines(good_event_ + LenField(4, VarintField(1, 1)).substr(0, 2) + '\x7f', "malformed");  // short
  ExpectEventDeclines(good_event_ + std::string("\x80\x80\x80\x80\x80\x01", 6), "malformed");  // a 6-byte tag
}

TEST_F(XSpaceWireAlignDeclineTest, InvalidUtf8InAStatString) {
  const std::string bytes = HandMadeHost(good_event_ + LenField(4, VarintField(1, 2) + LenField(5, "\xff\xfe")));
  HostTrace host;
  std::string error;
  ASSERT_FALSE(ParseXSpace(bytes, &host, &error));  // the model refuses it too
  ExpectDeclines(bytes, *c_.map, {}, hand_plan_, "UTF-8");
}

// Stats the quick check decides (metadata_id, then one varint value ending
// the stat) and those beside it that it leaves to the field loop: the model's
// bytes where they parse, declined where they do not.
TEST_F(XSpaceWireAlignDeclineTest, StatsAtTheEdgesOfTheQuickCheck) {
  const std::vector<std::string> good = {
      VarintField(1, 2) + VarintField(4, 5),                             // the usual one
      VarintField(1, 300) + VarintField(4, 1ULL << 62),                  // 2-byte id, 9-byte value
      VarintField(1, 2) + VarintField(3, UINT64_MAX),                    // a 10-byte value
      VarintField(1, 1 << 20) + VarintField(7, 9),                       // a 3-byte id
      VarintField(1, 2) + std::string("\x11") + std::string(8, '\x01'),  // a double
      VarintField(1, 2) + VarintField(300, 5),                           // a 2-byte tag
  };
  for (const std::string& stat : good) {
    SCOPED_TRACE(testing::PrintToString(stat));
    const BothPaths both = AlignBoth(HandMadeHost(good_event_ + LenField(4, stat)), *c_.map, {});
    ExpectSameXSpace(both);
    EXPECT_EQ(both.model_bytes, both.wire_bytes);
  }
  // The value before the id, two members of the value oneof: the same
  // XSpace (protobuf writes the id first, and keeps the last member only).
  for (const std::string& stat : {VarintField(4, 5) + VarintField(1, 2),
                                  VarintField(1, 2) + VarintField(4, 5) + VarintField(7, 6)}) {
    ExpectSameXSpace(AlignBoth(HandMadeHost(good_event_ + LenField(4, stat)), *c_.map, {}));
  }
  ExpectEventDeclines(good_event_ + LenField(4, VarintField(1, 2) + Varint(4 << 3) + "\x80\x80"), "stat");  // cut short
  ExpectEventDeclines(good_event_ + LenField(4, VarintField(1, 2) + Varint(4 << 3 | 3)), "stat");  // a group
  ExpectEventDeclines(good_event_ + LenField(4, VarintField(1, 2) + Varint(4 << 3) + std::string(9, '\xff') + '\x02'),
                      "stat");  // a tenth byte with bits past 64
}

// The usual event (metadata_id, offset, duration, then stats), which the
// rewrite reads straight and copies whole with its times overwritten in
// place, at the edges of that: string stats of every short length, not
// ASCII, or with a 2-byte length; time values whose width changes or that
// are written longer than needed; a 2-byte tag; a zero duration written
// out; a length prefix written longer than needed. The model's bytes for
// canonical input, its XSpace for the rest, declined where it does not
// parse.
TEST_F(XSpaceWireAlignDeclineTest, EventsAtTheEdgesOfTheUsualLayout) {
  std::vector<std::string> canonical;
  for (size_t n = 0; n <= 20; ++n) {
    canonical.push_back(VarintField(1, 2) + LenField(5, std::string(n, 'a')));
    canonical.push_back(VarintField(1, 300) + LenField(5, std::string(n, 'z')));
  }
  canonical.push_back(VarintField(1, 2) + LenField(5, "ünïcode"));
  canonical.push_back(VarintField(1, 2) + LenField(5, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa ünïcode"));
  canonical.push_back(VarintField(1, 2) + LenField(5, std::string(200, 'b')));  // a 2-byte length
  canonical.push_back(VarintField(1, 2) + LenField(5, "x") + VarintField(60, 1));  // a field after the string
  for (const std::string& stat : canonical) {
    SCOPED_TRACE(testing::PrintToString(stat));
    const std::string event = good_event_ + LenField(4, stat) + LenField(4, VarintField(1, 2) + VarintField(4, 5));
    const BothPaths both = AlignBoth(HandMadeHost(event), *c_.map, {});
    ExpectSameXSpace(both);
    EXPECT_EQ(both.model_bytes, both.wire_bytes);
  }
  // Offsets and durations across varint widths: the new values' widths
  // change with some of them (the map moves instants by milliseconds).
  for (const uint64_t offset : {0ULL, 1ULL, 127ULL, 128ULL, 16'383ULL, 16'384ULL, 2'097'151ULL, 999'999'999ULL,
                                (1ULL << 35) - 1, 1ULL << 35, (1ULL << 42) - 1, 1ULL << 42}) {
    for (const uint64_t duration : {0ULL, 1ULL, 127ULL, 128ULL, 16'384ULL, (1ULL << 35) - 1}) {
      SCOPED_TRACE(testing::Message() << offset << " " << duration);
      std::string event = VarintField(1, 1) + VarintField(2, offset);
      if (duration != 0) event += VarintField(3, duration);
      event += LenField(4, VarintField(1, 2) + LenField(5, "abcdefghij"));
      const BothPaths both = AlignBoth(HandMadeHost(event), *c_.map, {});
      ExpectSameXSpace(both);
      EXPECT_EQ(both.model_bytes, both.wire_bytes);
    }
  }
  const std::string stats = LenField(4, VarintField(1, 2) + LenField(5, "abcdefghij"));
  const std::string padded_offset = Varint(2 << 3) + std::string("\x85\x80\x80\x00", 4);  // 5, in 4 bytes
  // Non-canonical only in what the rewrite writes anew (the time fields,
  // the event's length): the model's bytes still.
  const std::string event = good_event_ + stats;
  const std::string padded_length = Varint(4 << 3 | 2) + static_cast<char>(event.size() | 0x80) + '\0' + event;
  for (const std::string& field : {
           LenField(4, VarintField(1, 1) + padded_offset + VarintField(3, 10) + stats),
           LenField(4, VarintField(1, 1) + VarintField(2, 3'000'000) + Varint(3 << 3) + std::string("\x8a\x00", 2) +
                           stats),
           LenField(4, VarintField(1, 1) + std::string("\x90\x00", 2) + Varint(3'000'000) + VarintField(3, 10) + stats),
           LenField(4, VarintField(1, 1) + VarintField(2, 3'000'000) + std::string("\x98\x00", 2) + Varint(10) + stats),
           LenField(4, VarintField(1, 1) + VarintField(2, 3'000'000) + VarintField(3, 0) + stats),
           padded_length,
       }) {
    SCOPED_TRACE(testing::PrintToString(field));
    const BothPaths both = AlignBoth(HandMadeHostWithField(field), *c_.map, {});
    ExpectSameXSpace(both);
    EXPECT_EQ(both.model_bytes, both.wire_bytes);
  }
  // metadata_id again after the stats (protobuf keeps the last): the same XSpace.
  ExpectSameXSpace(AlignBoth(HandMadeHost(event + VarintField(1, 3)), *c_.map, {}));
  for (const std::string& bad : {std::string("\xff"), std::string("abcdefghijklm\xff"), std::string("abcdefgh\xc3")}) {
    ExpectEventDeclines(good_event_ + LenField(4, VarintField(1, 2) + LenField(5, bad)), "UTF-8");
  }
}

TEST_F(XSpaceWireAlignDeclineTest, APlanesMetadataThatDoesNotParse) {
  const std::string bytes = HandMadeHost(good_event_, 2'000'000'000, true, "\xc3\x28");  // invalid UTF-8
  HostTrace host;
  std::string error;
  ASSERT_FALSE(ParseXSpace(bytes, &host, &error));
  ExpectDeclines(bytes, *c_.map, {}, hand_plan_, "metadata");
}

TEST_F(XSpaceWireAlignDeclineTest, RelativeLineTimesWithNoStart) {
  const std::string bytes = HandMadeHost(good_event_, 2'000'000'000, /*task_env=*/false);
  HostTrace host;
  std::string error;
  ASSERT_TRUE(ParseXSpace(bytes, &host, &error)) << error;
  ASSERT_FALSE(host.line_base_known);  // the model cannot align it either
  ExpectDeclines(bytes, *c_.map, {}, hand_plan_, "no start");
}

TEST_F(XSpaceWireAlignDeclineTest, NonCanonicalTimeFields) {
  ExpectEventDeclines(good_event_ + VarintField(2, 5), "twice");  // offset twice: protobuf keeps the last
  ExpectEventDeclines(good_event_ + VarintField(3, 5), "twice");  // duration twice
  ExpectEventDeclines(good_event_ + VarintField(5, 5), "oneof");  // both members of the oneof
  ExpectEventDeclines(VarintField(5, 5) + VarintField(2, 5), "oneof");
}

TEST_F(XSpaceWireAlignDeclineTest, AlignedTwice) {
  HostTrace host;
  std::string error, aligned;
  AlignResult result = plan_;
  ASSERT_TRUE(ParseXSpace(bytes_, &host, &error)) << error;
  ASSERT_TRUE(AlignPlannedHost(0, &host, *c_.map, {}, &result, &error)) << error;
  ASSERT_TRUE(SerializeXSpace(*host.space, &aligned, &error)) << error;
  ExpectDeclines(aligned, *c_.map, {}, plan_, "record plane");
}

TEST_F(XSpaceWireAlignDeclineTest, ACountersLineAlreadyThere) {
  xspace::XSpace s = space_;
  GetOrCreateLine(FindMutablePlane(&s, "/host:CPU"), kCountersLine);
  ExpectDeclines(Serialize(s), *c_.map, {}, plan_, "_counters_");
  AlignOptions no_counters;  // without a counters line to add, nothing to decline
  no_counters.counters_line = false;
  ExpectSameXSpace(AlignBoth(Serialize(s), *c_.map, no_counters));
}

TEST_F(XSpaceWireAlignDeclineTest, ASpanOtherThanPlanned) {
  AlignResult plan = plan_;
  plan.hosts[0].last_host.ns += 1;
  ExpectDeclines(bytes_, *c_.map, {}, plan, "span");
}

TEST_F(XSpaceWireAlignDeclineTest, AnInstantThatOverflows) {
  // A line (absolute) 1 µs before the end of int64 ns: its correction overflows.
  ExpectDeclines(HandMadeHost(good_event_, INT64_MAX - 1000), *c_.map, {}, hand_plan_, "cannot be mapped");
  // An event 106 days after its line: outside int64 ps once re-based.
  ExpectEventDeclines(VarintField(2, static_cast<uint64_t>(INT64_MAX)), "");
}

TEST_F(XSpaceWireAlignDeclineTest, ABoundOverTheLimit) {
  AlignOptions options;
  options.max_bound_ns = 1;
  ExpectDeclines(bytes_, *c_.map, options, plan_, "bound");
}

TEST_F(XSpaceWireAlignDeclineTest, NoHostName) {
  AlignResult result = plan_;
  WireOutput out;
  std::vector<std::string> notes;
  std::string why;
  EXPECT_FALSE(WireAlignHost(bytes_, ".xplane.pb", "", 0, *c_.map, {}, &result, &out, &notes, &why));
  EXPECT_NE(why.find("host"), std::string::npos) << why;
}

TEST(XSpaceWireAlignNotesTest, AHostnameOtherThanTheFileNameIsNotedAsTheReaderNotesIt) {
  const Correction c = MakeCorrection(0, 10);
  const std::string bytes = Serialize(RuleHost(kStart + 3 * kPeriod, 100'000'000'001LL));  // hostnames[0] "h"
  AlignResult result = Plan(bytes, *c.map, {});
  WireOutput out;
  std::vector<std::string> notes;
  std::string why;
  ASSERT_TRUE(WireAlignHost(bytes, "dir/other.xplane.pb", "other", 0, *c.map, {}, &result, &out, &notes, &why))
      << why;
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], HostnameWarning("dir/other.xplane.pb", "other", "h"));
}

// The piece API: Map through a cursor is Map, instant by instant, forwards,
// backwards and across knots, gaps and both extrapolations.
// On a predicted plan the rewrite checks the first instant and takes the
// last it finds: with the last guessed right (the session planes patched in
// place) or far off (the host rewritten on the found span), the bytes and
// stats of the exact plan; with the first wrong, kMispredicted and nothing.
TEST(XSpaceWireAlignPredictedTest, GivesTheExactPlansOutputOrSaysMispredicted) {
  const std::string bytes = FixtureHostBytes(false);
  const Correction c = FixtureCorrection();
  AlignOptions options;
  const AlignResult exact_plan = Plan(bytes, *c.map, options);
  AlignResult exact = exact_plan;
  WireOutput exact_out;
  std::vector<std::string> notes;
  std::string why;
  ASSERT_TRUE(WireAlignHost(bytes, "h.xplane.pb", "h", 0, *c.map, options, &exact, &exact_out, &notes, &why)) << why;
  const HostSpanInstants span{exact_plan.hosts[0].first_host, exact_plan.hosts[0].last_host};

  auto predicted_plan = [&](const HostSpanInstants& guess) {
    AlignResult plan;
    std::string error;
    EXPECT_TRUE(PlanAlignment({"h"}, {guess}, {c.map.get()}, options, &plan, &error)) << error;
    return plan;
  };
  for (const auto& guess : {span, HostSpanInstants{span.first, span.first}}) {
    SCOPED_TRACE(guess.last == span.last ? "last guessed right" : "last guessed at the first");
    AlignResult result = predicted_plan(guess);
    EXPECT_EQ(result.origin_ns, exact_plan.origin_ns);
    WireOutput out;
    EXPECT_EQ(WireAlignPredictedHost(bytes, "h.xplane.pb", "h", 0, *c.map, options, &result, &out, &notes, &why),
              WireAlignOutcome::kAligned)
        << why;
    EXPECT_EQ(out.bytes(), exact_out.bytes());
    ExpectSameStats(result.hosts[0], exact.hosts[0]);
    EXPECT_EQ(result.hosts[0].first_host, exact.hosts[0].first_host);
    EXPECT_EQ(result.hosts[0].last_host, exact.hosts[0].last_host);
  }
  HostSpanInstants late = span;
  late.first.ps += 1;
  AlignResult result = predicted_plan(late);
  WireOutput out;
  EXPECT_EQ(WireAlignPredictedHost(bytes, "h.xplane.pb", "h", 0, *c.map, options, &result, &out, &notes, &why),
            WireAlignOutcome::kMispredicted);
  EXPECT_NE(why.find("predicted"), std::string::npos) << why;
  EXPECT_TRUE(out.bytes().empty());
}

// A CPU plane whose length, once the `_counters_` line is in it, takes one
// more varint byte (its content moves one byte on): on a predicted plan the
// counters line, patched in place on the found span, must land where the
// line is now, not where it was before the move (a user's three-host run
// came out unparseable and exited 0). Swept over the sizes around each
// width boundary a plane of this kind can reach.
xspace::XSpace CpuPlaneOfEvents(int events) {
  xspace::XSpace space;
  SetProfileStartTime(&space, static_cast<uint64_t>(kStart + 2 * kPeriod));
  SetProfileStopTime(&space, static_cast<uint64_t>(kStart + 4 * kPeriod));
  SetHostnames(&space, {"h"});
  xspace::XPlane* cpu = GetOrCreatePlane(&space, "/host:CPU");
  const int64_t md = GetOrCreateEventMetadata(cpu, "op")->id();
  xspace::XLine* line = GetOrCreateLine(cpu, "thread");
  line->set_timestamp_ns(1'000);
  for (int i = 0; i < events; ++i) {
    xspace::XEvent* e = line->add_events();
    e->set_metadata_id(md);
    e->set_offset_ps(i * 1'000'000LL);
    e->set_duration_ps(500'000);
  }
  return space;
}

size_t CpuPlaneBytes(const xspace::XSpace& space) { return FindPlane(space, "/host:CPU")->ByteSizeLong(); }

TEST(XSpaceWireAlignPredictedTest, APlaneWhoseLengthGrowsAVarintByteIsPatchedWhereItsLineIsNow) {
  const Correction c = MakeCorrection(0, 10);
  AlignOptions options;
  int crossings = 0;
  for (const size_t boundary : {size_t{128}, size_t{16'384}}) {
    int events = 1;
    while (CpuPlaneBytes(CpuPlaneOfEvents(events)) + 400 < boundary) ++events;
    for (; CpuPlaneBytes(CpuPlaneOfEvents(events)) < boundary + 8; ++events) {
      const std::string bytes = Serialize(CpuPlaneOfEvents(events));
      SCOPED_TRACE("plane of " + std::to_string(CpuPlaneBytes(CpuPlaneOfEvents(events))) + " bytes");
      const AlignResult plan = Plan(bytes, *c.map, options);
      AlignResult model = plan;
      const std::string model_bytes = ModelPath(bytes, *c.map, options, &model);
      xspace::XSpace aligned;
      ASSERT_TRUE(aligned.ParseFromString(model_bytes));
      crossings += CpuPlaneBytes(aligned) >= boundary;
      for (const bool guessed_right : {true, false}) {
        AlignResult guessed;
        std::string error, why;
        const HostSpanInstants guess{plan.hosts[0].first_host,
                                     guessed_right ? plan.hosts[0].last_host : plan.hosts[0].first_host};
        ASSERT_TRUE(PlanAlignment({"h"}, {guess}, {c.map.get()}, options, &guessed, &error)) << error;
        WireOutput out;
        std::vector<std::string> notes;
        ASSERT_EQ(WireAlignPredictedHost(bytes, "h.xplane.pb", "h", 0, *c.map, options, &guessed, &out, &notes, &why),
                  WireAlignOutcome::kAligned)
            << why;
        EXPECT_EQ(out.bytes(), model_bytes) << (guessed_right ? "last guessed right" : "last guessed at the first");
      }
    }
  }
  EXPECT_GT(crossings, 0) << "no plane crossed a width boundary: the sweep tests nothing";
}

// A Task Environment whose stat metadata sits under a key other than its id
// (xspace_reader_fuzz found it): setting the session on it twice is not
// setting it once, so a predicted plan's rewrite that sets it again on the
// found span must start from the plane as parsed.
TEST(XSpaceWireAlignPredictedTest, ASessionOnOddMetadataIsSetOnceOnTheParsedPlane) {
  xspace::XSpace space;
  ASSERT_TRUE(space.ParseFromString(FixtureHostBytes(/*absolute=*/true)));  // the start stat will not read
  for (auto& plane : *space.mutable_planes()) {
    if (plane.name() != kTaskEnvPlaneName) continue;
    auto* metadata = plane.mutable_stat_metadata();
    for (auto it = metadata->begin(); it != metadata->end(); ++it) {
      if (it->second.name() != "profile_start_time") continue;
      const xspace::XStatMetadata moved = it->second;
      metadata->erase(it);
      (*metadata)[moved.id() + 100] = moved;  // keyed apart from its id
      break;
    }
  }
  std::string bytes;
  ASSERT_TRUE(space.SerializeToString(&bytes));
  const Correction c = FixtureCorrection();
  AlignOptions options;
  const AlignResult plan = Plan(bytes, *c.map, options);
  AlignResult exact = plan;
  WireOutput exact_out, out;
  std::vector<std::string> notes;
  std::string why;
  ASSERT_TRUE(WireAlignHost(bytes, "h.xplane.pb", "h", 0, *c.map, options, &exact, &exact_out, &notes, &why)) << why;
  AlignResult guessed;
  std::string error;
  const HostSpanInstants guess{plan.hosts[0].first_host, plan.hosts[0].first_host};
  ASSERT_TRUE(PlanAlignment({"h"}, {guess}, {c.map.get()}, options, &guessed, &error)) << error;
  ASSERT_EQ(WireAlignPredictedHost(bytes, "h.xplane.pb", "h", 0, *c.map, options, &guessed, &out, &notes, &why),
            WireAlignOutcome::kAligned)
      << why;
  EXPECT_EQ(out.bytes(), exact_out.bytes());
}

TEST(MapCursorTest, GivesMapsValuesExactly) {
  const Correction c = MakeCorrection(0, 6, /*missing=*/{3});
  MapCursor cursor(*c.map);
  for (int pass = 0; pass < 2; ++pass) {
    for (int64_t i = -300; i <= 300; ++i) {
      const int64_t step = pass == 0 ? i : -i;
      const TraceInstant x{kStart + 1'337 + step * 53'000'000LL, static_cast<int32_t>((i * 7919) % 1000 + 1000) % 1000};
      const auto want = c.map->Map(x);
      const auto got = cursor.Map(x);
      const auto cluster = cursor.Cluster(x);
      ASSERT_TRUE(want && got && cluster);
      EXPECT_EQ(got->cluster, want->cluster);
      EXPECT_EQ(*cluster, want->cluster);
      EXPECT_EQ(got->uncertainty_ns, want->uncertainty_ns);
      EXPECT_EQ(got->quality, want->quality);
      EXPECT_EQ(got->beyond_span_ns, want->beyond_span_ns);
      EXPECT_EQ(got->correction_ns, want->correction_ns);
    }
  }
}

// The wire path's entry point (xspace_wire_path.h), on files: the span it
// plans is the scan's; what it writes is the model path's bytes; a file it
// must leave to the model is declined with a reason and nothing written.
class XSpaceWirePathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("wire_path_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path Write(const std::string& name, const std::string& bytes) {
    const auto path = dir_ / name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  static std::string Read(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  std::filesystem::path dir_;
};

TEST_F(XSpaceWirePathTest, PlansTheScannedSpanAndWritesTheModelsBytes) {
  const Correction c = FixtureCorrection();
  const std::string bytes = FixtureHostBytes(/*absolute=*/false);
  const auto in = Write("h.xplane.pb", bytes);
  XSpaceWirePath wire;
  std::string why, error;
  const auto exact = wire.SpanOf(in, /*predict=*/false, &why);
  ASSERT_TRUE(exact) << why;
  EXPECT_FALSE(exact->predicted);
  ScanBuffer buffer;
  const auto scanned = ScanXSpaceFileSpan(in, &buffer, &why);
  ASSERT_TRUE(scanned) << why;
  EXPECT_TRUE(exact->span == scanned->span);
  const auto guess = wire.SpanOf(in, /*predict=*/true, &why);
  ASSERT_TRUE(guess) << why;
  EXPECT_TRUE(guess->predicted);

  AlignOptions options;
  options.offsets_source = "test";
  AlignResult model = Plan(bytes, *c.map, options);
  AlignResult result = model;
  const std::string model_bytes = ModelPath(bytes, *c.map, options, &model);
  std::vector<std::string> phases, notes;
  const auto out = dir_ / "out.xplane.pb";
  const auto outcome = wire.AlignFile(in, 0, /*predicted=*/false, *c.map, options, &result, out, &notes,
                                      [&](const char* phase) { phases.emplace_back(phase); }, &why, &error);
  ASSERT_EQ(outcome, WireAlignOutcome::kAligned) << why << error;
  EXPECT_EQ(Read(out), model_bytes);
  ExpectSameStats(model.hosts[0], result.hosts[0]);
  EXPECT_EQ(phases, (std::vector<std::string>{"read", "align", "write"}));
}

TEST_F(XSpaceWirePathTest, AFileItCannotRewriteIsDeclinedWithAReasonAndNothingWritten) {
  const Correction c = FixtureCorrection();
  const std::string bytes = FixtureHostBytes(/*absolute=*/false);
  AlignOptions options;
  options.offsets_source = "test";
  const AlignResult plan = Plan(bytes, *c.map, options);
  XSpaceWirePath wire;
  for (const auto& [name, content] : std::vector<std::pair<std::string, std::string>>{
           {"truncated.xplane.pb", bytes.substr(0, bytes.size() / 2)},
           {"group.xplane.pb", std::string("\x0b\x0c", 2)}}) {
    SCOPED_TRACE(name);
    const auto in = Write(name, content);
    std::string why, error;
    EXPECT_FALSE(wire.SpanOf(in, /*predict=*/false, &why));
    EXPECT_FALSE(why.empty());
    AlignResult result = plan;
    std::vector<std::string> notes;
    const auto out = dir_ / ("out-" + name);
    const auto outcome = wire.AlignFile(in, 0, /*predicted=*/false, *c.map, options, &result, out, &notes,
                                        [](const char*) {}, &why, &error);
    EXPECT_EQ(outcome, WireAlignOutcome::kDeclined);
    EXPECT_FALSE(why.empty());
    EXPECT_TRUE(error.empty()) << error;
    EXPECT_TRUE(notes.empty());
    EXPECT_FALSE(std::filesystem::exists(out));
  }
  std::string why, error;
  AlignResult result = plan;
  std::vector<std::string> notes;
  EXPECT_EQ(wire.AlignFile(dir_ / "missing.xplane.pb", 0, false, *c.map, options, &result, dir_ / "o.xplane.pb",
                           &notes, [](const char*) {}, &why, &error),
            WireAlignOutcome::kDeclined);
  EXPECT_FALSE(why.empty());
}

}  // namespace
}  // namespace chronolink::trace
