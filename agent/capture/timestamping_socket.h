// The agent's one UDP socket, with SO_TIMESTAMPING: kernel software stamps on
// receive (RX_SOFTWARE) and on transmit (TX_SCHED when the packet enters the
// qdisc, TX_SOFTWARE when the driver takes it), TX stamps read back from the
// error queue without blocking and matched to packets by OPT_ID. All stamps
// here are raw CLOCK_REALTIME; the caller ingests them into the node clock.
//
// TX stamps cost a system call each to read back, so they are asked for per
// datagram (an SO_TIMESTAMPING control message) and only where the caller
// needs them; TX_SCHED only until the driver has shown it gives TX_SOFTWARE,
// which ranks above it. The kernel numbers only stamped datagrams (OPT_ID),
// so an unstamped send has no op_id. Receives and error-queue reads are
// batched (recvmmsg): one call per burst, none to find the queue empty when
// a batch comes back short.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "clock/timestamp.h"

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
  bool stamped = false;   // TX stamps were asked for: they come back with op_id
  uint32_t op_id = 0;     // SO_TIMESTAMPING OPT_ID of this datagram (stamped only)
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

  // tx_stamps: ask for the kernel's software TX stamps of this datagram (the
  // NIC's are asked for whenever hardware stamping is on: nothing ranks above
  // them).
  SendResult Send(const UdpEndpoint& to, std::span<const uint8_t> payload, bool tx_stamps = true);

  // Several datagrams to one endpoint back to back in one system call
  // (sendmmsg): a probe pair with its pilot. Every result has the same
  // userspace instant, read just before the call (a bound that each
  // datagram left after). Returns how many went; the others carry the error.
  struct BurstDatagram {
    std::span<const uint8_t> payload;
    bool tx_stamps = false;
  };
  static constexpr size_t kMaxBurst = 4;
  size_t SendBurst(const UdpEndpoint& to, std::span<const BurstDatagram> datagrams,
                   std::span<SendResult> results);

  // Has the kernel drop every datagram whose UDP payload is exactly this
  // long, before it is queued: the pilot datagrams, which only warm the path
  // and would otherwise wake the agent to be read and thrown away.
  bool DropDatagramsOfLength(size_t payload_bytes, std::string* error);

  // Keep asking for TX_SCHED even once TX_SOFTWARE is known to come (a
  // forced socket_sched source needs it).
  void SetAlwaysSched(bool always) { always_sched_ = always; }

  // Every queued datagram, without blocking, in batches; each goes to the
  // sink with its bytes (at most kMaxDatagramBytes). Returns how many.
  static constexpr size_t kMaxDatagramBytes = 512;
  int ReceiveAll(const std::function<void(std::span<const uint8_t>, const ReceivedDatagram&)>& sink);

  // Reads every queued TX stamp from the error queue without blocking.
  // Returns how many events were delivered.
  int DrainTxStamps(const std::function<void(const TxStampEvent&)>& sink);

  // Stamped datagrams sent since the error queue was last drained. Where
  // the driver stamps in the sender's own context (veth, most NICs'
  // TX_SOFTWARE), the stamps are queued when sendmsg returns: draining then,
  // rather than when poll reports POLLERR, saves a wake-up per probe.
  uint32_t stamped_since_drain() const { return stamped_since_drain_; }

  // System calls made to read, for the cost figures (PERFORMANCE §3).
  uint64_t receive_calls() const { return receive_calls_; }
  uint64_t error_queue_calls() const { return error_queue_calls_; }

  uint64_t receive_errors() const { return receive_errors_; }
  uint64_t truncated() const { return truncated_; }

 private:
  uint32_t TxFlags(bool tx_stamps) const;
  void NoteSent(uint32_t tx_flags, SendResult* r);
  int DeliverTxStamp(msghdr* msg, const std::function<void(const TxStampEvent&)>& sink);

  int fd_ = -1;
  int family_ = AF_INET;
  uint16_t bound_port_ = 0;
  bool hardware_ = false;
  bool always_sched_ = false;
  bool software_tx_seen_ = false;  // TX_SOFTWARE came once: TX_SCHED is no longer asked for
  uint32_t next_op_id_ = 0;  // the kernel numbers stamped datagrams from 0 per socket
  uint32_t stamped_since_drain_ = 0;
  uint64_t receive_errors_ = 0;
  uint64_t truncated_ = 0;
  uint64_t receive_calls_ = 0;
  uint64_t error_queue_calls_ = 0;
};

}  // namespace chronolink
