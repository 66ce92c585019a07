// A classic tc BPF filter as libbpf's bpf_tc_* calls name it: the hook (a
// device and a direction) and the filter's options. Each chronolink program
// attaches at its own handle and priority (the tap 0xC1C1, the test bed's
// probe-loss filter 0xC1C2), so that each finds, replaces and removes only
// its own filter and leaves the other's alone.
#pragma once

#include <bpf/libbpf.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace chronolink {

inline bpf_tc_hook TcHook(int ifindex, bpf_tc_attach_point point) {
  bpf_tc_hook h{};
  h.sz = sizeof(h);
  h.ifindex = ifindex;
  h.attach_point = point;
  return h;
}

inline bpf_tc_opts TcFilterOpts(uint32_t handle, uint32_t priority) {
  bpf_tc_opts o{};
  o.sz = sizeof(o);
  o.handle = handle;
  o.priority = priority;
  return o;
}

// An errno (either sign, as libbpf returns them) as text with its number.
inline std::string ErrnoText(int err) {
  if (err < 0) err = -err;
  return std::string(strerror(err)) + " (errno " + std::to_string(err) + ")";
}

}  // namespace chronolink
