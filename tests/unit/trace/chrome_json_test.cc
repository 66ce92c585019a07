// Chrome trace JSON read into the XSpace model and written back: the same
// events with the same keys and args (floats exactly as written, ts/dur
// read exactly and written on the 2^-10 µs grid), the same top-level keys, in both flavours PyTorch
// produces (Kineto's object with baseTimeNanoseconds, the legacy
// profiler's bare array with relative ts).
#include <gtest/gtest.h>

#include <string>

#include "tests/unit/trace/chrome_json_test_util.h"
#include "trace/exporters/chrome_json_writer.h"
#include "trace/importers/chrome_json/chrome_json_reader.h"
#include "trace/importers/chrome_json/chrome_schema.h"
#include "trace/model/trace_time.h"

namespace chronolink::trace {
namespace {

using testing::EventsByThread;
using testing::KinetoDocument;
using testing::LegacyDocument;
using testing::NormalisedEvents;
using testing::ParseKeepingNumbers;
using testing::SortedDumps;

HostTrace Read(const std::string& doc, ChromeReadOptions options = {}) {
  HostTrace trace;
  std::string error;
  EXPECT_TRUE(ParseChromeJson(doc, options, &trace, &error)) << error;
  return trace;
}

std::string Write(const HostTrace& trace, ChromeWriteOptions options = {}) {
  std::string out, error;
  EXPECT_TRUE(WriteChromeJsonString({&trace}, options, &out, &error)) << error;
  return out;
}

const xspace::XPlane* PlaneNamed(const HostTrace& t, std::string_view name) {
  for (const auto& p : t.space->planes()) {
    if (p.name() == name) return &p;
  }
  return nullptr;
}

const xspace::XLine* LineWithId(const xspace::XPlane& plane, int64_t id) {
  for (const auto& l : plane.lines()) {
    if (l.id() == id) return &l;
  }
  return nullptr;
}

// The first event on `line` whose metadata name is `name`.
const xspace::XEvent* EventNamed(const xspace::XPlane& plane, const xspace::XLine& line,
                                 std::string_view name) {
  for (const auto& e : line.events()) {
    if (plane.event_metadata().at(e.metadata_id()).name() == name) return &e;
  }
  return nullptr;
}

TEST(ChromeJsonRoundTrip, KinetoDocumentComesBackWithEveryEventKeyAndArg) {
  const std::string in = KinetoDocument();
  const HostTrace trace = Read(in, {.origin_ns = {}, .host = "rank1"});
  const std::string out = Write(trace);

  const auto a = ParseKeepingNumbers(in);
  const auto b = ParseKeepingNumbers(out);
  ASSERT_TRUE(b.is_object()) << out.substr(0, 400);
  // Top-level keys: all of them, values identical (floats by their text).
  for (const auto& [key, value] : a.items()) {
    if (key == "traceEvents") continue;
    ASSERT_TRUE(b.contains(key)) << key;
    EXPECT_EQ(b[key], value) << key;
  }
  EXPECT_EQ(a.size(), b.size());
  // Events: the same set, and the same order within each thread.
  EXPECT_EQ(SortedDumps(NormalisedEvents(a)), SortedDumps(NormalisedEvents(b)));
  EXPECT_EQ(EventsByThread(a), EventsByThread(b));
}

TEST(ChromeJsonRoundTrip, KinetoModelHasPlanesLinesNamesAndTimeBase) {
  const HostTrace trace = Read(KinetoDocument(), {.origin_ns = {}, .host = "rank1"});
  EXPECT_EQ(trace.source_format, TraceFormat::kChromeJson);
  EXPECT_TRUE(trace.line_base_known);
  EXPECT_EQ(trace.line_base_ns, 1727740800000000000);
  ASSERT_EQ(trace.space->hostnames_size(), 1);
  EXPECT_EQ(trace.space->hostnames(0), "rank1");

  const xspace::XPlane* cpu = PlaneNamed(trace, "python 4242");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->id(), 4242);
  const xspace::XLine* main_thread = LineWithId(*cpu, 4243);
  ASSERT_NE(main_thread, nullptr);
  EXPECT_EQ(main_thread->name(), "thread 4243 (python)");
  // ts 5391843215.123 µs relative to the base, exactly.
  const xspace::XEvent* add = EventNamed(*cpu, *main_thread, "aten::add");
  ASSERT_NE(add, nullptr);
  const auto start = EventStart(trace.line_base_ns, *main_thread, *add);
  ASSERT_TRUE(start);
  EXPECT_EQ(start->ns, 1727740800000000000 + 5391843215123);
  EXPECT_EQ(start->ps, 0);
  EXPECT_EQ(add->duration_ps(), 12345000);
  // Metadata events have no instant: align leaves them alone.
  const xspace::XEvent* thread_name = EventNamed(*cpu, *main_thread, "thread_name");
  ASSERT_NE(thread_name, nullptr);
  EXPECT_EQ(thread_name->data_case(), xspace::XEvent::kNumOccurrences);

