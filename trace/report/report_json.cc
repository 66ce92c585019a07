#include "trace/report/report_json.h"

#include <cmath>

namespace chronolink::trace::report {
namespace {

const nlohmann::json* Member(const nlohmann::json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

}  // namespace

std::optional<double> NumberField(const nlohmann::json& object, std::string_view key) {
  const nlohmann::json* value = Member(object, key);
  if (value == nullptr || !value->is_number()) return std::nullopt;
  const double number = value->get<double>();
  return std::isfinite(number) ? std::optional(number) : std::nullopt;
}

std::optional<int64_t> IntField(const nlohmann::json& object, std::string_view key) {
  const nlohmann::json* value = Member(object, key);
  if (value == nullptr) return std::nullopt;
  if (value->is_number_unsigned()) {
    const uint64_t u = value->get<uint64_t>();
    return u <= static_cast<uint64_t>(INT64_MAX) ? std::optional(static_cast<int64_t>(u)) : std::nullopt;
  }
  if (value->is_number_integer()) return value->get<int64_t>();
  if (value->is_number_float()) {
    const double d = value->get<double>();
    // 2^63 itself is out of range; every double below it converts exactly.
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2233720368547758e18) {
      return static_cast<int64_t>(d);
    }
  }
  return std::nullopt;
}

std::optional<bool> BoolField(const nlohmann::json& object, std::string_view key) {
  const nlohmann::json* value = Member(object, key);
  if (value == nullptr || !value->is_boolean()) return std::nullopt;
  return value->get<bool>();
}

std::optional<std::string> StringField(const nlohmann::json& object, std::string_view key) {
  const nlohmann::json* value = Member(object, key);
  if (value == nullptr || !value->is_string()) return std::nullopt;
  return value->get<std::string>();
}

const nlohmann::json& ObjectField(const nlohmann::json& object, std::string_view key) {
  static const nlohmann::json kEmpty = nlohmann::json::object();
  const nlohmann::json* value = Member(object, key);
  return value != nullptr && value->is_object() ? *value : kEmpty;
}

const nlohmann::json& ArrayField(const nlohmann::json& object, std::string_view key) {
  static const nlohmann::json kEmpty = nlohmann::json::array();
  const nlohmann::json* value = Member(object, key);
  return value != nullptr && value->is_array() ? *value : kEmpty;
}

}  // namespace chronolink::trace::report
