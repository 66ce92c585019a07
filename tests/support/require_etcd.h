// The one rule for tests that need a real etcd-server: outside CI they skip
// with the reason when etcd cannot run here; under CI (CI set) that is a
// failure, because CI must run them. Call it first in SetUp (or the test),
// then return when IsSkipped() or HasFatalFailure().
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tests/support/etcd_server.h"

namespace chronolink::testing {

inline void RequireEtcd() {
  std::string why;
  if (EtcdServerProcess::Available(&why)) return;
  const char* ci = std::getenv("CI");
  if (ci != nullptr && *ci != '\0') FAIL() << "CI must run the etcd tests: " << why;
  GTEST_SKIP() << "etcd not available outside CI: " << why;
}

}  // namespace chronolink::testing
