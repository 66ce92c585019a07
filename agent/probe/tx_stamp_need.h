// Whether the socket's own TX stamps of our probes are worth their cost: a
// system call each to read back from the error queue. Not when the eBPF tap
// stamps every probe we send at a point ranked above the best the socket
// gives (timestamp.h SourceRank): where the driver gives TX_SOFTWARE the
// socket's stamp is the best there is short of the NIC's, and it is always
// asked for; where it gives only TX_SCHED, the tap's tc and driver stamps
// rank above it and the socket's are never used.
// Decided per peer in blocks of sends: a block in which the tap stamped
// (nearly) every probe above the socket turns socket stamps off for the
// next one; a block in which it missed turns them back on, so a tap that
// stops costs at most one block of worse stamps.
#pragma once

#include <cstdint>

#include "clock/timestamp.h"

namespace chronolink {

class TxStampNeed {
 public:
  static constexpr int kBlock = 64;   // probes per decision
  static constexpr int kMissesAllowed = 2;  // late records of a block's last probes fall in the next

  // always: a socket source is forced, its stamps are always wanted.
  explicit TxStampNeed(bool always = false) : always_(always) {}

  bool Wanted() const { return always_ || wanted_; }
  // A forward or reverse probe went out.
  void OnProbeSent();
  // A TX stamp of one of our probes from the socket, or from another source.
  void OnSocketStamp(StampSource source);
  void OnOtherStamp(StampSource source);

  uint64_t sent_without() const { return sent_without_; }

 private:
  void EndBlock();

  bool always_;
  bool wanted_ = true;
  // What the socket is taken to give: TX_SOFTWARE until a block of
  // requested stamps brought only TX_SCHED.
  StampSource socket_best_ = StampSource::kSocketSoftware;
  int sent_ = 0;     // in this block
  int covered_ = 0;  // ... stamped by another source ranked above socket_best_
  bool block_socket_any_ = false;
  bool block_socket_software_ = false;
  uint64_t sent_without_ = 0;
};

}  // namespace chronolink
