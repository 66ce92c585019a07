#include "agent/runtime/socket_transport.h"

#include <algorithm>
#include <array>

#include "agent/probe/probe_engine.h"
#include "agent/runtime/hardware_stamps.h"

namespace chronolink {

void PumpSocket(TimestampingSocket& socket, const NodeClock& clock, ProbeEngine& engine,
                bool datagrams_ready, bool tx_stamps_ready, HardwareStamps* hardware) {
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
  std::array<uint8_t, 512> buf;
  ReceivedDatagram d;
  while (socket.Receive(buf, &d)) {
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
    engine.OnDatagram(std::span<const uint8_t>(buf.data(), std::min(d.length, buf.size())), rx,
                      clock.Now());
  }
}

}  // namespace chronolink
