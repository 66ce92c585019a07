// Probe wire format v1: the decoded form of one probe packet. The byte layout
// (fixed size, network byte order, keyed MAC) is in probe_codec.h and
// docs/protocol.md.
#pragma once

#include <cstdint>

#include "clock/fit_clock_remap.h"
#include "clock/packet_stamp.h"

namespace chronolink {

enum class MessageType : uint8_t {
  kForward = 1,   // prober -> responder, one of a coded pair (Pt)
  kReverse = 2,   // responder -> prober, one of a coded pair (Pr), echoes the Pt rx stamps
  kFollowUp = 3,  // responder -> prober, late TX stamps of the last reverse pair
  // (4 is the pilot, a 16-byte datagram of its own: probe_codec.h)
  kClockRemap = 5,  // either way: the sender's fit clock took a new rate (remap)
};

// Flag bits.
// echo_rx[] carries rx stamps: in a reverse probe, of forward pair `seq`; in
// a forward probe, of the reverse pair that answered pair `prev_tx_seq`.
constexpr uint16_t kFlagHasEchoRx = 1u << 0;
constexpr uint16_t kFlagHasPrevTx = 1u << 1;   // prev_tx[] carries tx stamps of pair `prev_tx_seq`
constexpr uint16_t kFlagFinal = 1u << 2;       // sender is shutting down this session
constexpr uint16_t kFlagClockStepped = 1u << 3;  // the sender's clock stepped within the last second
// Every flag a datagram may carry; the decoder refuses any other bit.
constexpr uint16_t kKnownFlags = kFlagHasEchoRx | kFlagHasPrevTx | kFlagFinal | kFlagClockStepped;

// A stamp as carried on the wire: the sender's best kernel stamp (with its
// source) and its userspace stamp of the same packet, both on the sender's
// node clock. Either may be absent (source kNone).
using EchoedStamp = DualStamp;

struct ProbeMessage {
  MessageType type = MessageType::kForward;
  uint16_t flags = 0;
  uint32_t cluster_id = 0;
  uint32_t sender_node = 0;
  uint32_t receiver_node = 0;
  uint64_t sender_epoch = 0;   // random per agent start: a restart is a new session
  uint64_t echo_epoch = 0;     // reverse/follow-up: the prober epoch this answers
  uint64_t seq = 0;            // forward pair sequence (reverse pairs reuse it)
  uint8_t index = 0;           // 0 or 1 within the coded pair
  EchoedStamp echo_rx[2];      // reverse: responder's rx stamps of forward pair `seq`
  uint64_t prev_tx_seq = 0;    // which earlier pair prev_tx[] belongs to
  EchoedStamp prev_tx[2];      // sender's tx stamps of its previous pair on this edge
  // ClockRemap only (seq numbers the sender's remaps, 1 up): where the
  // sender's F changed rate, and the rates; every stamp field is zero.
  FitClockRemap remap;
};

}  // namespace chronolink
