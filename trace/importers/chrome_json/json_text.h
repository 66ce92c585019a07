// Small pieces of JSON text shared by the Chrome trace reader and writer:
// string quoting, number formatting that reads back to the same value, and
// a builder that re-serialises a nested value compactly from SAX callbacks
// (the reader keeps nested args, e.g. Kineto's "Input Dims", as JSON text
// instead of building a DOM).
//
// Thread-compatible (a builder per thread).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace chronolink::trace {

// Appends `s` as a quoted JSON string. Invalid UTF-8 (possible in XSpace
// strings, never in parsed JSON) becomes U+FFFD so the output stays JSON.
void AppendJsonString(std::string_view s, std::string* out);

// Shortest text that reads back to exactly `v` (std::to_chars), with ".0"
// added to integral values so they stay floating point; NaN and infinities,
// which JSON lacks, become null.
void AppendJsonDouble(double v, std::string* out);
std::string JsonDoubleText(double v);

void AppendJsonInt(int64_t v, std::string* out);
void AppendJsonUint(uint64_t v, std::string* out);

// Compact JSON text of one value, fed SAX events in document order. The
// caller knows when the value is complete (Depth() returns to 0 after a
// start/end pair, or after a single scalar at depth 0).
class JsonTextBuilder {
 public:
  void Clear();
  void Null();
  void Boolean(bool v);
  void Int(int64_t v);
  void Uint(uint64_t v);
  void NumberText(std::string_view text);  // a float exactly as written
  void String(std::string_view v);
  void Key(std::string_view k);
  void StartObject();
  void EndObject();
  void StartArray();
  void EndArray();

  int Depth() const { return depth_; }
  const std::string& Text() const { return text_; }
  std::string& MutableText() { return text_; }

 private:
  void BeforeValue();

  std::string text_;
  int depth_ = 0;
  bool need_comma_ = false;
};

}  // namespace chronolink::trace
