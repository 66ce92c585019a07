#include "agent/probe/peer_sessions.h"

#include <sodium.h>
#include <time.h>

#include <algorithm>

namespace chronolink {

PeerSessions::Admission PeerSessions::Admit(uint32_t peer, uint64_t epoch, int64_t now_ns) {
  History& h = peers_[peer];
  if (!h.known) {
    h = History{epoch, true, now_ns, {}};
    return Admission::kFirst;
  }
  if (h.current == epoch) {
    h.current_seen_ns = now_ns;
    return Admission::kCurrent;
  }
  if (std::find(h.retired.begin(), h.retired.end(), epoch) != h.retired.end()) return Admission::kRetired;
  if (epoch > h.current) {
    h.retired.push_back(h.current);
    if (h.retired.size() > kRetiredPerPeer) h.retired.pop_front();
    h.current = epoch;
    h.current_seen_ns = now_ns;
    return Admission::kRestart;
  }
  if (now_ns - h.current_seen_ns < kSilenceBeforeOlderNs) return Admission::kRetired;
  h.current = epoch;  // the silent newer one is not retired: it may speak again
  h.current_seen_ns = now_ns;
  return Admission::kOlder;
}

void PeerSessions::KeepOnly(const std::set<uint32_t>& peers) {
  std::erase_if(peers_, [&](const auto& kv) { return peers.count(kv.first) == 0; });
}

uint64_t NewSessionEpoch() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  const uint64_t ms = static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1'000'000;
  uint32_t random = 0;
  randombytes_buf(&random, sizeof(random));
  return ((ms & ((uint64_t{1} << 42) - 1)) << 22) | (random & ((1u << 22) - 1)) | (ms == 0 ? 1 : 0);
}

}  // namespace chronolink
