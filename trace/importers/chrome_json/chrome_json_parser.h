// The model-building half of the Chrome trace reader: receives events from
// the tokenizer one at a time and appends them to a HostTrace, one XPlane
// per pid and one XLine per (pid, tid), in file order, with every key the
// event had kept as stats (trace/importers/chrome_json/chrome_schema.h).
// Finish() then assigns ids to string pids/tids, decides what the
// timestamps are relative to, and stores the document's other top-level
// keys. docs/chrome-trace.md states every rule.
//
// Memory: only the model grows (names, arg keys and cat/ph values are
// interned per plane); nothing per event is kept outside it.
//
// Not thread-safe; one builder per parse.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "trace/importers/chrome_json/chrome_json_tokenizer.h"
#include "trace/importers/chrome_json/chrome_schema.h"
#include "trace/model/host_trace.h"

namespace chronolink::trace {

class ChromeTraceBuilder final : public ChromeEventSink {
 public:
  // `out` must be a fresh HostTrace.
  explicit ChromeTraceBuilder(HostTrace* out);
  ~ChromeTraceBuilder() override;

  void OnForm(bool object_form) override;
  bool OnTopLevel(const JsonMember& member, std::string* error) override;
  bool OnEvent(const PendingEvent& event, std::string* error) override;

  // After the last event. `origin_ns`: what relative timestamps with no
  // baseTimeNanoseconds are relative to, when the caller knows it.
  bool Finish(std::optional<int64_t> origin_ns, std::string* error);

 private:
  struct LineState;
  struct PlaneState;

  PlaneState* PlaneFor(const JsonScalar& pid);
  LineState* LineFor(PlaneState* plane, const JsonScalar& tid);
  int64_t StatMetadataId(PlaneState* plane, const std::string& name, chrome::StatKind kind);
  int64_t EventMetadataId(PlaneState* plane, const std::string& name);
  using StatList = google::protobuf::RepeatedPtrField<xspace::XStat>;
  void AddStat(PlaneState* plane, StatList* stats, const std::string& name, chrome::StatKind kind,
               const JsonScalar& value);
  void AddRef(PlaneState* plane, xspace::XEvent* event, const std::string& name,
              const std::string& value);
  bool PlaceInTime(const PendingEvent& e, LineState* line, xspace::XEvent* event,
                   std::string* error);
  void AddEventStats(const PendingEvent& e, PlaneState* plane, xspace::XEvent* event);
  void ApplyMetadataEvent(const PendingEvent& e, PlaneState* plane, LineState* line);

  void AssignIds();
  bool NormaliseLines(std::string* error);
  void DecideTimeBase(std::optional<int64_t> origin_ns);
  void StoreTopLevel();

  HostTrace* out_;
  std::vector<std::unique_ptr<PlaneState>> planes_;
  std::unordered_map<int64_t, PlaneState*> int_planes_;
  std::unordered_map<std::string, PlaneState*> other_planes_;
  bool object_form_ = false;
  std::vector<JsonMember> top_level_;
  std::optional<int64_t> base_time_ns_;  // baseTimeNanoseconds
  uint64_t absolute_events_ = 0;         // timed events at or after kAbsoluteLineThresholdNs
  uint64_t relative_events_ = 0;
};

}  // namespace chronolink::trace
