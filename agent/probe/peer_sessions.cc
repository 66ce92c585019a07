#include "agent/probe/peer_sessions.h"

#include <algorithm>

namespace chronolink {

PeerSessions::Admission PeerSessions::Admit(uint32_t peer, uint64_t epoch) {
  History& h = peers_[peer];
  if (h.known && h.current == epoch) return Admission::kCurrent;
  if (std::find(h.retired.begin(), h.retired.end(), epoch) != h.retired.end()) {
    return Admission::kRetired;
  }
  const bool first = !h.known;
  if (!first) {
    h.retired.push_back(h.current);
    if (h.retired.size() > kRetiredPerPeer) h.retired.pop_front();
  }
  h.current = epoch;
  h.known = true;
  return first ? Admission::kFirst : Admission::kRestart;
}

void PeerSessions::KeepOnly(const std::set<uint32_t>& peers) {
  std::erase_if(peers_, [&](const auto& kv) { return peers.count(kv.first) == 0; });
}

}  // namespace chronolink
