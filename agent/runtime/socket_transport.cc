#include "agent/runtime/socket_transport.h"

#include <algorithm>
#include <cerrno>
#include <array>
#include <cstring>

#include <netinet/in.h>

#include "agent/probe/probe_engine.h"
#include "agent/runtime/hardware_stamps.h"

namespace chronolink {

namespace {

// An IPv4 peer seen by a dual-stack (::) socket arrives as ::ffff:a.b.c.d.
UdpEndpoint Unmapped(const UdpEndpoint& e) {
  if (e.addr.ss_family != AF_INET6) return e;
  const auto& six = reinterpret_cast<const sockaddr_in6&>(e.addr);
  if (!IN6_IS_ADDR_V4MAPPED(&six.sin6_addr)) return e;
  UdpEndpoint four;
  auto& v4 = reinterpret_cast<sockaddr_in&>(four.addr);
  v4.sin_family = AF_INET;
  v4.sin_port = six.sin6_port;
  std::memcpy(&v4.sin_addr, &six.sin6_addr.s6_addr[12], 4);
  four.len = sizeof(sockaddr_in);
  return four;
}

bool SameEndpoint(const UdpEndpoint& listed, const UdpEndpoint& seen) {
  const UdpEndpoint a = Unmapped(listed), b = Unmapped(seen);
  if (a.addr.ss_family != b.addr.ss_family) return false;
  if (a.addr.ss_family == AF_INET) {
    const auto& x = reinterpret_cast<const sockaddr_in&>(a.addr);
    const auto& y = reinterpret_cast<const sockaddr_in&>(b.addr);
    return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
  }
  if (a.addr.ss_family == AF_INET6) {
    const auto& x = reinterpret_cast<const sockaddr_in6&>(a.addr);
    const auto& y = reinterpret_cast<const sockaddr_in6&>(b.addr);
    return x.sin6_port == y.sin6_port && std::memcmp(&x.sin6_addr, &y.sin6_addr, sizeof(x.sin6_addr)) == 0;
  }
  return false;
}

}  // namespace

bool SocketTransport::AddPeer(uint32_t id, const UdpEndpoint& ep) {
  auto [it, inserted] = peers_.try_emplace(id, ep);
  if (inserted) return true;
  const bool changed = !SameEndpoint(it->second, ep);
  it->second = ep;
  return changed;
}

bool SocketTransport::IsEndpointOf(uint32_t peer, const UdpEndpoint& from) const {
  auto it = peers_.find(peer);
  return it != peers_.end() && SameEndpoint(it->second, from);
}

SendOutcome SocketTransport::Outcome(const SendResult& r) const {
  SendOutcome out;
  out.ok = r.ok;
  out.error = r.error;
  out.stamped = r.stamped;
  out.op_id = r.op_id;
  out.user_tx_ns = clock_.Ingest(r.user_tx_real_ns);
  return out;
}

SendOutcome SocketTransport::Send(uint32_t peer, std::span<const uint8_t> datagram, bool tx_stamps) {
  auto it = peers_.find(peer);
  if (it == peers_.end()) {
    SendOutcome out;
    out.error = EHOSTUNREACH;
    return out;
  }
  return Outcome(socket_.Send(it->second, datagram, tx_stamps));
}

void SocketTransport::SendBurst(uint32_t peer, std::span<const BurstDatagram> datagrams, std::span<SendOutcome> out) {
  auto it = peers_.find(peer);
  const size_t n = std::min(datagrams.size(), out.size());
  if (it == peers_.end()) {
    for (size_t i = 0; i < n; ++i) out[i] = SendOutcome{.error = EHOSTUNREACH};
    return;
  }
  if (n > TimestampingSocket::kMaxBurst) return ProbeTransport::SendBurst(peer, datagrams, out);
  std::array<TimestampingSocket::BurstDatagram, TimestampingSocket::kMaxBurst> burst;
  for (size_t i = 0; i < n; ++i) burst[i] = {datagrams[i].bytes, datagrams[i].tx_stamps};
  std::array<SendResult, TimestampingSocket::kMaxBurst> results;
  socket_.SendBurst(it->second, std::span(burst.data(), n), std::span(results.data(), n));
  for (size_t i = 0; i < n; ++i) out[i] = Outcome(results[i]);
}

void PumpSocket(TimestampingSocket& socket, const FitClock& clock, ProbeEngine& engine,
                bool datagrams_ready, bool tx_stamps_ready, HardwareStamps* hardware,
                const SocketTransport* transport) {
  if (tx_stamps_ready) {
    socket.DrainTxStamps([&](const TxStampEvent& ev) {
      if (ev.source == StampSource::kHardware) {
        const auto real = hardware != nullptr ? hardware->ToRealtime(ev.phc_ns) : std::nullopt;
        if (real) engine.OnTxStamp(ev.op_id, ProbeStamp{clock.Ingest(*real), ev.source});
        return;
      }
      engine.OnTxStamp(ev.op_id, ProbeStamp{clock.Ingest(ev.real_ns), ev.source});
    });
  }
  if (!datagrams_ready) return;
  socket.ReceiveAll([&](std::span<const uint8_t> bytes, const ReceivedDatagram& d) {
    DualStamp rx;
    rx.user = {clock.Ingest(d.user_rx_real_ns), StampSource::kUserspace};
    if (d.kernel_rx_real_ns != 0) {
      rx.kernel = {clock.Ingest(d.kernel_rx_real_ns), StampSource::kSocketSoftware};
    }
    if (d.hw_rx_phc_ns != 0 && hardware != nullptr) {
      if (const auto real = hardware->ToRealtime(d.hw_rx_phc_ns)) {
        rx.kernel = {clock.Ingest(*real), StampSource::kHardware};
      }
    }
    engine.OnDatagram(bytes, rx, clock.Now(),
                      [&](uint32_t sender) { return transport == nullptr || transport->IsEndpointOf(sender, d.from); });
  });
}

}  // namespace chronolink
