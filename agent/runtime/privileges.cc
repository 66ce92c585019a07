#include "agent/runtime/privileges.h"

#include <errno.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#ifdef CHRONOLINK_HAVE_LIBCAP
#include <sys/capability.h>
#endif

// Older uapi headers lack the two split-out capabilities (Linux 5.8).
#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

namespace chronolink {

namespace {

std::string ErrnoText(int err) { return std::string(strerror(err)) + " (errno " + std::to_string(err) + ")"; }

#ifndef CHRONOLINK_HAVE_LIBCAP
// Without libcap: the raw capget/capset system calls (version 3, 64 bits).
bool RawGet(__user_cap_data_struct data[2]) {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  return syscall(SYS_capget, &hdr, data) == 0;
}
bool RawHas(const __user_cap_data_struct data[2], int cap) {
  return (data[cap / 32].effective & (1u << (cap % 32))) != 0;
}
#endif

}  // namespace

Capabilities CurrentCapabilities() {
  Capabilities c;
#ifdef CHRONOLINK_HAVE_LIBCAP
  cap_t caps = cap_get_proc();
  if (caps == nullptr) return c;
  auto has = [&](cap_value_t v) {
    cap_flag_value_t f = CAP_CLEAR;
    // An unknown capability (older kernel) reads as not held.
    if (cap_get_flag(caps, v, CAP_EFFECTIVE, &f) != 0) return false;
    return f == CAP_SET;
  };
  c.bpf = has(CAP_BPF);
  c.net_admin = has(CAP_NET_ADMIN);
  c.perfmon = has(CAP_PERFMON);
  c.sys_admin = has(CAP_SYS_ADMIN);
  cap_free(caps);
#else
  __user_cap_data_struct data[2] = {};
  if (!RawGet(data)) return c;
  c.bpf = RawHas(data, CAP_BPF);
  c.net_admin = RawHas(data, CAP_NET_ADMIN);
  c.perfmon = RawHas(data, CAP_PERFMON);
  c.sys_admin = RawHas(data, CAP_SYS_ADMIN);
#endif
  return c;
}

std::string DescribeCapabilities(const Capabilities& caps) {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (on) s += (s.empty() ? "" : ",") + std::string(name);
  };
  add(caps.bpf, "bpf");
  add(caps.net_admin, "net_admin");
  add(caps.perfmon, "perfmon");
  add(caps.sys_admin, "sys_admin");
  return s.empty() ? "none" : s;
}

bool DropAllCapabilities(std::string* error) {
  // Bounding set first: dropping from it needs CAP_SETPCAP, which the clear
  // below takes away. Failures here (no CAP_SETPCAP) are not fatal: with
  // empty permitted/inheritable sets and no_new_privs nothing can come back.
  for (int cap = 0; cap <= 63; ++cap) {
    if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) != 1) continue;
    prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  }
#ifdef CHRONOLINK_HAVE_LIBCAP
  cap_t empty = cap_init();  // all three sets clear
  if (empty == nullptr) {
    if (error != nullptr) *error = "cap_init: " + ErrnoText(errno);
    return false;
  }
  const int r = cap_set_proc(empty);
  const int e = errno;
  cap_free(empty);
  if (r != 0) {
    if (error != nullptr) *error = "cap_set_proc (clear all): " + ErrnoText(e);
    return false;
  }
#else
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capset, &hdr, data) != 0) {
    if (error != nullptr) *error = "capset (clear all): " + ErrnoText(errno);
    return false;
  }
#endif
  // Ambient capabilities need permitted+inheritable, both empty now; clear
  // them explicitly anyway (EINVAL on kernels without ambient sets is fine).
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    if (error != nullptr) *error = "prctl(PR_SET_NO_NEW_PRIVS): " + ErrnoText(errno);
    return false;
  }
  // Capabilities are per thread: a thread started before this call keeps its
  // own. Say so instead of pretending the process is unprivileged.
  std::string holders;
  std::error_code ec;
  for (const auto& t : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream f(t.path() / "status");
    std::string line;
    while (std::getline(f, line)) {
      if (line.rfind("CapEff:", 0) != 0) continue;
      if (line.find_first_not_of("0 \t", 7) != std::string::npos) {
        holders += (holders.empty() ? "" : ",") + t.path().filename().string();
      }
      break;
    }
  }
  if (!holders.empty()) {
    if (error != nullptr) {
      *error = "capabilities dropped on this thread, but threads " + holders +
               " still hold theirs (capabilities are per thread: drop before starting threads)";
    }
    return false;
  }
  return true;
}

}  // namespace chronolink
