#include "agent/runtime/socket_transport.h"

#include <algorithm>
#include <array>

#include "agent/probe/probe_engine.h"

namespace chronolink {

void PumpSocket(TimestampingSocket& socket, const NodeClock& clock, ProbeEngine& engine,
                bool datagrams_ready, bool tx_stamps_ready) {
  if (tx_stamps_ready) {
    socket.DrainTxStamps([&](const TxStampEvent& ev) {
      engine.OnTxStamp(ev.op_id, ProbeStamp{clock.Ingest(ev.real_ns), ev.source});
    });
  }
  if (!datagrams_ready) return;
  std::array<uint8_t, 512> buf;
  ReceivedDatagram d;
  while (socket.Receive(buf, &d)) {
    DualStamp rx;
    rx.user = {clock.Ingest(d.user_rx_real_ns), StampSource::kUserspace};
    if (d.kernel_rx_real_ns != 0) {
      rx.kernel = {clock.Ingest(d.kernel_rx_real_ns), StampSource::kSocketSoftware};
    }
    engine.OnDatagram(std::span<const uint8_t>(buf.data(), std::min(d.length, buf.size())), rx,
                      clock.Now());
  }
}

}  // namespace chronolink