  const xspace::XPlane* gpu = PlaneNamed(trace, "GPU 0");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->id(), 0);
  ASSERT_NE(LineWithId(*gpu, 7), nullptr);
  EXPECT_EQ(LineWithId(*gpu, 7)->name(), "stream 7 ");

  // String pids get fresh ids past every numeric pid, the original kept.
  int string_pids = 0;
  for (const auto& p : trace.space->planes()) {
    for (const auto& s : p.stats()) {
      if (p.stat_metadata().at(s.metadata_id()).name() == chrome::kPid) {
        ++string_pids;
        EXPECT_GT(p.id(), 4242);
      }
    }
  }
  EXPECT_EQ(string_pids, 3);  // "Spans", "Traces", ""
  EXPECT_NE(chrome::FindTopLevelPlane(*trace.space), nullptr);
}

TEST(ChromeJsonRoundTrip, LegacyBareArrayStaysRelativeWithoutAnOrigin) {
  const std::string in = LegacyDocument();
  const HostTrace trace = Read(in);
  EXPECT_FALSE(trace.line_base_known);
  const std::string out = Write(trace);
  ASSERT_EQ(out.front(), '[');
  const auto a = ParseKeepingNumbers(in);
  const auto b = ParseKeepingNumbers(out);
  ASSERT_TRUE(b.is_array());
  EXPECT_EQ(SortedDumps(NormalisedEvents(a)), SortedDumps(NormalisedEvents(b)));
  EXPECT_EQ(EventsByThread(a), EventsByThread(b));
}

// A legacy trace given its start is written as Kineto writes: relative to
// baseTimeNanoseconds (absolute epoch µs would be held by a reader's double
// only to 0.25 µs), on the 2^-10 µs grid.
TEST(ChromeJsonRoundTrip, LegacyWithOriginIsWrittenRelativeToItAsKinetoDoes) {
  const int64_t origin = 1'699'999'999'999'999'000;
  const HostTrace trace = Read(LegacyDocument(), {.origin_ns = origin, .host = "node3"});
  EXPECT_TRUE(trace.line_base_known);
  EXPECT_EQ(trace.line_base_ns, origin);
  const std::string out = Write(trace);
  const auto b = ParseKeepingNumbers(out);
  ASSERT_TRUE(b.is_object()) << "the base needs the object form";
  EXPECT_EQ(b["baseTimeNanoseconds"], origin);
  // 12.3456 µs is 12 641.89 ticks of 2^-10 µs: 12 642 ticks; its end, 52.4456 µs, 53 704 ticks.
  EXPECT_NE(out.find("\"ts\":12.345703125,\"dur\":40.099609375"), std::string::npos) << out;
  const auto a = ParseKeepingNumbers(LegacyDocument());
  const nlohmann::json with_base = {{"baseTimeNanoseconds", origin}, {"traceEvents", a}};  // as if it had named it
  EXPECT_EQ(SortedDumps(NormalisedEvents(with_base)), SortedDumps(NormalisedEvents(b)));
}

TEST(ChromeJsonRoundTrip, TwoSpellingsOfOneNumericTidAreOneThread) {
  // 1e300 and 1.0e300 are one number to every JSON reader (a viewer too);
  // a tid beyond int64 must not become two threads that a write and a
  // second read would merge (found by the fuzzer: not a fixed point).
  const std::string doc = R"({"traceEvents":[)"
                          R"({"ph":"M","name":"thread_name","pid":1,"tid":1e300,"args":{"name":"a"}},)"
                          R"({"ph":"M","name":"thread_name","pid":1,"tid":1.0e300,"args":{"name":"b"}},)"
                          R"({"ph":"X","name":"k","pid":1,"tid":1e300,"ts":1,"dur":1},)"
                          R"({"ph":"X","name":"k","pid":1,"tid":1.0e300,"ts":3,"dur":1}]})";
  const HostTrace first = Read(doc);
  const xspace::XPlane& plane = first.space->planes(0);
  int lines_with_events = 0;
  for (const auto& l : plane.lines()) lines_with_events += l.events_size() > 0;
  EXPECT_EQ(lines_with_events, 1);
  const std::string once = Write(first);
  EXPECT_EQ(Write(Read(once)), once);
}

// A viewer's JSON parser reads 5 and 5.0 as one number, and every integer
// past int64 as the double nearest to it: one process each, here too.
TEST(ChromeJsonRoundTrip, IdsAreTheirValuesAsAViewerReadsThem) {
  const std::string doc = R"({"traceEvents":[)"
                          R"({"ph":"X","name":"a","pid":5,"tid":1,"ts":1,"dur":1},)"
                          R"({"ph":"X","name":"b","pid":5.0,"tid":1.0,"ts":2,"dur":1},)"
                          R"({"ph":"X","name":"c","pid":18446744073709551615,"tid":1,"ts":3,"dur":1},)"
                          R"({"ph":"X","name":"d","pid":1.8446744073709551615e19,"tid":1,"ts":4,"dur":1}]})";
  const HostTrace trace = Read(doc, {.origin_ns = 1'000'000'000'000'000'000, .host = "h"});
  ASSERT_EQ(trace.space->planes_size(), 3);  // and the top-level keys' plane
  EXPECT_NE(chrome::FindTopLevelPlane(*trace.space), &trace.space->planes(0));
  EXPECT_NE(chrome::FindTopLevelPlane(*trace.space), &trace.space->planes(1));
  EXPECT_EQ(trace.space->planes(0).id(), 5);
  EXPECT_EQ(trace.space->planes(0).lines_size(), 1);
  EXPECT_EQ(trace.space->planes(0).lines(0).events_size(), 2);
  EXPECT_EQ(trace.space->planes(1).lines(0).events_size(), 2);
}

