// Streams a JSON document once (nlohmann SAX over trace/importers/
// chrome_json/byte_cursor.h, so a file is read in fixed chunks) and hands
// over the array elements a sink selects, each flattened to a list of
// "a.b.c" -> scalar members (values inside arrays within an element are
// skipped). Everything else is parsed and dropped, so memory holds one
// element at a time. Limits: nesting depth, members per element, the
// length kept of a string. Broken JSON stops the parse with the byte
// offset.
//
// Not thread-safe; one stream per parse.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trace/importers/chrome_json/byte_cursor.h"

namespace chronolink::collector {

struct FlatValue {
  enum class Kind : uint8_t { kNull, kBool, kInt, kUint, kDouble, kString };
  Kind kind = Kind::kNull;
  int64_t i = 0;   // kInt (negative)
  uint64_t u = 0;  // kUint (non-negative integers)
  double d = 0;    // kDouble
  bool b = false;  // kBool
  std::string s;   // kString (cut at the stream's string limit)
};

struct FlatElement {
  uint64_t offset = 0;  // byte offset near the element's start
  std::vector<std::pair<std::string, FlatValue>> members;
  const FlatValue* Find(std::string_view key) const;
};

class ElementSink {
 public:
  virtual ~ElementSink() = default;
  // Called at every object that is an array element, with the path to it:
  // the keys of the objects above it and "[]" for each array, e.g.
  // {"rocprofiler-sdk-tool", "[]", "agents", "[]"}. Returns a section id
  // >= 0 to receive the element, or -1 to skip it.
  virtual int Select(const std::vector<std::string>& path) = 0;
  // False (with *error) stops the parse.
  virtual bool OnElement(int section, const FlatElement& element, std::string* error) = 0;
};

struct JsonStreamLimits {
  size_t max_depth = 64;
  size_t max_members = 1024;  // per element; further members are dropped
  size_t max_string_bytes = 1 << 16;
};

bool StreamJsonElements(trace::ByteCursor* cursor, const JsonStreamLimits& limits, ElementSink* sink,
                        std::string* error);

}  // namespace chronolink::collector
