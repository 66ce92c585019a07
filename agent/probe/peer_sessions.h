// Which session (sender_epoch, new per agent start) of each peer is
// current, and which it has left behind. An authentic packet of an earlier
// session is a replay (or a straggler from before the restart): letting it
// through would switch our view of the peer back to the old session, reset
// the responder and break every pair in progress (docs/protocol.md
// "Matching and sessions").
//
// Epochs are ordered: the high bits are the start time (ms of
// CLOCK_REALTIME), the low bits random (NewSessionEpoch). So "not seen
// before" is not enough to be a restart -- a recorded packet of a session we
// never saw would retire the live one -- a restart must be newer. An older
// epoch is taken only when the current session has been silent for
// kSilenceBeforeOlderNs (a peer whose clock went back across a restart),
// and then without retiring the silent one, which takes over again if it
// speaks. The retired history is bounded per peer. Single-threaded: owned
// by the probe engine.
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

  static constexpr int64_t kSilenceBeforeOlderNs = 10'000'000'000;

  enum class Admission : uint8_t {
    kCurrent,  // the session we know
    kFirst,    // the first session seen from this peer
    kRestart,  // a newer session: the previous one is retired now
    kOlder,    // an older one, after the current one fell silent: taken, nothing retired
    kRetired,  // an earlier session of the peer: drop the packet
  };

  // now_ns: any monotonic clock (the node clock), for the silence.
  Admission Admit(uint32_t peer, uint64_t epoch, int64_t now_ns);
  // Keeps the history of these peers only (membership changed).
  void KeepOnly(const std::set<uint32_t>& peers);

 private:
  struct History {
    uint64_t current = 0;
    bool known = false;
    int64_t current_seen_ns = 0;  // last packet of the current session
    std::deque<uint64_t> retired;  // oldest first
  };
  std::map<uint32_t, History> peers_;
};

// A session epoch for an agent starting now: ms of CLOCK_REALTIME in the
// high 42 bits (good until 2109), 22 random bits below. Never 0.
uint64_t NewSessionEpoch();

}  // namespace chronolink
