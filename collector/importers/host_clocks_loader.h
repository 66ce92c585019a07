// Reads a host-clocks file (host_clock_domains.h) back into one
// HostDomainTrack per recorded domain. The file is untrusted input: it is
// read line by line with bounded memory, every line that is not a valid
// sample (not JSON, a missing or non-integer field, a negative error, an
// unknown domain, a time not after the domain's previous sample, numbers
// whose sum would overflow) is counted with its line number and skipped,
// and a file that is mostly such lines, has no header, or has no sample at
// all fails with one message. A recording from another boot than the one
// asked for (boot id) is refused: its BOOTTIME and MONOTONIC clocks restarted
// at the reboot, so its samples say nothing about this boot's stamps.
//
// Stateless functions; the result is independent of the input's lifetime.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "collector/importers/host_clock_domains.h"
#include "collector/importers/host_domain_track.h"

namespace chronolink::collector {

struct HostClocksLoadOptions {
  // Refuse a file whose header names another boot; empty: not checked.
  std::string expected_boot_id;
  size_t max_line_bytes = 4096;
  // Fail when more than this share of the non-empty lines is bad (and at
  // least min_bad_to_fail lines are).
  double max_bad_fraction = 0.5;
  uint64_t min_bad_to_fail = 4;
  // Conversion limits (history is set by the track itself).
  ClockOffsetTrackOptions track;
};

struct HostClocksFile {
  HostClocksHeader header;
  uint64_t lines = 0;                      // non-empty lines read, header included
  uint64_t samples = 0;                    // sample lines accepted
  uint64_t bad_lines = 0;                  // skipped
  std::vector<uint64_t> bad_line_numbers;  // the first few
  std::string first_bad_reason;            // "line 7: error_ns is negative"
  // One per recorded domain (index: HostClockDomain), null when the file had none.
  std::array<std::unique_ptr<HostDomainTrack>, 3> tracks;

  const HostDomainTrack* track(HostClockDomain d) const;
};

inline constexpr size_t kMaxBadLineNumbers = 10;

bool LoadHostClocksFile(const std::filesystem::path& path, const HostClocksLoadOptions& options,
                        HostClocksFile* out, std::string* error);
// The same from bytes in memory (tests, fuzzing).
bool ParseHostClocks(std::string_view bytes, const HostClocksLoadOptions& options, HostClocksFile* out,
                     std::string* error);

}  // namespace chronolink::collector
