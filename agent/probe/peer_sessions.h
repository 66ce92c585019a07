// Which session (sender_epoch, random per agent start) of each peer is
// current, and which it has left behind. An authentic packet of a retired
// session is a replay (or a straggler from before the restart): letting it
// through would switch our view of the peer back to the old session, reset
// the responder and break every pair in progress, as often as someone
// replays it (docs/protocol.md "Matching and sessions"). The history is
// bounded per peer; a session older than that many restarts is not
// recognised. Single-threaded: owned by the probe engine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <set>

namespace chronolink {

class PeerSessions {
 public:
  static constexpr size_t kRetiredPerPeer = 32;

  enum class Admission : uint8_t {
    kCurrent,  // the session we know
    kFirst,    // the first session seen from this peer
    kRestart,  // a new session: the previous one is retired now
    kRetired,  // an earlier session of the peer: drop the packet
  };

  Admission Admit(uint32_t peer, uint64_t epoch);
  // Keeps the history of these peers only (membership changed).
  void KeepOnly(const std::set<uint32_t>& peers);

 private:
  struct History {
    uint64_t current = 0;
    bool known = false;
    std::deque<uint64_t> retired;  // oldest first
  };
  std::map<uint32_t, History> peers_;
};

}  // namespace chronolink
