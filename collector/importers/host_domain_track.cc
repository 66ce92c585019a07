// A recorded host clock domain -> REALTIME (host_domain_track.h).
#include "collector/importers/host_domain_track.h"

#include <algorithm>

namespace chronolink::collector {

HostDomainTrack::HostDomainTrack(HostClockDomain domain, const ClockOffsetTrackOptions& options)
    : domain_(domain), options_(options) {
  // A chunk must keep all it is given: its carried samples and kChunk new ones.
  options_.history = kChunk + kOverlap;
  // The limits the arithmetic bound in the header relies on.
  options_.max_extrapolation_ns = std::clamp<int64_t>(options_.max_extrapolation_ns, 0, kMaxGapNs);
  options_.max_slew_ppb = std::clamp<int64_t>(options_.max_slew_ppb, 0, kMaxRatePpb);
  options_.max_rate_change_ppb = std::clamp<int64_t>(options_.max_rate_change_ppb, 0, kMaxRatePpb);
}

void HostDomainTrack::StartChunk(bool carry_samples) {
  ClockOffsetTrack track(options_);
  // Carry the newest samples of the current segment: the pair across the
  // boundary then lies in the new chunk, and its step detection starts
  // with a rate instead of the loose single-sample bound.
  size_t carry = 0;
  while (carry_samples && carry < kOverlap && carry < samples_.size() &&
         samples_[samples_.size() - 1 - carry].segment == samples_.back().segment) {
    ++carry;
  }
  for (size_t i = samples_.size() - carry; i < samples_.size(); ++i) track.Add(samples_[i]);
  chunks_.push_back(std::move(track));
  chunk_first_ref_.push_back(carry > 0 ? samples_[samples_.size() - carry].ref_ns : 0);
  chunk_new_.push_back(0);
}

bool HostDomainTrack::Add(const HostClockSample& sample) {
  if (!samples_.empty() && sample.ref_ns - samples_.back().ref_ns > kMaxGapNs) {
    StartChunk(/*carry=*/false);  // nothing interpolates across the gap
  } else if (chunks_.empty() || chunk_new_.back() == kChunk) {
    StartChunk(/*carry=*/true);
  }
  ClockOffsetSample s;
  s.ref_ns = sample.ref_ns;
  s.offset_ns = sample.offset_ns;
  s.error_ns = sample.error_ns;
  s.bracket_ns = sample.bracket_ns;
  const bool step = chunks_.back().Add(s);
  if (chunk_new_.back() == 0 && chunks_.back().samples().size() == 1) chunk_first_ref_.back() = s.ref_ns;
  ++chunk_new_.back();
  if (step) ++steps_;
  s.segment = steps_;
  samples_.push_back(s);
  return step;
}

ConvertedStamp HostDomainTrack::ToRealtime(int64_t domain_ns) const {
  if (chunks_.empty() || domain_ns < chunk_first_ref_.front()) return {};  // before the recording
  // The newest chunk that starts at or before the instant.
  const auto it = std::upper_bound(chunk_first_ref_.begin(), chunk_first_ref_.end(), domain_ns);
  const size_t i = static_cast<size_t>(it - chunk_first_ref_.begin()) - 1;
  return chunks_[i].Convert(domain_ns);
}

std::vector<DeviceClockKnot> HostDomainTrack::Samples() const {
  std::vector<DeviceClockKnot> out;
  out.reserve(samples_.size());
  for (const ClockOffsetSample& s : samples_) {
    out.push_back({s.ref_ns, s.ref_ns + s.offset_ns, s.error_ns, static_cast<uint32_t>(s.segment)});
  }
  return out;
}

}  // namespace chronolink::collector
