// One recorded host clock domain -> REALTIME for the importers: the samples
// of a host-clocks file (host_clock_domains.h) held in ClockOffsetTracks
// (clock/kernel_clock_mapping.h: interpolation between the samples
// around an instant with a bound from their errors and the rate-change
// limit, a step between two samples making the instants between them
// unconvertible). A recording holds thousands of samples and a track
// searches its samples linearly, so they are kept in chunks of kChunk
// consecutive samples, each chunk also holding the last few samples of the
// one before (so the pair straddling a boundary is in one chunk, and step
// detection has a rate to extrapolate with); a conversion binary-searches
// the chunk.
//
// Samples must come in increasing domain time (the loader refuses others).
// A gap of more than kMaxGapNs between two samples (a recorder stopped for
// a quarter of an hour) starts a fresh chunk with nothing carried: instants
// in the gap are only extrapolated from before it, as far as
// ClockOffsetTrackOptions::max_extrapolation_ns allows (capped at
// kMaxGapNs). No extrapolation before the first sample.
//
// Arithmetic: with the loader's limits on a sample (|offset| <= 2^61 ns,
// ref <= 2^58 ns, error <= 1 ms, samples >= 100 us apart), the gap cap and
// the rate limits capped at 1000 ppm, a segment's slope grows by at most
// 20 per sample over at most kChunk + kOverlap samples, so every
// extrapolated offset and bound stays below 2^52 ns of change: the track's
// int64 sums cannot overflow whatever the file says.
//
// Not thread-safe to fill; const methods may be called concurrently.
#pragma once

#include <cstdint>
#include <vector>

#include "clock/kernel_clock_mapping.h"
#include "collector/export/device_planes.h"
#include "collector/importers/host_clock_domains.h"

namespace chronolink::collector {

class HostDomainTrack : public HostDomainConversion {
 public:
  static constexpr size_t kChunk = 64;                    // new samples per chunk
  static constexpr size_t kOverlap = 8;                   // samples carried from the chunk before
  static constexpr int64_t kMaxGapNs = int64_t{1} << 40;  // about 18 minutes
  static constexpr int64_t kMaxRatePpb = 1'000'000;       // cap on the options' rate limits

  HostDomainTrack(HostClockDomain domain, const ClockOffsetTrackOptions& options);

  // Appends a sample (ref_ns after the newest one's). Returns true when it
  // starts a new segment (a step of REALTIME against the domain).
  bool Add(const HostClockSample& sample);

  std::string_view domain_name() const override { return HostClockDomainName(domain_); }
  ConvertedStamp ToRealtime(int64_t domain_ns) const override;
  std::vector<DeviceClockKnot> Samples() const override;

  HostClockDomain domain() const { return domain_; }
  size_t size() const { return samples_.size(); }
  uint64_t steps() const { return steps_; }
  int64_t first_ref_ns() const { return samples_.empty() ? 0 : samples_.front().ref_ns; }
  int64_t last_ref_ns() const { return samples_.empty() ? 0 : samples_.back().ref_ns; }

 private:
  // carry: whether the newest samples of the current segment go along.
  void StartChunk(bool carry);

  HostClockDomain domain_;
  ClockOffsetTrackOptions options_;
  std::vector<ClockOffsetTrack> chunks_;
  std::vector<int64_t> chunk_first_ref_;    // domain ns of each chunk's first sample
  std::vector<size_t> chunk_new_;           // samples added to each chunk beyond its carried ones
  std::vector<ClockOffsetSample> samples_;  // every sample, segment = global segment number
  uint64_t steps_ = 0;
};

// REALTIME stamps need no recording: the identity, bound 0.
class RealtimeIdentity : public HostDomainConversion {
 public:
  std::string_view domain_name() const override { return "realtime"; }
  ConvertedStamp ToRealtime(int64_t ns) const override { return {ns, 0, true}; }
  std::vector<DeviceClockKnot> Samples() const override { return {}; }
};

}  // namespace chronolink::collector
