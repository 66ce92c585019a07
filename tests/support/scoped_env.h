// Sets an environment variable for one scope and puts back what was there
// (or unsets it). Tests that steer a library through the environment
// (CHRONOLINK_*_LIBRARY overrides) use it. Not thread-safe, like setenv.
#pragma once

#include <stdlib.h>

#include <string>

namespace chronolink::testing {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

}  // namespace chronolink::testing
