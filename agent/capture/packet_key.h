// Identity of one probe packet, the join key of every capture point's stamp
// of it (socket, eBPF hooks, userspace): who sent it to whom, in which
// session, which pair and which probe of the pair.
#pragma once

#include <cstdint>
#include <tuple>

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

// The key from the raw payload head a BPF hook copied; false if the head is
// not a v1 probe of a known type. (The hook already checked magic and
// cluster; the MAC is checked when the datagram itself is decoded.)
bool ParseTapKey(const chronolink_tap_record& r, PacketKey* key);

// Which stamp source a hook's records are.
StampSource TapHookSource(uint32_t hook);

}  // namespace chronolink
