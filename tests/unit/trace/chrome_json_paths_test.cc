// Property test of the Chrome JSON writer on generated documents of every
// shape the format allows (tests/support/chrome_trace_generator.h: both
// forms, every ph, flows, metadata, counters, escapes, huge and string
// ids, children ending with their parents, times in every spelling), on
// every path that writes JSON: the faithful layout (one host back in its
// flavour), the same host aligned onto cluster time (align), and several
// hosts in the export layout (combine, export-chrome). Each output is read
// as a viewer reads it (nlohmann::json, numbers as doubles): it parses;
// every ts and dur lies on the 2^-10 µs grid; on every thread, instants in
// the model's exact order stay in that order once parsed (so every nesting
// and every "ends with its parent" the model has, the viewer has); the same
// events with the same pids and tids; and reading it back and writing it
// again gives the same bytes.
//
// CHRONOLINK_PROPERTY_CASES=N runs N documents instead of the default.
#include <gtest/gtest.h>

#include "tests/support/property_cases.h"

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/chrome_trace_generator.h"
#include "trace/align/trace_aligner.h"
#include "trace/exporters/chrome_event_writer.h"
#include "trace/exporters/chrome_json_writer.h"
#include "trace/importers/chrome_json/chrome_json_reader.h"
#include "trace/importers/chrome_json/chrome_schema.h"
#include "trace/model/trace_time.h"

namespace chronolink::trace {
namespace {

using testing::ChromeGenOptions;
using testing::ChromeTimeOrigin;
using testing::GeneratedChromeTrace;
using testing::GeneratorRandom;

using testing::CasesFromEnvironment;

// A skewed clock as a test double: offset and drift, the inverse exact
// enough for ordering (what is checked is the writer, not the map).
class DriftingMap : public HostClockMap {
 public:
  DriftingMap(int64_t anchor_ns, int64_t offset_ns, double drift) : anchor_(anchor_ns), offset_(offset_ns), drift_(drift) {}
  std::optional<MappedInstant> Map(const TraceInstant& host) const override {
    const double since = static_cast<double>(host.ns - anchor_) + host.ps * 1e-3;
    const auto t = AddPs(host, std::llround((offset_ + drift_ * since) * 1000));
    if (!t) return std::nullopt;
    MappedInstant m;
    m.cluster = *t;
    m.uncertainty_ns = 30;
    m.correction_ns = offset_ + drift_ * since;
    return m;
  }
  std::string Describe() const override { return "drifting clock (test double)"; }

