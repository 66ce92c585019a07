#include "agent/capture/packet_key.h"

namespace chronolink {

namespace {

uint64_t BigEndian(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

bool ParseTapKey(const chronolink_tap_record& r, PacketKey* key) {
  const uint8_t* h = r.head;
  if (h[CHRONOLINK_WIRE_VERSION_OFF] != 1) return false;
  const uint8_t type = h[CHRONOLINK_WIRE_TYPE_OFF];
  if (type < 1 || type > 3) return false;
  const uint8_t index = h[CHRONOLINK_WIRE_INDEX_OFF];
  if (index > 1) return false;
  key->type = static_cast<MessageType>(type);
  key->sender = static_cast<uint32_t>(BigEndian(h + CHRONOLINK_WIRE_SENDER_OFF, 4));
  key->receiver = static_cast<uint32_t>(BigEndian(h + CHRONOLINK_WIRE_RECEIVER_OFF, 4));
  key->sender_epoch = BigEndian(h + CHRONOLINK_WIRE_EPOCH_OFF, 8);
  key->seq = BigEndian(h + CHRONOLINK_WIRE_SEQ_OFF, 8);
  key->index = index;
  return true;
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

}  // namespace chronolink
