// What the probe engine needs from the network: send a datagram to a peer
// and learn the datagram's timestamping id and userspace send instant. The
// agent's implementation wraps TimestampingSocket; tests may use real
// loopback sockets or a recording double.
#pragma once

#include <cstdint>
#include <span>

namespace chronolink {

struct SendOutcome {
  bool ok = false;
  int error = 0;             // errno when !ok
  bool stamped = false;      // TX stamps will come back, with op_id
  uint32_t op_id = 0;        // matches the TX stamps that come back later
  int64_t user_tx_ns = 0;    // node clock, read just before the send
};

class ProbeTransport {
 public:
  virtual ~ProbeTransport() = default;
  // tx_stamps: whether the engine needs the socket's own TX stamps of this
  // datagram (it does not when another source, the eBPF tap, supplies
  // better ones, nor for pilots and follow-ups, whose TX times nobody uses).
  virtual SendOutcome Send(uint32_t peer, std::span<const uint8_t> datagram, bool tx_stamps) = 0;

  // Datagrams to one peer back to back, in one system call where the
  // transport can (a pair and its pilot: one wake-up instead of three).
  // The userspace instant may be shared, read before the first. This
  // default sends them one by one.
  struct BurstDatagram {
    std::span<const uint8_t> bytes;
    bool tx_stamps = false;
  };
  virtual void SendBurst(uint32_t peer, std::span<const BurstDatagram> datagrams, std::span<SendOutcome> out) {
    for (size_t i = 0; i < datagrams.size() && i < out.size(); ++i) {
      out[i] = Send(peer, datagrams[i].bytes, datagrams[i].tx_stamps);
    }
  }
};

}  // namespace chronolink
