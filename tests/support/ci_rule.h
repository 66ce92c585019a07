// The one rule for tests that cannot run everywhere (no root, no etcd, no
// IPv6, built without the tap): outside CI they skip with the reason; under
// CI that is a failure, because CI must run every test. "Under CI" means the
// environment variable CI is set to a non-empty value other than "0" or
// "false" (.ci/run exports CI=true; scripts/test.sh also fails a CI run that
// skipped anything). Single-threaded: call from the test's own thread.
//
// SkipOrFailOutsideCi() records the skip or the failure on the running test
// (a fatal failure) but cannot return from its caller: return right after
// it, or check IsSkipped() || HasFatalFailure() (the macro
// CHRONOLINK_SKIP_OR_FAIL_OUTSIDE_CI does both, inside a void function).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <string_view>

namespace chronolink::testing {

inline bool UnderCi() {
  const char* ci = std::getenv("CI");
  if (ci == nullptr) return false;
  const std::string_view v(ci);
  return !v.empty() && v != "0" && v != "false" && v != "FALSE" && v != "False";
}

inline void SkipOrFailOutsideCi(const std::string& reason) {
  // A fatal failure, so callers that check HasFatalFailure() stop too.
  if (UnderCi()) FAIL() << "CI must run this test, but: " << reason;
  GTEST_SKIP() << "skipped outside CI: " << reason;
}

}  // namespace chronolink::testing

// Skips (outside CI) or fails (under CI) and returns from the calling void
// function, e.g. a TEST body or SetUp().
#define CHRONOLINK_SKIP_OR_FAIL_OUTSIDE_CI(reason)              \
  do {                                                          \
    ::chronolink::testing::SkipOrFailOutsideCi(reason);         \
    return;                                                     \
  } while (false)
