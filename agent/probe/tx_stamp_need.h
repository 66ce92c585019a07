// Whether the socket's own TX stamps of our probes are worth their cost: a
// system call each to read back from the error queue. Not while the eBPF
// tap stamps every probe we send at a point ranked above TX_SOFTWARE (the
// driver's net_dev_start_xmit): the socket's stamps would never be used.
// Decided per peer in blocks of sends: a block in which the tap stamped
// (nearly) every probe turns socket stamps off for the next one; a block in
// which it missed turns them back on, so a tap that stops (or a device
// without the driver hook) costs at most one block of worse stamps.
#pragma once

#include <cstdint>

#include "agent/clock/timestamp.h"

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
  // A stamp of one of our sent probes, from a source other than the socket.
  void OnOtherStamp(StampSource source);

  uint64_t sent_without() const { return sent_without_; }

 private:
  bool always_;
  bool wanted_ = true;
  int sent_ = 0;     // in this block
  int covered_ = 0;  // ... stamped by a source ranked above the socket's
  uint64_t sent_without_ = 0;
};

}  // namespace chronolink