 private:
  int64_t anchor_;
  double offset_;
  double drift_;
};

// One timed event as the model has it: its thread and exact instants.
struct ModelInstant {
  size_t thread = 0;
  __int128 start_ps = 0;
  std::optional<__int128> end_ps;
};

// Every timed event of the hosts in the order the writer writes them
// (plane by plane, line by line, file order), with a thread number per
// (host, plane, line).
std::vector<ModelInstant> TimedEvents(const std::vector<const HostTrace*>& hosts, bool export_layout) {
  std::vector<ModelInstant> out;
  size_t thread = 0;
  for (const HostTrace* h : hosts) {
    const xspace::XPlane* top = chrome::FindTopLevelPlane(*h->space);
    for (const auto& plane : h->space->planes()) {
      if (&plane == top) continue;
      for (const auto& line : plane.lines()) {
        ++thread;
        for (const auto& event : line.events()) {
          if (event.data_case() == xspace::XEvent::kNumOccurrences) continue;
          if (ChromeEventWriter::PhOf(plane, event, line.name() == chrome::kCountersLine) == "M") continue;
          const auto start = EventStart(h->line_base_ns, line, event);
          ModelInstant m{thread, static_cast<__int128>(start->ns) * 1000 + start->ps, std::nullopt};
          m.end_ps = m.start_ps + event.duration_ps();
          out.push_back(m);
        }
      }
    }
  }
  (void)export_layout;
  return out;
}

// What a double reader gets: every event with a ts that is not metadata.
struct ReadInstant {
  std::string thread;  // pid/tid as written
  double start = 0;
  std::optional<double> end;
  bool has_dur = false;
};

std::vector<ReadInstant> ReadAsAViewer(const nlohmann::json& doc) {
  std::vector<ReadInstant> out;
  const nlohmann::json& events = doc.is_array() ? doc : doc["traceEvents"];
  for (const auto& e : events) {
    if (e.value("ph", "") == "M" || !e.contains("ts")) continue;
    ReadInstant r;
    r.thread = e.value("pid", nlohmann::json()).dump() + "/" + (e.contains("tid") ? e["tid"].dump() : "-");
    r.start = e["ts"].get<double>();
    if (e.contains("dur")) r.end = r.start + e["dur"].get<double>();
    out.push_back(r);
  }
  return out;
}

bool OnGrid(const nlohmann::json& v) {
  if (!v.is_number()) return false;
  const double ticks = std::ldexp(v.get<double>(), 10);
  return std::trunc(ticks) == ticks && std::fabs(ticks) < 9007199254740992.0;
}

// The checks on one written document against the model it was written from.
void CheckWritten(const std::string& text, const std::vector<const HostTrace*>& hosts, bool export_layout,
                  const std::string& what, int64_t* pairs_checked) {
  const auto doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(doc.is_discarded()) << what << ": not JSON to nlohmann";
  const nlohmann::json& events = doc.is_array() ? doc : doc["traceEvents"];
  for (const auto& e : events) {
    if (e.value("ph", "") == "M") continue;
    for (const char* key : {"ts", "dur"}) {
      if (e.contains(key)) {
        ASSERT_TRUE(OnGrid(e[key])) << what << ": " << key << " off the grid: " << e.dump();
      }
    }
  }
  const auto model = TimedEvents(hosts, export_layout);
  const auto read = ReadAsAViewer(doc);
  ASSERT_EQ(model.size(), read.size()) << what << ": timed events written";
  // Per thread, every pair of instants (starts and ends) keeps its order.
  std::map<size_t, std::vector<std::pair<__int128, double>>> by_thread;
  for (size_t i = 0; i < model.size(); ++i) {
    if (i > 0 && model[i].thread == model[i - 1].thread) {
      ASSERT_EQ(read[i].thread, read[i - 1].thread) << what << ": one line written as two threads";
    }
    by_thread[model[i].thread].push_back({model[i].start_ps, read[i].start});
    if (read[i].end) by_thread[model[i].thread].push_back({*model[i].end_ps, *read[i].end});
  }
  for (const auto& [thread, instants] : by_thread) {
    for (size_t a = 0; a < instants.size(); ++a) {
      for (size_t b = 0; b < instants.size(); ++b) {
        if (instants[a].first <= instants[b].first) {
          ASSERT_LE(instants[a].second, instants[b].second)
              << what << ": thread " << thread << ", an instant no later than another in the model "
              << "comes after it once parsed";
        }
      }
      *pairs_checked += static_cast<int64_t>(instants.size());
    }
  }
}

// Read back and written again: the same bytes.
void CheckFixedPoint(const std::string& text, const ChromeReadOptions& read, const std::string& what) {
  HostTrace again;
  std::string error, second;
  ASSERT_TRUE(ParseChromeJson(text, read, &again, &error)) << what << ": the output does not read back: " << error;
  ASSERT_TRUE(WriteChromeJsonString({&again}, {}, &second, &error)) << error;
  ASSERT_EQ(second, text) << what << ": read + write is not a fixed point";
}

TEST(ChromeJsonPathsTest, EveryGeneratedDocumentIsWrittenAsAViewerNeedsItOnEveryPath) {
  const int64_t cases = CasesFromEnvironment(1500);
  int64_t pairs = 0, aligned = 0, exported = 0;
  for (int64_t seed = 1; seed <= cases; ++seed) {
    GeneratorRandom random(static_cast<uint64_t>(seed));
    ChromeGenOptions options;
    const GeneratedChromeTrace gen = GenerateChromeTrace(random, options);
    ChromeReadOptions read;
    read.host = "rank" + std::to_string(seed % 8);
    if (gen.time_origin == ChromeTimeOrigin::kUnstated) read.origin_ns = gen.origin_ns;
    HostTrace host;
    std::string error, text;
    ASSERT_TRUE(ParseChromeJson(gen.text, read, &host, &error)) << "seed " << seed << ": " << error;
    SCOPED_TRACE("seed " + std::to_string(seed));

    // The faithful layout: the document back in its own flavour.
    ASSERT_TRUE(WriteChromeJsonString({&host}, {}, &text, &error)) << error;
    CheckWritten(text, {&host}, false, "faithful", &pairs);
    ChromeReadOptions reread = read;
    CheckFixedPoint(text, reread, "faithful");

    // Aligned onto cluster time, as align writes it.
    const DriftingMap map(options.start_ns, seed % 2 ? -4'352'017 : 24'447'093, seed % 3 ? 91e-6 : -47e-6);
    HostTrace copy;
    ASSERT_TRUE(ParseChromeJson(gen.text, read, &copy, &error)) << error;
    AlignOptions align;
    align.max_extrapolation_ns = INT64_MAX;
    align.max_bound_ns = INFINITY;
    AlignResult result;
    if (AlignHosts({&copy}, {&map}, align, &result, &error)) {
      ASSERT_TRUE(WriteChromeJsonString({&copy}, {}, &text, &error)) << error;
      CheckWritten(text, {&copy}, false, "aligned", &pairs);
      ++aligned;
    } else {
      // A document without one timed event has no span to align (docs/traces.md).
      EXPECT_NE(error.find("no timed event"), std::string::npos) << "align refused a generated document: " << error;
    }

    // Several hosts in one document (combine, export-chrome).
    GeneratorRandom other_random(static_cast<uint64_t>(seed) * 31 + 7);
    const GeneratedChromeTrace other_gen = GenerateChromeTrace(other_random, options);
    ChromeReadOptions other_read;
    other_read.host = "other";
    if (other_gen.time_origin == ChromeTimeOrigin::kUnstated) other_read.origin_ns = other_gen.origin_ns;
    HostTrace other;
    ASSERT_TRUE(ParseChromeJson(other_gen.text, other_read, &other, &error)) << error;
    ASSERT_TRUE(WriteChromeJsonString({&host, &other}, {}, &text, &error)) << error;
    CheckWritten(text, {&host, &other}, true, "export", &pairs);
    ++exported;
  }
  std::cout << "generated documents: " << cases << " written faithfully, " << aligned << " aligned, " << exported
            << " exported with another; " << pairs << " instant pairs kept their order as doubles\n";
  EXPECT_GT(aligned, cases / 2);
}

}  // namespace
}  // namespace chronolink::trace
