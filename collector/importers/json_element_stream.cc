// Selected array elements of a streamed JSON document (json_element_stream.h).
#include "collector/importers/json_element_stream.h"

#include <nlohmann/json.hpp>

namespace chronolink::collector {
namespace {

constexpr char kArrayFrame[] = "[]";

class ElementSaxHandler {
 public:
  ElementSaxHandler(trace::ByteCursor* cursor, const JsonStreamLimits& limits, ElementSink* sink)
      : cursor_(cursor), limits_(limits), sink_(sink) {}

  const std::string& error() const { return error_; }

  bool null() { return Scalar(FlatValue{}); }
  bool boolean(bool v) {
    FlatValue f;
    f.kind = FlatValue::Kind::kBool;
    f.b = v;
    return Scalar(std::move(f));
  }
  bool number_integer(int64_t v) {
    FlatValue f;
    f.kind = v < 0 ? FlatValue::Kind::kInt : FlatValue::Kind::kUint;
    f.i = v;
    f.u = v < 0 ? 0 : static_cast<uint64_t>(v);
    return Scalar(std::move(f));
  }
  bool number_unsigned(uint64_t v) {
    FlatValue f;
    f.kind = FlatValue::Kind::kUint;
    f.u = v;
    return Scalar(std::move(f));
  }
  bool number_float(double v, const std::string&) {
    FlatValue f;
    f.kind = FlatValue::Kind::kDouble;
    f.d = v;
    return Scalar(std::move(f));
  }
  bool string(std::string& v) {
    FlatValue f;
    f.kind = FlatValue::Kind::kString;
    f.s = v.size() > limits_.max_string_bytes ? v.substr(0, limits_.max_string_bytes) : std::move(v);
    return Scalar(std::move(f));
  }
  bool binary(nlohmann::json::binary_t&) { return Fail("binary values are not JSON text"); }

  bool start_object(std::size_t) {
    if (!Deeper()) return false;
    if (capture_depth_ == 0 && !frames_.empty() && frames_.back() == kArrayFrame) {
      section_ = sink_->Select(frames_);
      if (section_ >= 0) {
        capture_depth_ = frames_.size() + 1;
        element_.members.clear();
        element_.offset = cursor_->Offset();
      }
    }
    frames_.emplace_back();
    return true;
  }
  bool key(std::string& k) {
    frames_.back() = k;
    return true;
  }
  bool end_object() {
    frames_.pop_back();
    if (capture_depth_ != 0 && frames_.size() + 1 == capture_depth_) {
      capture_depth_ = 0;
      std::string why;
      if (!sink_->OnElement(section_, element_, &why)) return Fail(why);
    }
    return true;
  }
  bool start_array(std::size_t) {
    if (!Deeper()) return false;
    frames_.emplace_back(kArrayFrame);
    return true;
  }
  bool end_array() {
    frames_.pop_back();
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::json::exception& ex) {
    if (error_.empty()) {
      std::string what = ex.what();
      if (const auto p = what.find("] "); what.rfind("[json.exception", 0) == 0 && p != std::string::npos) {
        what.erase(0, p + 2);
      }
      error_ = "byte " + std::to_string(position) + ": " + what;
    }
    return false;
  }

 private:
  bool Fail(const std::string& why) {
    if (error_.empty()) error_ = "byte " + std::to_string(cursor_->Offset()) + ": " + why;
    return false;
  }

  bool Deeper() {
    if (frames_.size() < limits_.max_depth) return true;
    return Fail("nested deeper than " + std::to_string(limits_.max_depth) + " levels");
  }

  // A value inside a captured element, outside any array in it: "a.b.c".
  bool Scalar(FlatValue v) {
    if (capture_depth_ == 0 || element_.members.size() >= limits_.max_members) return true;
    std::string name;
    for (size_t i = capture_depth_ - 1; i < frames_.size(); ++i) {
      if (frames_[i] == kArrayFrame) return true;
      if (!name.empty()) name += '.';
      name += frames_[i];
    }
    element_.members.emplace_back(std::move(name), std::move(v));
    return true;
  }

  trace::ByteCursor* cursor_;
  const JsonStreamLimits& limits_;
  ElementSink* sink_;
  std::vector<std::string> frames_;  // an object's current key, or "[]"
  size_t capture_depth_ = 0;         // frames_.size() inside the captured element; 0: none
  int section_ = -1;
  FlatElement element_;
  std::string error_;
};

}  // namespace

const FlatValue* FlatElement::Find(std::string_view key) const {
  for (const auto& [k, v] : members) {
    if (k == key) return &v;
  }
  return nullptr;
}

bool StreamJsonElements(trace::ByteCursor* cursor, const JsonStreamLimits& limits, ElementSink* sink,
                        std::string* error) {
  ElementSaxHandler handler(cursor, limits, sink);
  return trace::SaxParseCursor(cursor, &handler, error);
}

}  // namespace chronolink::collector
