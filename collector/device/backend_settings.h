// BackendOptions::settings ("key=value") for the vendor backends, from one
// table of integer keys with ranges and of word keys with their choices:
// unknown keys, bad numbers, out-of-range values and unknown words are
// errors that name the key and list what is allowed. Pure.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace chronolink::collector {

struct IntSetting {
  std::string_view key;
  int64_t min;
  int64_t max;
  int64_t* value;  // holds the default on entry
};

struct WordSetting {
  std::string_view key;
  std::vector<std::string_view> choices;
  std::string* value;  // holds the default on entry
};

// `backend` names the backend in messages ("rocm").
bool ParseBackendSettings(std::string_view backend, std::span<const std::string> settings,
                          std::initializer_list<IntSetting> ints, std::initializer_list<WordSetting> words,
                          std::string* why);

}  // namespace chronolink::collector
