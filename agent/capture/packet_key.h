// Identity of one probe packet, the join key of every capture point's stamp
// of it (socket, eBPF hooks, userspace): who sent it to whom, in which
// session, which pair and which probe of the pair. The key is public (it
// travels in clear and is predictable); a stamp is bound to one authentic
// packet by the key together with the packet's MAC (PacketMac).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <tuple>

#include "agent/wire/probe_codec.h"
#include "agent/wire/probe_message.h"
#include "bpf/probe_tap.h"

namespace chronolink {

struct PacketKey {
  MessageType type = MessageType::kForward;
  uint32_t sender = 0;
  uint32_t receiver = 0;
  uint64_t sender_epoch = 0;
  uint64_t seq = 0;
  uint8_t index = 0;

  friend bool operator<(const PacketKey& a, const PacketKey& b) {
    return std::tie(a.sender_epoch, a.seq, a.type, a.index, a.sender, a.receiver) <
           std::tie(b.sender_epoch, b.seq, b.type, b.index, b.sender, b.receiver);
  }
  friend bool operator==(const PacketKey&, const PacketKey&) = default;
};

inline PacketKey KeyOf(const ProbeMessage& m) {
  return PacketKey{m.type, m.sender_node, m.receiver_node, m.sender_epoch, m.seq, m.index};
}

// The 16 MAC bytes of a probe packet, raw: unpredictable without the
// cluster key, so a record carrying them was taken of a packet with exactly
// these bytes.
using PacketMac = std::array<uint8_t, kProbeMacSize>;
static_assert(CHRONOLINK_WIRE_MAC_BYTES == kProbeMacSize && CHRONOLINK_WIRE_SIZE == kProbeWireSize &&
              CHRONOLINK_WIRE_MAC_OFF == kProbeWireSize - kProbeMacSize);

// The MAC bytes of a datagram of kProbeWireSize bytes (zeros if shorter).
PacketMac MacOfDatagram(std::span<const uint8_t> datagram);

// One eBPF tap record, parsed: where it was taken, the packet's key and MAC,
// and its stamp (source from the hook; ns still to be filled in on the node
// clock by the caller).
struct TapStamp {
  uint32_t hook = 0;     // enum chronolink_tap_hook
  uint32_t ifindex = 0;  // device the packet passed
  PacketKey key;
  PacketMac mac{};
  ProbeStamp stamp;
};

// False if the head is not a v1 probe of a known type or the hook is
// unknown. (The hook already checked magic and cluster; the MAC is checked
// when the datagram itself is decoded, and the record is used only for a
// datagram with the same key and MAC.)
bool ParseTapRecord(const chronolink_tap_record& r, TapStamp* out);
// A record of a ClockRemap datagram (a v1 packet of ours or a peer's that
// no fit wants a stamp of): passed over, not counted as unparsable.
bool TapRecordIsClockRemap(const chronolink_tap_record& r);

// Which stamp source a hook's records are.
StampSource TapHookSource(uint32_t hook);
// True for the hooks a packet passes on its way out (tc egress,
// net_dev_start_xmit): their records can only be send stamps. The others
// (XDP, tc ingress) can only be receive stamps.
bool TapHookTransmits(uint32_t hook);

}  // namespace chronolink
