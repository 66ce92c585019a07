// libFuzzer target for the host-clocks loader (collector/importers/
// host_clocks_loader.h) and the conversions it builds: each input is one
// recording. Invariants: no crash, hang or sanitizer report; a refusal says
// why; every track answers for instants at, between and beyond its samples
// with a non-negative bound when it answers at all.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "collector/importers/host_clocks_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chronolink::collector;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  HostClocksLoadOptions options;
  options.max_line_bytes = 2048;
  HostClocksFile file;
  std::string error;
  if (!ParseHostClocks(text, options, &file, &error)) {
    if (error.empty()) __builtin_trap();
    return 0;
  }
  if (file.samples == 0) __builtin_trap();  // accepted files hold samples
  for (HostClockDomain d : kRecordedDomains) {
    const HostDomainTrack* t = file.track(d);
    if (t == nullptr) continue;
    const int64_t lo = t->first_ref_ns(), hi = t->last_ref_ns();
    for (int64_t delta : {INT64_C(0), INT64_C(1), INT64_C(999'999'999), -(hi - lo) / 2, -(hi - lo) / 3,
                          hi - lo, INT64_C(-1) - (hi - lo)}) {
      int64_t x = 0;
      if (__builtin_add_overflow(hi, delta, &x)) continue;
      const auto c = t->ToRealtime(x);
      if (c.ok && c.error_ns < 0) __builtin_trap();
    }
    (void)t->Samples();
  }
  return 0;
}