TEST(ChromeJsonRoundTrip, AbsoluteEpochMicrosecondsAreReadExactlyAndWrittenRelative) {
  const std::string in =
      R"([{"ph":"X","name":"a","pid":1,"tid":2,"ts":1699999999999999.123,"dur":0.001},)"
      R"({"ph":"X","name":"b","pid":1,"tid":2,"ts":1699999999999998.9876543,"dur":1}])";
  const HostTrace trace = Read(in);
  EXPECT_TRUE(trace.line_base_known);
  EXPECT_EQ(trace.line_base_ns, 0);
  const xspace::XPlane& plane = trace.space->planes(0);
  const xspace::XLine& line = plane.lines(0);
  const auto a = EventStart(trace.line_base_ns, line, line.events(0));
  const auto b = EventStart(trace.line_base_ns, line, line.events(1));
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->ns, 1699999999999999123);
  EXPECT_EQ(a->ps, 0);
  EXPECT_EQ(line.events(0).duration_ps(), 1000);
  // .9876543 µs: 987 ns + 654.3 ps, rounded to the nearest picosecond.
  EXPECT_EQ(b->ns, 1699999999999998987);
  EXPECT_EQ(b->ps, 654);
  // Written relative to the earliest event's second, on the grid: .123 µs is
  // 125.95 ticks (126), its end .124 µs 126.98 (127); .987654 µs is 1 011.36
  // ticks (1 011), its end 1.987654 µs 2 035.36 (2 035).
  const std::string out = Write(trace);
  EXPECT_NE(out.find("\"baseTimeNanoseconds\":1699999999000000000"), std::string::npos) << out;
  EXPECT_NE(out.find("\"ts\":999999.123046875,\"dur\":0.0009765625"), std::string::npos) << out;
  EXPECT_NE(out.find("\"ts\":999998.9873046875,\"dur\":1}"), std::string::npos) << out;
}

TEST(ChromeJsonRoundTrip, RelativeFractionalMicrosecondsAreReadExactlyAndWrittenOnTheGrid) {
  const std::string in = R"({"baseTimeNanoseconds": 1000000000000000000, "traceEvents": [)"
                         R"({"ph":"X","name":"a","pid":1,"tid":1,"ts":12.3456,"dur":0.0004}]})";
  const HostTrace trace = Read(in);
  const xspace::XLine& line = trace.space->planes(0).lines(0);
  const auto t = EventStart(trace.line_base_ns, line, line.events(0));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->ns, 1000000000000000000 + 12345);
  EXPECT_EQ(t->ps, 600);
  EXPECT_EQ(line.events(0).duration_ps(), 400);
  // On the grid: 12 642 ticks; its end (12.346 µs, 12 642.30 ticks) is the
  // same tick, so a reader sees a 0.4 ns event as an instant.
  const std::string out = Write(trace);
  EXPECT_NE(out.find("\"ts\":12.345703125,\"dur\":0"), std::string::npos) << out;
}

TEST(ChromeJsonRoundTrip, NewBaseIsWrittenAndRenamedPlanesAndLinesShow) {
  HostTrace trace = Read(KinetoDocument());
  // What align does: a new base, lines re-timed relative to it.
  trace.line_base_ns += 5'000'000;
  for (auto& plane : *trace.space->mutable_planes()) {
    if (plane.name() == "python 4242") plane.set_name("rank1: python");
    for (auto& line : *plane.mutable_lines()) {
      line.set_timestamp_ns(line.timestamp_ns() - 5'000'000);
      if (line.name() == "stream 7 ") line.set_name("Stream #7");
    }
  }
  const auto b = ParseKeepingNumbers(Write(trace));
  EXPECT_EQ(b["baseTimeNanoseconds"], 1727740800005000000);
  int process_names = 0, thread_names = 0;
  for (const auto& e : b["traceEvents"]) {
    if (e["name"] == "process_name" && e["pid"] == 4242) {
      EXPECT_EQ(e["args"]["name"], "rank1: python");
      ++process_names;
    }
    if (e["name"] == "thread_name" && e["tid"] == 7) {
      EXPECT_EQ(e["args"]["name"], "Stream #7");
      ++thread_names;
    }
    if (e["name"] == "aten::add") {
      EXPECT_EQ(e["ts"], "#num:5391838215.123046875");  // same instant, new base, on the grid
    }
  }
  EXPECT_EQ(process_names, 1);
  EXPECT_EQ(thread_names, 1);
}

}  // namespace
}  // namespace chronolink::trace
