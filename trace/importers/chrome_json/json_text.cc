#include "trace/importers/chrome_json/json_text.h"

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

namespace chronolink::trace {
namespace {

bool PlainAscii(std::string_view s) {
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f || c == '"' || c == '\\') return false;
  }
  return true;
}

template <typename T>
void AppendToChars(T v, std::string* out) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, r.ptr);
}

}  // namespace

void AppendJsonString(std::string_view s, std::string* out) {
  if (PlainAscii(s)) {  // the common case: no escaping, no UTF-8 to check
    out->push_back('"');
    out->append(s);
    out->push_back('"');
    return;
  }
  // nlohmann's serializer escapes and, with `replace`, repairs invalid UTF-8.
  out->append(nlohmann::json(std::string(s)).dump(-1, ' ', false,
                                                  nlohmann::json::error_handler_t::replace));
}

void AppendJsonDouble(double v, std::string* out) {
  if (!std::isfinite(v)) {
    out->append("null");
    return;
  }
  const size_t start = out->size();
  AppendToChars(v, out);
  if (out->find_first_of(".eE", start) == std::string::npos) out->append(".0");
}

std::string JsonDoubleText(double v) {
  std::string s;
  AppendJsonDouble(v, &s);
  return s;
}

void AppendJsonInt(int64_t v, std::string* out) { AppendToChars(v, out); }
void AppendJsonUint(uint64_t v, std::string* out) { AppendToChars(v, out); }

void JsonTextBuilder::Clear() {
  text_.clear();
  depth_ = 0;
  need_comma_ = false;
}

void JsonTextBuilder::BeforeValue() {
  if (need_comma_) text_.push_back(',');
  need_comma_ = true;
}

void JsonTextBuilder::Null() {
  BeforeValue();
  text_.append("null");
}

void JsonTextBuilder::Boolean(bool v) {
  BeforeValue();
  text_.append(v ? "true" : "false");
}

void JsonTextBuilder::Int(int64_t v) {
  BeforeValue();
  AppendJsonInt(v, &text_);
}

void JsonTextBuilder::Uint(uint64_t v) {
  BeforeValue();
  AppendJsonUint(v, &text_);
}

void JsonTextBuilder::NumberText(std::string_view text) {
  BeforeValue();
  text_.append(text);
}

void JsonTextBuilder::String(std::string_view v) {
  BeforeValue();
  AppendJsonString(v, &text_);
}

void JsonTextBuilder::Key(std::string_view k) {
  BeforeValue();
  AppendJsonString(k, &text_);
  text_.push_back(':');
  need_comma_ = false;  // the value follows the colon directly
}

void JsonTextBuilder::StartObject() {
  BeforeValue();
  text_.push_back('{');
  ++depth_;
  need_comma_ = false;
}

void JsonTextBuilder::EndObject() {
  text_.push_back('}');
  --depth_;
  need_comma_ = true;
}

void JsonTextBuilder::StartArray() {
  BeforeValue();
  text_.push_back('[');
  ++depth_;
  need_comma_ = false;
}

void JsonTextBuilder::EndArray() {
  text_.push_back(']');
  --depth_;
  need_comma_ = true;
}

}  // namespace chronolink::trace
