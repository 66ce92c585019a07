// The agent's one UDP socket, with SO_TIMESTAMPING: kernel software stamps on
// receive (RX_SOFTWARE) and on transmit (TX_SCHED when the packet enters the
// qdisc, TX_SOFTWARE when the driver takes it), TX stamps read back from the
// error queue without blocking and matched to packets by OPT_ID. All stamps
// here are raw CLOCK_REALTIME; the caller ingests them into the node clock.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "agent/clock/timestamp.h"

namespace chronolink {

struct UdpEndpoint {
  sockaddr_storage addr{};
  socklen_t len = 0;

  static bool Parse(const std::string& ip, uint16_t port, UdpEndpoint* out, std::string* error);
  std::string ToString() const;
};

struct SendResult {
  bool ok = false;
  int error = 0;          // errno when !ok
  uint32_t op_id = 0;     // SO_TIMESTAMPING OPT_ID of this datagram
  int64_t user_tx_real_ns = 0;  // CLOCK_REALTIME read just before sendmsg
};

struct ReceivedDatagram {
  size_t length = 0;
  UdpEndpoint from;
  int64_t kernel_rx_real_ns = 0;  // RX_SOFTWARE, 0 if the kernel gave none
  int64_t hw_rx_phc_ns = 0;       // RX_HARDWARE (ts[2]) in the NIC's PHC time, 0 if none
  int64_t user_rx_real_ns = 0;    // CLOCK_REALTIME read just after recvmsg
};

struct TxStampEvent {
  uint32_t op_id = 0;
  StampSource source = StampSource::kNone;  // kSocketSched, kSocketSoftware or kHardware
  int64_t real_ns = 0;  // CLOCK_REALTIME; 0 for kHardware
  int64_t phc_ns = 0;   // kHardware only: TX_HARDWARE (ts[2]) in the NIC's PHC time
};

class TimestampingSocket {
 public:
  TimestampingSocket() = default;
  ~TimestampingSocket();
  TimestampingSocket(const TimestampingSocket&) = delete;
  TimestampingSocket& operator=(const TimestampingSocket&) = delete;

  // Binds ip:port and enables timestamping. Errors (port in use, bad
  // address, no timestamping) come back as a message, never an exception.
  // hardware: also ask for NIC stamps (RAW_HARDWARE); they come only once the
  // device has been switched on with EnableHwTimestamping (hw_timestamping.h).
  bool Open(const std::string& ip, uint16_t port, std::string* error, bool hardware = false);
  void Close();

  int fd() const { return fd_; }
  uint16_t bound_port() const { return bound_port_; }

  SendResult Send(const UdpEndpoint& to, std::span<const uint8_t> payload);

  // Non-blocking; false when nothing is queued (or on an error, counted).
  bool Receive(std::span<uint8_t> buffer, ReceivedDatagram* out);

  // Reads every queued TX stamp from the error queue without blocking.
  // Returns how many events were delivered.
  int DrainTxStamps(const std::function<void(const TxStampEvent&)>& sink);

  uint64_t receive_errors() const { return receive_errors_; }
  uint64_t truncated() const { return truncated_; }

 private:
  int fd_ = -1;
  int family_ = AF_INET;
  uint16_t bound_port_ = 0;
  uint32_t next_op_id_ = 0;  // the kernel numbers datagrams from 0 per socket
  uint64_t receive_errors_ = 0;
  uint64_t truncated_ = 0;
};

}  // namespace chronolink
