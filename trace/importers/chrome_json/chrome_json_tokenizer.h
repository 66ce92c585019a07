// The streaming half of the Chrome trace reader (as Perfetto splits its
// importers/json into tokenizer and parser): a nlohmann SAX handler that
// walks the document once and hands each trace event, as a flat
// PendingEvent, to a sink as soon as its closing brace is read. Nothing but
// the event being read is held, so memory does not grow with the file;
// nested values (args such as Kineto's "Input Dims", top-level keys such as
// `distributedInfo`) are kept as compact JSON text, floats with the exact
// text they were written with.
//
// It accepts a bare array of events or an object with a `traceEvents` array
// (other top-level keys go to the sink verbatim). Anything else, an event
// that is not an object, nesting deeper than kMaxDepth, or what the sink
// refuses stops the parse with one message naming the byte offset.
//
// Not thread-safe; one tokenizer per parse.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "trace/importers/chrome_json/byte_cursor.h"

namespace chronolink::trace {

// One JSON value as the reader keeps it.
struct JsonScalar {
  enum class Kind : uint8_t { kAbsent, kInt, kUint, kDouble, kString, kJson };
  Kind kind = Kind::kAbsent;
  int64_t i = 0;      // kInt (negative integers)
  uint64_t u = 0;     // kUint (non-negative integers)
  double d = 0;       // kDouble
  std::string text;   // kString: the string; kJson: JSON text; kDouble: the number as written

  bool present() const { return kind != Kind::kAbsent; }
  bool IsNumber() const { return kind == Kind::kInt || kind == Kind::kUint || kind == Kind::kDouble; }
  // The value as JSON text (strings quoted).
  std::string ToJsonText() const;
};

struct JsonMember {
  std::string key;
  JsonScalar value;
};

// A trace event between its braces. Buffers are reused from event to event.
struct PendingEvent {
  uint64_t index = 0;         // position in traceEvents
  uint64_t start_offset = 0;  // byte offset of its '{' (approximately: after it)
  JsonScalar name, ph, ts, dur, pid, tid;
  bool has_args_object = false;  // "args" was an object (its members in args())

  std::span<const JsonMember> args() const { return {args_.data(), n_args_}; }
  std::span<const JsonMember> fields() const { return {fields_.data(), n_fields_}; }

  void Reset(uint64_t new_index, uint64_t offset);
  JsonMember* AddArg() { return Add(&args_, &n_args_); }
  JsonMember* AddField() { return Add(&fields_, &n_fields_); }

 private:
  static JsonMember* Add(std::vector<JsonMember>* v, size_t* n);
  std::vector<JsonMember> args_;
  std::vector<JsonMember> fields_;
  size_t n_args_ = 0;
  size_t n_fields_ = 0;
};

class ChromeEventSink {
 public:
  virtual ~ChromeEventSink() = default;
  virtual void OnForm(bool object_form) = 0;
  // A top-level key other than traceEvents, with its value.
  virtual bool OnTopLevel(const JsonMember& member, std::string* error) = 0;
  // False (with *error) refuses the event and stops the parse.
  virtual bool OnEvent(const PendingEvent& event, std::string* error) = 0;
};

inline constexpr int kMaxDepth = 64;

// Parses everything `cursor` yields. On failure *error is
// "byte N: what" (traceEvents[i] named when inside an event).
bool TokenizeChromeJson(ByteCursor* cursor, ChromeEventSink* sink, std::string* error);

}  // namespace chronolink::trace
