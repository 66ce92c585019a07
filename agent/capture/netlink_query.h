// Small rtnetlink queries used by the eBPF tap (and usable without it): the
// egress device of a route, and how many tc filters sit under a qdisc parent.
// Plain NETLINK_ROUTE sockets; nothing is shelled out. Everything is asked of
// the network namespace of the calling thread.
#pragma once

#include <cstdint>
#include <string>

namespace chronolink {

// tc parents of a clsact qdisc: TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS / _EGRESS).
constexpr uint32_t kClsactIngressParent = 0xFFFFFFF2u;
constexpr uint32_t kClsactEgressParent = 0xFFFFFFF3u;

// A NETLINK_ROUTE socket for tc requests. A netlink socket belongs to the
// network namespace it was opened in, so one opened at attach time still
// reaches the right devices when Close() runs on another thread (or in
// another namespace). The kernel checks CAP_NET_ADMIN both of whoever opened
// it and of the caller at each request.
class TcNetlink {
 public:
  TcNetlink() = default;
  ~TcNetlink();
  TcNetlink(const TcNetlink&) = delete;
  TcNetlink& operator=(const TcNetlink&) = delete;

  bool Open(std::string* error);
  bool is_open() const { return fd_ >= 0; }
  // Filters (any kind) under `parent` of `ifindex`: >= 0, or -1 (*error).
  int CountFilters(int ifindex, uint32_t parent, std::string* error);
  // Deletes the cls_bpf filter (protocol all) at parent/handle/priority: 0 or -errno.
  int DeleteBpfFilter(int ifindex, uint32_t parent, uint32_t handle, uint32_t priority);
  // Deletes the clsact qdisc of `ifindex` with every filter on it: 0 or -errno.
  int DeleteClsact(int ifindex);

 private:
  int Request(void* msg, uint32_t len);  // NLM_F_ACK request: 0 or -errno
  int fd_ = -1;
  uint32_t seq_ = 0;
};

// Number of filters (of any kind) attached under `parent` on `ifindex`;
// 0 when there are none or no such qdisc, -1 on error (message in *error).
int CountTcFilters(int ifindex, uint32_t parent, std::string* error);

// Output interface index of the route to the numeric address `address`
// (IPv4 or IPv6); 0 with a message in *error when there is none.
int RouteOutputIfindex(const std::string& address, std::string* error);

}  // namespace chronolink
