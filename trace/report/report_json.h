// Fields of the JSON documents the report draws (align's summary and
// validate's result) read tolerantly: those files are produced by other
// commands, possibly other versions, and a picture with one blank cell is
// more useful than none. A missing or mistyped field reads as nullopt.
// Pure functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace chronolink::trace::report {

std::optional<double> NumberField(const nlohmann::json& object, std::string_view key);
// An integer, or a double that holds one within int64.
std::optional<int64_t> IntField(const nlohmann::json& object, std::string_view key);
std::optional<bool> BoolField(const nlohmann::json& object, std::string_view key);
std::optional<std::string> StringField(const nlohmann::json& object, std::string_view key);
// The member if it is of that kind, else an empty one.
const nlohmann::json& ObjectField(const nlohmann::json& object, std::string_view key);
const nlohmann::json& ArrayField(const nlohmann::json& object, std::string_view key);

}  // namespace chronolink::trace::report
