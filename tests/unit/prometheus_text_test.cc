#include "agent/export/prometheus_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace chronolink {
namespace {

TEST(PrometheusText, GroupsSamplesUnderOneHelpAndType) {
  PrometheusText t;
  t.Family("a_total", "A things", "counter");
  t.Sample("a_total", {{"peer", "2"}}, 3);
  t.Sample("a_total", {{"peer", "3"}}, 4);
  t.Family("a_total", "declared twice", "counter");  // ignored
  t.Family("b", "B", "gauge");
  t.Sample("b", {}, 1.5);
  EXPECT_EQ(t.str(),
            "# HELP a_total A things\n# TYPE a_total counter\n"
            "a_total{peer=\"2\"} 3\na_total{peer=\"3\"} 4\n"
            "# HELP b B\n# TYPE b gauge\nb 1.5\n");
}

TEST(PrometheusText, EscapesLabelValuesAndWritesNaN) {
  PrometheusText t;
  t.Sample("x", {{"l", "a\"b\\c\nd"}}, std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(t.str(), "x{l=\"a\\\"b\\\\c\\nd\"} NaN\n");
}

TEST(PrometheusText, KeepsLargeCountersExact) {
  PrometheusText t;
  t.Sample("c", {}, 9007199254740992.0);  // 2^53
  EXPECT_EQ(t.str(), "c 9007199254740992\n");
}

}  // namespace
}  // namespace chronolink
