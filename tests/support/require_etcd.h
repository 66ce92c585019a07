// Tests that need a real etcd-server follow the CI rule (ci_rule.h): outside
// CI they skip with the reason when etcd cannot run here; under CI that is a
// failure. Call it first in SetUp (or the test), then return when
// IsSkipped() or HasFatalFailure().
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tests/support/ci_rule.h"
#include "tests/support/etcd_server.h"

namespace chronolink::testing {

inline void RequireEtcd() {
  std::string why;
  if (EtcdServerProcess::Available(&why)) return;
  SkipOrFailOutsideCi("no etcd-server: " + why);
}

}  // namespace chronolink::testing
