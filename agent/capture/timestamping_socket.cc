#include "agent/capture/timestamping_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/errqueue.h>
#include <linux/net_tstamp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "agent/clock/clock_reader.h"

namespace chronolink {

namespace {

constexpr int kTimestampingFlags =
    SOF_TIMESTAMPING_TX_SCHED | SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_RX_SOFTWARE |
    SOF_TIMESTAMPING_SOFTWARE | SOF_TIMESTAMPING_OPT_ID | SOF_TIMESTAMPING_OPT_TSONLY;

constexpr int kHardwareTimestampingFlags =
    SOF_TIMESTAMPING_TX_HARDWARE | SOF_TIMESTAMPING_RX_HARDWARE | SOF_TIMESTAMPING_RAW_HARDWARE;

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

SendResult TimestampingSocket::Send(const UdpEndpoint& to, std::span<const uint8_t> payload) {
  SendResult r;
  r.user_tx_real_ns = ReadClockNs(CLOCK_REALTIME);
  const ssize_t n = ::sendto(fd_, payload.data(), payload.size(), 0,
                             reinterpret_cast<const sockaddr*>(&to.addr), to.len);
  if (n < 0) {
    r.error = errno;
    return r;
  }
  r.ok = true;
  r.op_id = next_op_id_++;
  return r;
}

bool TimestampingSocket::Receive(std::span<uint8_t> buffer, ReceivedDatagram* out) {
  alignas(cmsghdr) char control[256];
  iovec iov{buffer.data(), buffer.size()};
  msghdr msg{};
  msg.msg_name = &out->from.addr;
  msg.msg_namelen = sizeof(out->from.addr);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const ssize_t n = ::recvmsg(fd_, &msg, MSG_DONTWAIT);
  if (n < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) ++receive_errors_;
    return false;
  }
  out->user_rx_real_ns = ReadClockNs(CLOCK_REALTIME);
  out->from.len = msg.msg_namelen;
  out->length = static_cast<size_t>(n);
  if (msg.msg_flags & MSG_TRUNC) ++truncated_;
  StampsFromCmsgs(&msg, &out->kernel_rx_real_ns, &out->hw_rx_phc_ns);
  return true;
}

int TimestampingSocket::DrainTxStamps(const std::function<void(const TxStampEvent&)>& sink) {
  int delivered = 0;
  for (;;) {
    alignas(cmsghdr) char control[512];
    char data[64];
    iovec iov{data, sizeof(data)};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    if (::recvmsg(fd_, &msg, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) break;

    int64_t stamp = 0;
    int64_t hw_stamp = 0;
    const bool has_stamp = StampsFromCmsgs(&msg, &stamp, &hw_stamp);
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      const bool is_err = (c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR) ||
                          (c->cmsg_level == SOL_IPV6 && c->cmsg_type == IPV6_RECVERR);
      if (!is_err) continue;
      sock_extended_err ee;
      std::memcpy(&ee, CMSG_DATA(c), sizeof(ee));
      if (ee.ee_errno != ENOMSG || ee.ee_origin != SO_EE_ORIGIN_TIMESTAMPING || !has_stamp)
        continue;
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
      } else {
        continue;
      }
      sink(ev);
      ++delivered;
    }
  }
  return delivered;
}

}  // namespace chronolink
