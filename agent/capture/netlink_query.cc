#include "agent/capture/netlink_query.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "agent/capture/bpf_tap.h"

namespace chronolink {

namespace {

std::string ErrnoText(int err) {
  if (err < 0) err = -err;
  return std::string(strerror(err)) + " (errno " + std::to_string(err) + ")";
}

int OpenNetlinkRoute() {
  const int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) return -1;
  // Every wait is bounded: a kernel answer never takes this long.
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_nl local{};
  local.nl_family = AF_NETLINK;
  if (bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0) {
    const int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

bool SendNetlink(int fd, const void* msg, size_t len, std::string* error) {
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sendto(fd, msg, len, 0, reinterpret_cast<const sockaddr*>(&kernel), sizeof(kernel)) < 0) {
    *error = "netlink send: " + ErrnoText(errno);
    return false;
  }
  return true;
}

// Reads replies to `seq` and hands each message to `fn` until NLMSG_DONE
// (dump), an NLMSG_ERROR (ACK when 0) or the first non-multipart message.
// Returns 0, or the negative errno of an NLMSG_ERROR / a socket error.
template <typename Fn>
int ReceiveNetlink(int fd, uint32_t seq, Fn&& fn) {
  std::vector<char> buf(32768);
  for (;;) {
    const ssize_t n = recv(fd, buf.data(), buf.size(), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    int len = static_cast<int>(n);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf.data()); NLMSG_OK(h, len);
         h = NLMSG_NEXT(h, len)) {
      if (h->nlmsg_seq != seq) continue;
      if (h->nlmsg_type == NLMSG_DONE) return 0;
      if (h->nlmsg_type == NLMSG_ERROR) {
        const auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
        return e->error;
      }
      fn(h);
      if (!(h->nlmsg_flags & NLM_F_MULTI)) return 0;
    }
  }
}

class NetlinkSocket {
 public:
  NetlinkSocket() : fd_(OpenNetlinkRoute()) {}
  ~NetlinkSocket() {
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  bool Send(const void* msg, size_t len, std::string* error) {
    return SendNetlink(fd_, msg, len, error);
  }
  template <typename Fn>
  int Receive(uint32_t seq, Fn&& fn) {
    return ReceiveNetlink(fd_, seq, std::forward<Fn>(fn));
  }

 private:
  int fd_ = -1;
};

void AddAttr(nlmsghdr* h, size_t cap, uint16_t type, const void* data, size_t len) {
  const size_t at = NLMSG_ALIGN(h->nlmsg_len);
  const size_t rta_len = RTA_LENGTH(len);
  if (at + RTA_ALIGN(rta_len) > cap) return;
  auto* rta = reinterpret_cast<rtattr*>(reinterpret_cast<char*>(h) + at);
  rta->rta_type = type;
  rta->rta_len = static_cast<uint16_t>(rta_len);
  std::memcpy(RTA_DATA(rta), data, len);
  h->nlmsg_len = static_cast<uint32_t>(at + RTA_ALIGN(rta_len));
}

}  // namespace

TcNetlink::~TcNetlink() {
  if (fd_ >= 0) close(fd_);
}

bool TcNetlink::Open(std::string* error) {
  if (fd_ >= 0) return true;
  fd_ = OpenNetlinkRoute();
  if (fd_ < 0) {
    *error = "netlink socket: " + ErrnoText(errno);
    return false;
  }
  return true;
}

int TcNetlink::CountFilters(int ifindex, uint32_t parent, std::string* error) {
  if (fd_ < 0) {
    *error = "netlink socket not open";
    return -1;
  }
  struct {
    nlmsghdr h;
    tcmsg t;
  } req{};
  req.h.nlmsg_len = NLMSG_LENGTH(sizeof(tcmsg));
  req.h.nlmsg_type = RTM_GETTFILTER;
  req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  req.h.nlmsg_seq = ++seq_;
  req.t.tcm_family = AF_UNSPEC;
  req.t.tcm_ifindex = ifindex;
  req.t.tcm_parent = parent;
  if (!SendNetlink(fd_, &req, req.h.nlmsg_len, error)) return -1;
  int count = 0;
  const int r = ReceiveNetlink(fd_, req.h.nlmsg_seq, [&](const nlmsghdr* h) {
    if (h->nlmsg_type == RTM_NEWTFILTER) ++count;
  });
  if (r == -EINVAL || r == -ENOENT || r == -ENODEV) return 0;  // no such qdisc / block
  if (r < 0) {
    *error = "tc filter dump: " + ErrnoText(r);
    return -1;
  }
  return count;
}

int TcNetlink::Request(void* msg, uint32_t len) {
  if (fd_ < 0) return -EBADF;
  auto* h = static_cast<nlmsghdr*>(msg);
  h->nlmsg_seq = ++seq_;
  h->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
  std::string err;
  if (!SendNetlink(fd_, msg, len, &err)) return -EIO;
  return ReceiveNetlink(fd_, h->nlmsg_seq, [](const nlmsghdr*) {});
}

int TcNetlink::DeleteBpfFilter(int ifindex, uint32_t parent, uint32_t handle, uint32_t priority) {
  struct {
    nlmsghdr h;
    tcmsg t;
    char attrs[32];
  } req{};
  req.h.nlmsg_len = NLMSG_LENGTH(sizeof(tcmsg));
  req.h.nlmsg_type = RTM_DELTFILTER;
  req.t.tcm_family = AF_UNSPEC;
  req.t.tcm_ifindex = ifindex;
  req.t.tcm_parent = parent;
  req.t.tcm_handle = handle;
  req.t.tcm_info = TC_H_MAKE(priority << 16, htons(ETH_P_ALL));
  AddAttr(&req.h, sizeof(req), TCA_KIND, "bpf", sizeof("bpf"));
  return Request(&req, req.h.nlmsg_len);
}

int TcNetlink::DeleteClsact(int ifindex) {
  struct {
    nlmsghdr h;
    tcmsg t;
    char attrs[32];
  } req{};
  req.h.nlmsg_len = NLMSG_LENGTH(sizeof(tcmsg));
  req.h.nlmsg_type = RTM_DELQDISC;
  req.t.tcm_family = AF_UNSPEC;
  req.t.tcm_ifindex = ifindex;
  req.t.tcm_parent = TC_H_CLSACT;
  req.t.tcm_handle = TC_H_MAKE(TC_H_CLSACT, 0);
  AddAttr(&req.h, sizeof(req), TCA_KIND, "clsact", sizeof("clsact"));
  return Request(&req, req.h.nlmsg_len);
}

int CountTcFilters(int ifindex, uint32_t parent, std::string* error) {
  TcNetlink nl;
  if (!nl.Open(error)) return -1;
  return nl.CountFilters(ifindex, parent, error);
}

int RouteOutputIfindex(const std::string& address, std::string* error) {
  unsigned char addr[16];
  int family = AF_INET;
  size_t alen = 4;
  std::string a = address;
  if (a.size() > 2 && a.front() == '[' && a.back() == ']') a = a.substr(1, a.size() - 2);
  if (inet_pton(AF_INET, a.c_str(), addr) != 1) {
    if (inet_pton(AF_INET6, a.c_str(), addr) != 1) {
      *error = "'" + address + "' is not a numeric IPv4 or IPv6 address";
      return 0;
    }
    family = AF_INET6;
    alen = 16;
  }
  NetlinkSocket nl;
  if (!nl.ok()) {
    *error = "netlink socket: " + ErrnoText(errno);
    return 0;
  }
  struct {
    nlmsghdr h;
    rtmsg r;
    char attrs[64];
  } req{};
  req.h.nlmsg_len = NLMSG_LENGTH(sizeof(rtmsg));
  req.h.nlmsg_type = RTM_GETROUTE;
  req.h.nlmsg_flags = NLM_F_REQUEST;
  req.h.nlmsg_seq = 2;
  req.r.rtm_family = static_cast<unsigned char>(family);
  req.r.rtm_dst_len = static_cast<unsigned char>(alen * 8);
  AddAttr(&req.h, sizeof(req), RTA_DST, addr, alen);
  if (!nl.Send(&req, req.h.nlmsg_len, error)) return 0;
  int oif = 0;
  const int r = nl.Receive(2, [&](const nlmsghdr* h) {
    if (h->nlmsg_type != RTM_NEWROUTE) return;
    const auto* rt = static_cast<const rtmsg*>(NLMSG_DATA(h));
    int len = static_cast<int>(RTM_PAYLOAD(h));
    for (auto* rta = RTM_RTA(rt); RTA_OK(rta, len); rta = RTA_NEXT(rta, len)) {
      if (rta->rta_type == RTA_OIF && RTA_PAYLOAD(rta) >= sizeof(int)) {
        std::memcpy(&oif, RTA_DATA(rta), sizeof(int));
      }
    }
  });
  if (r < 0) {
    *error = "no route to " + address + ": " + ErrnoText(r);
    return 0;
  }
  if (oif == 0) *error = "the route to " + address + " names no output device";
  return oif;
}

std::vector<std::string> InterfacesTowards(const std::vector<std::string>& peer_addresses,
                                           std::string* error) {
  std::vector<std::string> out;
  std::string errors;
  for (const auto& peer : peer_addresses) {
    std::string err;
    const int oif = RouteOutputIfindex(peer, &err);
    if (oif == 0) {
      errors += (errors.empty() ? "" : "; ") + err;
      continue;
    }
    char name[IF_NAMESIZE] = {};
    if (if_indextoname(static_cast<unsigned>(oif), name) == nullptr) {
      errors += (errors.empty() ? "" : "; ") + ("device " + std::to_string(oif) +
                                                " of the route to " + peer + " has no name");
      continue;
    }
    if (std::find(out.begin(), out.end(), name) == out.end()) out.emplace_back(name);
  }
  if (error != nullptr) *error = errors;
  return out;
}

}  // namespace chronolink
