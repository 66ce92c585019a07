// libFuzzer target for the offsets.jsonl reader and the correction built
// from it (trace/correct/): each input is one offsets file. Invariants: no
// crash, hang or sanitizer report; a refusal is one message; an accepted
// file builds a correction or is refused with a message, and every node's
// map answers for a few instants without crashing.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "trace/correct/clock_correction.h"
#include "trace/correct/offsets_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chronolink::trace;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (bool skip : {false, true}) {
    OffsetsReader reader(OffsetsReadOptions{skip});
    OffsetsInput input;
    std::string error;
    if (!reader.AddText(text, "fuzz.jsonl", &error) || !reader.Finish(&input, &error)) {
      if (error.empty()) __builtin_trap();  // a refusal must say why
      continue;
    }
    ClusterCorrection correction;
    if (!ClusterCorrection::FromOffsets(input, &correction, &error)) {
      if (error.empty()) __builtin_trap();
      continue;
    }
    for (uint32_t node : correction.Nodes()) {
      const NodeCorrection* n = correction.Node(node);
      if (n == nullptr || !n->reachable()) continue;
      for (int64_t delta : {INT64_C(0), INT64_C(-1'000'000'000), INT64_C(3'600'000'000'000)}) {
        TraceInstant t = n->first_node_time();
        if (!__builtin_add_overflow(t.ns, delta, &t.ns)) (void)n->ToCluster(t);
      }
    }
  }
  return 0;
}
