// "key=value" settings against a table (backend_settings.h).
#include "collector/device/backend_settings.h"

#include <charconv>

namespace chronolink::collector {

namespace {

std::string KnownKeys(std::initializer_list<IntSetting> ints, std::initializer_list<WordSetting> words) {
  std::string out;
  for (const IntSetting& s : ints) out += (out.empty() ? "" : ", ") + std::string(s.key);
  for (const WordSetting& s : words) out += (out.empty() ? "" : ", ") + std::string(s.key);
  return out.empty() ? "none" : out;
}

bool SetInt(std::string_view backend, const IntSetting& s, std::string_view text, std::string* why) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) {
    *why = std::string(backend) + " setting " + std::string(s.key) + ": '" + std::string(text) +
           "' is not an integer";
    return false;
  }
  if (v < s.min || v > s.max) {
    *why = std::string(backend) + " setting " + std::string(s.key) + "=" + std::to_string(v) +
           " is out of range [" + std::to_string(s.min) + ", " + std::to_string(s.max) + "]";
    return false;
  }
  *s.value = v;
  return true;
}

bool SetWord(std::string_view backend, const WordSetting& s, std::string_view text, std::string* why) {
  std::string choices;
  for (std::string_view c : s.choices) {
    if (c == text) {
      *s.value = std::string(text);
      return true;
    }
    choices += (choices.empty() ? "" : ", ") + std::string(c);
  }
  *why = std::string(backend) + " setting " + std::string(s.key) + ": '" + std::string(text) +
         "' is not one of " + choices;
  return false;
}

}  // namespace

bool ParseBackendSettings(std::string_view backend, std::span<const std::string> settings,
                          std::initializer_list<IntSetting> ints, std::initializer_list<WordSetting> words,
                          std::string* why) {
  for (const std::string& setting : settings) {
    const size_t eq = setting.find('=');
    if (eq == std::string::npos || eq == 0) {
      *why = std::string(backend) + " setting '" + setting + "' is not key=value";
      return false;
    }
    const std::string_view key(setting.data(), eq);
    const std::string_view text(setting.data() + eq + 1, setting.size() - eq - 1);
    bool known = false;
    for (const IntSetting& s : ints) {
      if (s.key != key) continue;
      if (!SetInt(backend, s, text, why)) return false;
      known = true;
    }
    for (const WordSetting& s : words) {
      if (s.key != key) continue;
      if (!SetWord(backend, s, text, why)) return false;
      known = true;
    }
    if (!known) {
      *why = "unknown " + std::string(backend) + " setting '" + std::string(key) +
             "' (known: " + KnownKeys(ints, words) + ")";
      return false;
    }
  }
  return true;
}

}  // namespace chronolink::collector
