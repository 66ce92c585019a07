// Process capabilities: what the agent holds (for the start-up log and for
// choosing between the eBPF tap and SO_TIMESTAMPING), and dropping all of
// them once everything privileged is done (BPF programs attached, sockets
// bound). After the drop the agent keeps working through what it already
// holds: the ring buffer is mmap()ed, links are file descriptors.
#pragma once

#include <string>

namespace chronolink {

// The effective set, as far as the agent cares.
struct Capabilities {
  bool bpf = false;        // CAP_BPF: load programs, create maps
  bool net_admin = false;  // CAP_NET_ADMIN: tc/tcx/XDP attach, SIOCSHWTSTAMP
  bool perfmon = false;    // CAP_PERFMON: tracing programs (tp_btf), pointer reads
  bool sys_admin = false;  // CAP_SYS_ADMIN: implies the BPF rights on old kernels
};

Capabilities CurrentCapabilities();

// "bpf,net_admin" style list of the capabilities held ("none" when empty).
std::string DescribeCapabilities(const Capabilities& caps);

// Drops every capability of the calling thread for good: the bounding set (while CAP_SETPCAP is
// still held), then the effective, permitted, inheritable (and so ambient)
// sets, and sets no_new_privs so that no later execve() can regain any,
// even as uid 0. Capabilities are per thread: call it before starting other
// threads. False with a message in *error if the kernel refused, or if another
// thread of the process still holds capabilities.
bool DropAllCapabilities(std::string* error);

}  // namespace chronolink
