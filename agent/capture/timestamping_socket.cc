#include "agent/capture/timestamping_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/errqueue.h>
#include <linux/filter.h>
#include <linux/net_tstamp.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "clock/clock_reader.h"

namespace chronolink {

namespace {

// Socket-wide: receive stamps and how stamps are reported. TX stamps are
// asked for per datagram (TxFlags).
constexpr int kTimestampingFlags = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE |
                                   SOF_TIMESTAMPING_OPT_ID | SOF_TIMESTAMPING_OPT_TSONLY;

constexpr int kHardwareTimestampingFlags = SOF_TIMESTAMPING_RX_HARDWARE | SOF_TIMESTAMPING_RAW_HARDWARE;

constexpr size_t kBatch = 8;  // datagrams or error-queue messages per recvmmsg

std::string ErrnoText(const char* what, int err) {
  return std::string(what) + ": " + std::strerror(err);
}

// The SCM_TIMESTAMPING stamps of a message: software (ts[0], REALTIME) and
// raw hardware (ts[2], the NIC's PHC time); 0 where absent (ts[1] is unused).
bool StampsFromCmsgs(msghdr* msg, int64_t* software_ns, int64_t* hardware_ns) {
  *software_ns = 0;
  *hardware_ns = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(msg); c != nullptr; c = CMSG_NXTHDR(msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPING) {
      scm_timestamping ts;
      std::memcpy(&ts, CMSG_DATA(c), sizeof(ts));
      if (ts.ts[0].tv_sec != 0 || ts.ts[0].tv_nsec != 0) *software_ns = TimespecToNs(ts.ts[0]);
      if (ts.ts[2].tv_sec != 0 || ts.ts[2].tv_nsec != 0) *hardware_ns = TimespecToNs(ts.ts[2]);
      return *software_ns != 0 || *hardware_ns != 0;
    }
  }
  return false;
}

}  // namespace

bool UdpEndpoint::Parse(const std::string& ip, uint16_t port, UdpEndpoint* out,
                        std::string* error) {
  *out = UdpEndpoint{};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&out->addr);
  if (inet_pton(AF_INET, ip.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    out->len = sizeof(sockaddr_in);
    return true;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out->addr);
  if (inet_pton(AF_INET6, ip.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    out->len = sizeof(sockaddr_in6);
    return true;
  }
  *error = "not an IPv4 or IPv6 address: '" + ip + "'";
  return false;
}

std::string UdpEndpoint::ToString() const {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (addr.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &v4->sin_addr, buf, sizeof(buf));
    return std::string(buf) + ":" + std::to_string(ntohs(v4->sin_port));
  }
  if (addr.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof(buf));
    return "[" + std::string(buf) + "]:" + std::to_string(ntohs(v6->sin6_port));
  }
  return "?";
}

TimestampingSocket::~TimestampingSocket() { Close(); }

void TimestampingSocket::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool TimestampingSocket::Open(const std::string& ip, uint16_t port, std::string* error,
                              bool hardware) {
  Close();
  UdpEndpoint local;
  if (!UdpEndpoint::Parse(ip, port, &local, error)) return false;
  family_ = local.addr.ss_family;
  fd_ = ::socket(family_, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP);
  if (fd_ < 0) {
    *error = ErrnoText("socket", errno);
    return false;
  }
  if (::bind(fd_, reinterpret_cast<const sockaddr*>(&local.addr), local.len) != 0) {
    const int err = errno;
    *error = ErrnoText(("bind " + local.ToString()).c_str(), err);
    if (err == EADDRINUSE) *error += " (another agent already listens there?)";
    Close();
    return false;
  }
  hardware_ = hardware;
  software_tx_seen_ = false;
  int flags = kTimestampingFlags | (hardware ? kHardwareTimestampingFlags : 0);
  if (::setsockopt(fd_, SOL_SOCKET, SO_TIMESTAMPING, &flags, sizeof(flags)) != 0) {
    *error = ErrnoText("setsockopt(SO_TIMESTAMPING)", errno);
    Close();
    return false;
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  bound_port_ = ntohs(bound.ss_family == AF_INET
                          ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                          : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  next_op_id_ = 0;
  return true;
}

uint32_t TimestampingSocket::TxFlags(bool tx_stamps) const {
  uint32_t tx_flags = hardware_ ? SOF_TIMESTAMPING_TX_HARDWARE : 0;
  if (tx_stamps) {
    tx_flags |= SOF_TIMESTAMPING_TX_SOFTWARE;
    if (always_sched_ || !software_tx_seen_) tx_flags |= SOF_TIMESTAMPING_TX_SCHED;
  }
  return tx_flags;
}

namespace {

// One outgoing datagram's message header, with its SO_TIMESTAMPING control
// message when it asks for TX stamps.
struct OutgoingMessage {
  iovec iov{};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(uint32_t))] = {};

  void Fill(msghdr* msg, const UdpEndpoint& to, std::span<const uint8_t> payload, uint32_t tx_flags) {
    iov = iovec{const_cast<uint8_t*>(payload.data()), payload.size()};
    *msg = msghdr{};
    msg->msg_name = const_cast<sockaddr_storage*>(&to.addr);
    msg->msg_namelen = to.len;
    msg->msg_iov = &iov;
    msg->msg_iovlen = 1;
    if (tx_flags == 0) return;
    msg->msg_control = control;
    msg->msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SO_TIMESTAMPING;
    c->cmsg_len = CMSG_LEN(sizeof(uint32_t));
    std::memcpy(CMSG_DATA(c), &tx_flags, sizeof(tx_flags));
  }
};

}  // namespace

