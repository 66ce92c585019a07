// The one bounded wait of the tests: polls a predicate every 20 ms until it
// holds or the timeout passes, and reports whether it held. Every wait in a
// test has a bound, so a broken component fails the test instead of hanging it.
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>

namespace chronolink::testing {

template <typename Predicate>
bool WaitUntil(Predicate predicate, int64_t timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (predicate()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return predicate();
}

}  // namespace chronolink::testing
