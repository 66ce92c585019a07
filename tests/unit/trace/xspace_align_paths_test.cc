// Property test: generated XSpace hosts of every shape the schema allows
// (tests/support/xspace_generator.h: unknown fields everywhere, fields out
// of order, every stat kind, overlong varints, empty lines and planes, ...)
// through every path that aligns a host (tests/support/align_paths_check.h):
// each output parses with protobuf, and the wire-level rewrite's equals the
// model's wherever it does not decline. And lines and planes sized around
// each varint width boundary, so that their length prefixes change width
// on the way in both directions (the rewrite once wrote a prefix one byte
// off there, and nothing noticed).
//
// CHRONOLINK_PROPERTY_CASES=N runs N generated hosts instead of the default
// (the long run in docs/traces.md); the tally is printed either way.
#include <gtest/gtest.h>

#include "tests/support/property_cases.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <vector>

#include "tests/support/align_paths_check.h"
#include "tests/support/xspace_generator.h"

namespace chronolink::trace::testing {
namespace {

constexpr int64_t kSessionStart = 1'795'320'926'000'000'000;
constexpr int64_t kMarginNs = 30'000'000'000;

AlignOptions OptionsFor(uint64_t seed) {
  AlignOptions options;
  options.counters_line = seed % 3 != 0;
  options.max_extrapolation_ns = std::numeric_limits<int64_t>::max();
  options.max_bound_ns = INFINITY;
  options.offsets_source = "generated";
  return options;
}

// The clock maps, one per variant, over the session and a margin.
class MapsForSpan {
 public:
  explicit MapsForSpan(int64_t span_ns) {
    for (uint64_t v = 0; v < 75; ++v) {
      maps_.push_back(MakeTestClockMap(kSessionStart - kMarginNs, kSessionStart + span_ns + kMarginNs, v));
    }
  }
  const HostClockMap& For(uint64_t seed) const { return *maps_[seed % maps_.size()].map; }

 private:
  std::vector<TestClockMap> maps_;
};

TEST(XSpaceAlignPathsTest, EveryGeneratedHostAlignsTheSameOnEveryPath) {
  const int64_t cases = CasesFromEnvironment(3000);
  XSpaceGenOptions gen;
  gen.session_start_ns = kSessionStart;
  const MapsForSpan maps(gen.span_ns);
  AlignPathsTally tally;
  for (int64_t seed = 1; seed <= cases; ++seed) {
    GeneratorRandom random(static_cast<uint64_t>(seed));
    const GeneratedXSpace host = GenerateXSpace(random, gen);
    std::string failure;
    ASSERT_TRUE(CheckAlignPaths(host.bytes, maps.For(seed), OptionsFor(seed), &tally, &failure))
        << "seed " << seed << ": " << failure;
  }
  std::cout << "generated hosts: " << tally.Summary() << "\n";
  EXPECT_EQ(tally.hosts, cases);
  EXPECT_GT(tally.wire_aligned, cases / 2) << "the rewrite declined most hosts: it went untested";
  EXPECT_GT(tally.wire_declined, 0) << "nothing declined: the generator lost its odd inputs";
}

// Lines and planes whose length is each boundary ± a few bytes: after the
// rewrite (times re-based, offsets scaled by the drift, a `_counters_`
// line added) some cross the boundary upwards and some downwards.
TEST(XSpaceAlignPathsTest, LengthsAroundEveryVarintWidthBoundaryCrossItBothWays) {
  XSpaceGenOptions gen;
  gen.session_start_ns = kSessionStart;
  gen.max_bytes = 2048;
  const MapsForSpan maps(gen.span_ns);
  AlignPathsTally tally;
  uint64_t seed = 1;
  gen.unknown_groups = false;  // groups make the rewrite decline: fewer crossings seen
  for (const size_t boundary : {size_t{128}, size_t{16'384}}) {
    for (int delta = -12; delta <= 12; ++delta) {
      for (int k = 0; k < 10; ++k, ++seed) {
        XSpaceGenOptions sized = gen;
        sized.line_bytes = boundary + delta;
        sized.plane_bytes = std::max<size_t>(boundary + delta + (k % 2 ? 0 : 200), 96);
        GeneratorRandom random(seed);
        const GeneratedXSpace host = GenerateXSpace(random, sized);
        std::string failure;
        ASSERT_TRUE(CheckAlignPaths(host.bytes, maps.For(seed), OptionsFor(seed), &tally, &failure))
            << "boundary " << boundary << " delta " << delta << " seed " << seed << ": " << failure;
      }
    }
  }
  // 2 MiB: fewer, they are large. A line shrinks when its timestamp does
  // (an absolute one re-based) more than its events' offsets grow: with a
  // drift that shortens them (maps 5 and 15: -100 and -3 ppm) more often.
  // Six hosts of the sweep delta -4..4 x maps {5, 15, 0}, with that sweep's
  // seeds: those that cross in each direction at both levels, and two more
  // (left out where the case budget is cut: under qemu each is 10 s). The
  // whole sweep (27 hosts) was 22 of this test's 23 s, minutes under qemu.
  struct LargeHost {
    int delta;
    uint64_t variant;
  };
  std::vector<LargeHost> large_hosts = {{-3, 5}, {1, 5}, {3, 5}, {4, 0}};
  if (CasesFromEnvironment(3000) >= 3000) large_hosts.insert(large_hosts.end(), {{-1, 15}, {3, 15}});
  const uint64_t sweep_start = seed;
  const uint64_t sweep_variants[] = {5, 15, 0};
  for (const LargeHost large : large_hosts) {
    const auto variant_index = static_cast<uint64_t>(
        std::find(std::begin(sweep_variants), std::end(sweep_variants), large.variant) - std::begin(sweep_variants));
    const uint64_t host_seed = sweep_start + static_cast<uint64_t>(large.delta + 4) * 3 + variant_index;
    XSpaceGenOptions sized = gen;
    sized.line_bytes = (size_t{1} << 21) + large.delta;
    sized.plane_bytes = (size_t{1} << 21) + large.delta + (large.delta % 2 ? 0 : 64);
    GeneratorRandom random(host_seed);
    const GeneratedXSpace host = GenerateXSpace(random, sized);
    std::string failure;
    ASSERT_TRUE(CheckAlignPaths(host.bytes, maps.For(large.variant), OptionsFor(host_seed + 1), &tally, &failure))
        << "delta " << large.delta << " map " << large.variant << ": " << failure;
  }
  std::cout << "sized hosts: " << tally.Summary() << "\n";
  for (size_t level = 0; level < 2; ++level) {
    for (size_t b = 0; b < 3; ++b) {
      const size_t edge = size_t{1} << (7 * (b + 1));
      EXPECT_GT(tally.width_crossings[level][b][0], 0) << (level ? "planes" : "lines") << " never grew past " << edge;
      EXPECT_GT(tally.width_crossings[level][b][1], 0) << (level ? "planes" : "lines") << " never shrank below " << edge;
    }
  }
}

}  // namespace
}  // namespace chronolink::trace::testing