void TimestampingSocket::NoteSent(uint32_t tx_flags, SendResult* r) {
  r->ok = true;
  r->stamped = tx_flags != 0;
  if (!r->stamped) return;
  r->op_id = next_op_id_++;
  ++stamped_since_drain_;
}

SendResult TimestampingSocket::Send(const UdpEndpoint& to, std::span<const uint8_t> payload,
                                    bool tx_stamps) {
  const uint32_t tx_flags = TxFlags(tx_stamps);
  OutgoingMessage out;
  msghdr msg;
  out.Fill(&msg, to, payload, tx_flags);
  SendResult r;
  r.user_tx_real_ns = ReadClockNs(CLOCK_REALTIME);
  if (::sendmsg(fd_, &msg, 0) < 0) {
    r.error = errno;
    return r;
  }
  NoteSent(tx_flags, &r);
  return r;
}

size_t TimestampingSocket::SendBurst(const UdpEndpoint& to, std::span<const BurstDatagram> datagrams,
                                     std::span<SendResult> results) {
  const size_t n = std::min({datagrams.size(), results.size(), kMaxBurst});
  std::array<OutgoingMessage, kMaxBurst> out;
  std::array<mmsghdr, kMaxBurst> msgs{};
  std::array<uint32_t, kMaxBurst> flags{};
  for (size_t i = 0; i < n; ++i) {
    flags[i] = TxFlags(datagrams[i].tx_stamps);
    out[i].Fill(&msgs[i].msg_hdr, to, datagrams[i].payload, flags[i]);
  }
  const int64_t user_tx = ReadClockNs(CLOCK_REALTIME);
  const int sent = n == 0 ? 0 : ::sendmmsg(fd_, msgs.data(), static_cast<unsigned>(n), 0);
  const int err = sent < 0 ? errno : EAGAIN;  // a short burst: the rest would not go now
  for (size_t i = 0; i < n; ++i) {
    results[i] = SendResult{};
    results[i].user_tx_real_ns = user_tx;
    if (static_cast<int>(i) < sent) NoteSent(flags[i], &results[i]);
    else results[i].error = err;
  }
  return sent < 0 ? 0 : static_cast<size_t>(sent);
}

bool TimestampingSocket::DropDatagramsOfLength(size_t payload_bytes, std::string* error) {
  // A classic socket filter on a UDP socket sees the datagram from its UDP
  // header on: its length is 8 + payload.
  const auto wire_len = static_cast<uint32_t>(payload_bytes + 8);
  sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_LEN, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, wire_len, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, 0),           // drop
      BPF_STMT(BPF_RET | BPF_K, 0xffffffff),  // keep whole
  };
  sock_fprog prog{static_cast<unsigned short>(std::size(code)), code};
  if (::setsockopt(fd_, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) != 0) {
    *error = ErrnoText("setsockopt(SO_ATTACH_FILTER)", errno);
    return false;
  }
  return true;
}

namespace {

// One batch of receive buffers for recvmmsg.
template <size_t kBytes, size_t kControl>
struct ReceiveBatch {
  std::array<std::array<uint8_t, kBytes>, kBatch> data;
  alignas(cmsghdr) std::array<std::array<char, kControl>, kBatch> control;
  std::array<sockaddr_storage, kBatch> from;
  std::array<iovec, kBatch> iov;
  std::array<mmsghdr, kBatch> msgs;

