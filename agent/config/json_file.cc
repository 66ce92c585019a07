#include "agent/config/json_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

namespace chronolink {

using json = nlohmann::json;

bool ReadWholeFile(const std::string& path, std::string* text, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "cannot open '" + path + "': " + std::strerror(errno);
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    *error = "cannot read '" + path + "'";
    return false;
  }
  *text = ss.str();
  return true;
}

bool ParseJsonNoDuplicates(const std::string& text, json* out, std::string* error) {
  std::vector<std::set<std::string>> seen;
  std::string duplicate;
  auto cb = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start: seen.emplace_back(); break;
      case json::parse_event_t::object_end:
        if (!seen.empty()) seen.pop_back();
        break;
      case json::parse_event_t::key:
        if (!seen.empty() && !seen.back().insert(parsed.get<std::string>()).second &&
            duplicate.empty()) {
          duplicate = parsed.get<std::string>();
        }
        break;
      default: break;
    }
    return true;
  };
  try {
    *out = json::parse(text, cb);
  } catch (const json::exception& e) {
    // Not only parse_error: a number beyond a double (1e400) is out_of_range.
    *error = std::string("invalid JSON: ") + e.what();
    return false;
  }
  if (!duplicate.empty()) {
    *error = "key '" + duplicate + "' appears twice in the same object";
    return false;
  }
  return true;
}

}  // namespace chronolink
