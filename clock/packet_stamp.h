// The instant of one packet as a node knows it: int64 ns with where it was
// taken (its source) and on whose clock (its domain). The probe wire format
// carries these, and the Pt/Pr tuples are built of them; neither owns them.
#pragma once

#include <cstdint>

#include "clock/timestamp.h"

namespace chronolink {

// A packet instant: int64 ns, where it was taken (source) and on whose clock
// (domain): kNodeRealtime for this node's own stamps, kPeerRealtime for the
// stamps a peer put on the wire. Each tuple field has one required domain,
// which the assembler enforces.
struct ProbeStamp {
  int64_t ns = 0;
  StampSource source = StampSource::kNone;
  ClockDomain domain = ClockDomain::kNodeRealtime;
  bool present() const { return source != StampSource::kNone; }
};

// One packet instant as both ends may know it: the best kernel stamp (with
// its source) and the userspace stamp. Either may be absent.
struct DualStamp {
  ProbeStamp kernel;
  ProbeStamp user;

  bool InDomain(ClockDomain d) const {
    return (!kernel.present() || kernel.domain == d) && (!user.present() || user.domain == d);
  }
  // Keeps the better kernel source (for a packet that went that way) and
  // the first userspace stamp.
  void Merge(const DualStamp& other, StampDirection d) {
    if (SourceRank(other.kernel.source, d) > SourceRank(kernel.source, d)) kernel = other.kernel;
    if (!user.present() && other.user.present()) user = other.user;
  }
  const ProbeStamp& Of(SourceClass c) const { return c == SourceClass::kUserspace ? user : kernel; }
};

}  // namespace chronolink
