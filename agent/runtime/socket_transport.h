// ProbeTransport over the agent's TimestampingSocket: resolves peer ids to
// endpoints and ingests the userspace send instant into the node clock.
#pragma once

#include <cstdint>
#include <map>

#include "agent/capture/timestamping_socket.h"
#include "agent/probe/probe_transport.h"
#include "clock/fit_clock.h"

namespace chronolink {

class SocketTransport : public ProbeTransport {
 public:
  SocketTransport(TimestampingSocket& socket, const FitClock& clock)
      : socket_(socket), clock_(clock) {}

  // True when the peer is new or its endpoint changed.
  bool AddPeer(uint32_t id, const UdpEndpoint& ep);
  // Whether a datagram from `from` came from the peer's listed endpoint.
  bool IsEndpointOf(uint32_t peer, const UdpEndpoint& from) const;

  SendOutcome Send(uint32_t peer, std::span<const uint8_t> datagram, bool tx_stamps) override;
  void SendBurst(uint32_t peer, std::span<const BurstDatagram> datagrams, std::span<SendOutcome> out) override;

 private:
  SendOutcome Outcome(const SendResult& r) const;

  TimestampingSocket& socket_;
  const FitClock& clock_;
  std::map<uint32_t, UdpEndpoint> peers_;
};

// Reads what the socket holds (TX stamps, then datagrams) into the engine,
// with every stamp ingested into the node clock. The flags say which queues
// poll reported ready, so an idle queue costs no system call. The
// transport says whether a datagram came from its sender's listed endpoint
// (without one, every address counts as listed).
class ProbeEngine;
class HardwareStamps;
void PumpSocket(TimestampingSocket& socket, const FitClock& clock, ProbeEngine& engine,
                bool datagrams_ready = true, bool tx_stamps_ready = true,
                HardwareStamps* hardware = nullptr, const SocketTransport* transport = nullptr);

}  // namespace chronolink