  void Reset(bool with_address) {
    for (size_t i = 0; i < kBatch; ++i) {
      iov[i] = iovec{data[i].data(), data[i].size()};
      msghdr& m = msgs[i].msg_hdr;
      m = msghdr{};
      m.msg_name = with_address ? &from[i] : nullptr;
      m.msg_namelen = with_address ? sizeof(from[i]) : 0;
      m.msg_iov = &iov[i];
      m.msg_iovlen = 1;
      m.msg_control = control[i].data();
      m.msg_controllen = control[i].size();
      msgs[i].msg_len = 0;
    }
  }
};

}  // namespace

int TimestampingSocket::ReceiveAll(
    const std::function<void(std::span<const uint8_t>, const ReceivedDatagram&)>& sink) {
  ReceiveBatch<kMaxDatagramBytes, 256> batch;
  int delivered = 0;
  for (;;) {
    batch.Reset(true);
    ++receive_calls_;
    const int n = ::recvmmsg(fd_, batch.msgs.data(), kBatch, MSG_DONTWAIT, nullptr);
    if (n <= 0) {
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) ++receive_errors_;
      return delivered;
    }
    const int64_t user_rx = ReadClockNs(CLOCK_REALTIME);  // one read after the batch
    for (int i = 0; i < n; ++i) {
      msghdr& m = batch.msgs[i].msg_hdr;
      ReceivedDatagram d;
      d.user_rx_real_ns = user_rx;
      d.from.addr = batch.from[i];
      d.from.len = m.msg_namelen;
      d.length = std::min<size_t>(batch.msgs[i].msg_len, kMaxDatagramBytes);
      if (m.msg_flags & MSG_TRUNC) ++truncated_;
      StampsFromCmsgs(&m, &d.kernel_rx_real_ns, &d.hw_rx_phc_ns);
      sink(std::span<const uint8_t>(batch.data[i].data(), d.length), d);
      ++delivered;
    }
    if (static_cast<size_t>(n) < kBatch) return delivered;  // the queue is empty: no call to learn it
  }
}

int TimestampingSocket::DrainTxStamps(const std::function<void(const TxStampEvent&)>& sink) {
  ReceiveBatch<64, 512> batch;
  int delivered = 0;
  stamped_since_drain_ = 0;
  for (;;) {
    batch.Reset(false);
    ++error_queue_calls_;
    const int n = ::recvmmsg(fd_, batch.msgs.data(), kBatch, MSG_ERRQUEUE | MSG_DONTWAIT, nullptr);
    if (n <= 0) return delivered;
    for (int i = 0; i < n; ++i) delivered += DeliverTxStamp(&batch.msgs[i].msg_hdr, sink);
    if (static_cast<size_t>(n) < kBatch) return delivered;
  }
}

int TimestampingSocket::DeliverTxStamp(msghdr* msg, const std::function<void(const TxStampEvent&)>& sink) {
  int64_t stamp = 0;
  int64_t hw_stamp = 0;
  const bool has_stamp = StampsFromCmsgs(msg, &stamp, &hw_stamp);
  int delivered = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(msg); c != nullptr; c = CMSG_NXTHDR(msg, c)) {
    const bool is_err = (c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR) ||
                        (c->cmsg_level == SOL_IPV6 && c->cmsg_type == IPV6_RECVERR);
    if (!is_err) continue;
    sock_extended_err ee;
    std::memcpy(&ee, CMSG_DATA(c), sizeof(ee));
    if (ee.ee_errno != ENOMSG || ee.ee_origin != SO_EE_ORIGIN_TIMESTAMPING || !has_stamp) continue;
    TxStampEvent ev;
    ev.op_id = ee.ee_data;
    ev.real_ns = stamp;
    if (ee.ee_info == SCM_TSTAMP_SND && hw_stamp != 0) {
      // The NIC's stamp comes in an error-queue message of its own, ts[2] only.
      ev.source = StampSource::kHardware;
      ev.real_ns = 0;
      ev.phc_ns = hw_stamp;
    } else if (stamp == 0) {
      continue;
    } else if (ee.ee_info == SCM_TSTAMP_SCHED) {
      ev.source = StampSource::kSocketSched;
    } else if (ee.ee_info == SCM_TSTAMP_SND) {
      ev.source = StampSource::kSocketSoftware;
      software_tx_seen_ = true;
    } else {
      continue;
    }
    sink(ev);
    ++delivered;
  }
  return delivered;
}

}  // namespace chronolink
