// Strict JSON input shared by the config file and the cluster file: a file
// read whole, parsed with duplicate keys refused (nlohmann would silently keep
// the last one, hiding a typo'd override).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace chronolink {

// "cannot open '<path>': <reason>" / "cannot read '<path>'" on failure.
bool ReadWholeFile(const std::string& path, std::string* text, std::string* error);

// "invalid JSON: ..." or "key 'k' appears twice in the same object" on failure.
bool ParseJsonNoDuplicates(const std::string& text, nlohmann::json* out, std::string* error);

}  // namespace chronolink
