#include "agent/capture/packet_key.h"

#include <algorithm>

namespace chronolink {

namespace {

uint64_t BigEndian(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

PacketMac MacOfDatagram(std::span<const uint8_t> datagram) {
  PacketMac mac{};
  if (datagram.size() >= kProbeWireSize) {
    std::copy_n(datagram.begin() + CHRONOLINK_WIRE_MAC_OFF, mac.size(), mac.begin());
  }
  return mac;
}

bool ParseTapRecord(const chronolink_tap_record& r, TapStamp* out) {
  const StampSource source = TapHookSource(r.hook);
  if (source == StampSource::kNone) return false;
  const uint8_t* h = r.head;
  if (h[CHRONOLINK_WIRE_VERSION_OFF] != 1) return false;
  const uint8_t type = h[CHRONOLINK_WIRE_TYPE_OFF];
  if (type < 1 || type > 3) return false;
  const uint8_t index = h[CHRONOLINK_WIRE_INDEX_OFF];
  if (index > 1) return false;
  out->hook = r.hook;
  out->ifindex = r.ifindex;
  out->key.type = static_cast<MessageType>(type);
  out->key.sender = static_cast<uint32_t>(BigEndian(h + CHRONOLINK_WIRE_SENDER_OFF, 4));
  out->key.receiver = static_cast<uint32_t>(BigEndian(h + CHRONOLINK_WIRE_RECEIVER_OFF, 4));
  out->key.sender_epoch = BigEndian(h + CHRONOLINK_WIRE_EPOCH_OFF, 8);
  out->key.seq = BigEndian(h + CHRONOLINK_WIRE_SEQ_OFF, 8);
  out->key.index = index;
  std::copy_n(r.mac, out->mac.size(), out->mac.begin());
  out->stamp = ProbeStamp{0, source};
  return true;
}

bool TapRecordIsClockRemap(const chronolink_tap_record& r) {
  return r.head[CHRONOLINK_WIRE_VERSION_OFF] == 1 &&
         r.head[CHRONOLINK_WIRE_TYPE_OFF] == static_cast<uint8_t>(MessageType::kClockRemap);
}

StampSource TapHookSource(uint32_t hook) {
  switch (hook) {
    case CHRONOLINK_HOOK_TC_EGRESS:
    case CHRONOLINK_HOOK_TC_INGRESS: return StampSource::kBpfTc;
    case CHRONOLINK_HOOK_XDP:
    case CHRONOLINK_HOOK_DEV_XMIT: return StampSource::kBpfXdp;
    default: return StampSource::kNone;
  }
}

bool TapHookTransmits(uint32_t hook) {
  return hook == CHRONOLINK_HOOK_TC_EGRESS || hook == CHRONOLINK_HOOK_DEV_XMIT;
}

}  // namespace chronolink
