// Writes one XEvent of the model as one Chrome trace event (a JSON object),
// whichever format the event came from: the keys a Chrome event had are
// rebuilt from the reserved stats (trace/importers/chrome_json/
// chrome_schema.h), every other stat becomes an arg, and ts/dur are
// printed on a binary grid of microseconds (micros_grid.h): ts is the
// event's start rounded to the grid, dur the rounded end less ts, so a
// reader that parses doubles gets ts + dur exactly and nesting as it is.
//
// An event without a `chrome.ph` stat is a complete event ("X"), or a
// counter ("C") on a `_counters_` line. Arg values: int64/uint64/double as
// numbers, str as strings (JSON-kind str verbatim), ref_value as the name of
// the stat metadata it points to, bytes and compressed_str as lowercase hex
// strings. An XSpace event's metadata stats come first, overridden by the
// event's own stats of the same name.
//
// Not thread-safe; one writer per output.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "proto/xplane.pb.h"

namespace chronolink::trace {

// Where an event is written: the per-plane and per-line context.
struct ChromeEventPlace {
  const xspace::XPlane* plane = nullptr;
  std::string pid_text;               // JSON text of the pid to write
  std::optional<std::string> tid_text;  // JSON text of the tid; nullopt: no "tid" key
  int64_t line_base_ns = 0;           // HostTrace::line_base_ns
  int64_t origin_ns = 0;              // ts are written relative to this epoch ns
  int grid_exponent = 10;             // on multiples of 2^-grid_exponent µs (micros_grid.h)
  bool counters_line = false;         // a `_counters_` line: events default to "C"
  // Metadata events ("M") process_name / thread_name have their args.name
  // replaced by these (the model's current plane and line names).
  const std::string* process_name = nullptr;
  const std::string* thread_name = nullptr;
};

// A plane's or event's stat value as JSON text (the rules above; a
// JSON-kind str verbatim).
void AppendStatJson(const xspace::XPlane& plane, const xspace::XStat& stat, std::string* out);

class ChromeEventWriter {
 public:
  // Appends `,`-less JSON of the event to *out. False when its time does
  // not fit int64 ns relative to the origin.
  bool Write(const ChromeEventPlace& place, const xspace::XLine& line, const xspace::XEvent& event,
             std::string* out, std::string* error);

  // The event's ph as it will be written (for callers that skip or count
  // metadata events).
  static std::string_view PhOf(const xspace::XPlane& plane, const xspace::XEvent& event,
                               bool counters_line);
  // Name as written: event metadata display_name, else name.
  static std::string_view NameOf(const xspace::XPlane& plane, const xspace::XEvent& event);

 private:
  struct Entry {
    std::string_view key;
    const xspace::XStat* stat;
    bool json;  // str value is JSON text
  };
  void Classify(const xspace::XPlane& plane, const xspace::XEvent& event);
  bool AppendTimes(const ChromeEventPlace& place, const xspace::XLine& line,
                   const xspace::XEvent& event, std::string_view ph, int64_t keys,
                   std::string* out, std::string* error) const;
  void AppendArgs(const ChromeEventPlace& place, std::string_view ph, std::string_view name,
                  bool force, std::string* out) const;

  // Scratch, reused per event.
  std::vector<Entry> fields_;
  std::vector<Entry> args_;
  std::optional<std::string_view> ph_;
  std::optional<int64_t> keys_;
};

}  // namespace chronolink::trace
