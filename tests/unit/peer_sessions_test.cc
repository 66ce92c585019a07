// Which session of a peer is current (agent/probe/peer_sessions.h): newer
// epochs are restarts, recorded packets of older ones are replays, even of
// a session this node never saw; an older one is taken only after the
// current one fell silent (a peer whose clock went back).
#include "agent/probe/peer_sessions.h"

#include <gtest/gtest.h>

#include <thread>

namespace chronolink {
namespace {

using Admission = PeerSessions::Admission;
constexpr int64_t kMs = 1'000'000;

TEST(PeerSessions, ANewerSessionIsARestartAndTheOldOneIsRetired) {
  PeerSessions s;
  EXPECT_EQ(s.Admit(2, 1000, 0), Admission::kFirst);
  EXPECT_EQ(s.Admit(2, 1000, kMs), Admission::kCurrent);
  EXPECT_EQ(s.Admit(2, 2000, 2 * kMs), Admission::kRestart);
  EXPECT_EQ(s.Admit(2, 1000, 3 * kMs), Admission::kRetired);
  EXPECT_EQ(s.Admit(2, 2000, 4 * kMs), Admission::kCurrent);
  EXPECT_EQ(s.Admit(3, 5, 4 * kMs), Admission::kFirst);  // per peer
}

// The review's case: this node restarted (no history), sees the peer's
// live session, and an attacker replays one recorded packet of the peer's
// previous session, which this node never saw. It must not retire the live
// session (one packet would cut the peer off until it restarts).
TEST(PeerSessions, AnOlderSessionNeverSeenDoesNotReplaceALiveOne) {
  PeerSessions s;
  EXPECT_EQ(s.Admit(2, 2000, 0), Admission::kFirst);
  EXPECT_EQ(s.Admit(2, 1000, kMs), Admission::kRetired);
  EXPECT_EQ(s.Admit(2, 2000, 2 * kMs), Admission::kCurrent);
  // Within the silence bound of its last packet the live one holds.
  EXPECT_EQ(s.Admit(2, 1000, 2 * kMs + PeerSessions::kSilenceBeforeOlderNs - kMs), Admission::kRetired);
}

// A peer whose clock went back across its restart starts an older epoch;
// once the current session has been silent long enough it is taken, and
// the silent one is not retired: if it speaks again it takes over.
TEST(PeerSessions, AnOlderSessionIsTakenOnlyAfterTheCurrentOneFellSilent) {
  PeerSessions s;
  const int64_t silence = PeerSessions::kSilenceBeforeOlderNs;
  EXPECT_EQ(s.Admit(2, 2000, 0), Admission::kFirst);
  EXPECT_EQ(s.Admit(2, 1000, silence - kMs), Admission::kRetired);
  EXPECT_EQ(s.Admit(2, 1000, silence + kMs), Admission::kOlder);
  EXPECT_EQ(s.Admit(2, 1000, silence + 2 * kMs), Admission::kCurrent);
  EXPECT_EQ(s.Admit(2, 2000, silence + 3 * kMs), Admission::kRestart);
  EXPECT_EQ(s.Admit(2, 1000, silence + 4 * kMs), Admission::kRetired);
}

TEST(PeerSessions, NewEpochsGrowWithTheStartTime) {
  const uint64_t first = NewSessionEpoch();
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  const uint64_t second = NewSessionEpoch();
  EXPECT_NE(first, 0u);
  EXPECT_GT(second, first);
  EXPECT_GE((second >> 22) - (first >> 22), 3u);  // the millisecond part
}

}  // namespace
}  // namespace chronolink
