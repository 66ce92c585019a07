// Structure-aware libFuzzer target for the XSpace writers: the fuzzer's
// bytes drive the generator of valid XSpace (tests/support/
// xspace_generator.h), so every input is a valid host of some shape the
// schema allows, and the host goes through every align path
// (tests/support/align_paths_check.h): the model, hold-all, and the wire
// rewrite on an exact and on a guessed plan. Invariants: every output parses
// with protobuf and reads back; the rewrite's output, where it does not
// decline, is the model's; a decline has a reason and is never the
// rewrite's own output check failing. The first byte picks the clock map
// (offset and drift sign, gaps) and whether a `_counters_` line is added.
//
// Where xspace_reader_fuzz feeds arbitrary bytes (mostly refused at the
// parse), this one spends every execution past it.
#include <google/protobuf/stubs/logging.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <vector>

#include "tests/support/align_paths_check.h"
#include "tests/support/xspace_generator.h"

namespace {

using namespace chronolink::trace;

constexpr int64_t kSessionStart = 1'795'320'926'000'000'000;
constexpr int64_t kMarginNs = 30'000'000'000;

const std::vector<testing::TestClockMap>& Maps() {
  static const auto* maps = [] {
    auto* m = new std::vector<testing::TestClockMap>;
    const testing::XSpaceGenOptions defaults;
    for (uint64_t v = 0; v < 75; ++v) {
      m->push_back(testing::MakeTestClockMap(kSessionStart - kMarginNs, kSessionStart + defaults.span_ns + kMarginNs, v));
    }
    return m;
  }();
  return *maps;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);  // the reasons are the paths'; protobuf's lines are noise here
  Maps();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const uint8_t pick = size > 0 ? data[0] : 0;
  testing::GeneratorRandom random(size > 0 ? data + 1 : data, size > 0 ? size - 1 : 0);
  testing::XSpaceGenOptions gen;
  gen.session_start_ns = kSessionStart;
  gen.max_bytes = 16 << 10;
  const testing::GeneratedXSpace host = testing::GenerateXSpace(random, gen);
  AlignOptions options;
  options.counters_line = (pick & 0x80) == 0;
  options.max_extrapolation_ns = std::numeric_limits<int64_t>::max();
  options.max_bound_ns = INFINITY;
  testing::AlignPathsTally tally;
  std::string failure;
  if (!testing::CheckAlignPaths(host.bytes, *Maps()[(pick & 0x7f) % Maps().size()].map, options, &tally, &failure)) {
    std::fprintf(stderr, "invariant violated: %s\n", failure.c_str());
    std::abort();
  }
  return 0;
}
