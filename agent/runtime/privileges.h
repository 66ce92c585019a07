// Process privileges: what the agent holds (for the start-up log and for
// choosing between the eBPF tap and SO_TIMESTAMPING), and the drop once
// everything privileged is done (BPF programs attached, sockets bound, the
// PTP clock opened, the clock page created). After the drop the agent keeps
// working through what it already holds: the ring buffer is mmap()ed, links
// and the PHC are file descriptors.
//
// The drop (docs/deployment.md "Privilege model"): started as root (or with
// CAP_SETUID), the agent empties the bounding set, clears its supplementary
// groups, switches every uid and gid to an unprivileged user (--user,
// default nobody; --group, default that user's primary group), leaves no
// capability in any set, sets no_new_privs and stays non-dumpable; then it
// reads the kernel's view back and fails if anything differs. Started
// without privileges it keeps its ids and drops whatever capabilities it
// has. Credentials are per thread for capabilities and per process for ids
// (glibc applies set*id to every thread): call it before starting threads.
#pragma once

#include <sys/types.h>

#include <cstdint>
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
// thread of the process still holds capabilities. Keeps the uid: the agent
// uses DropPrivileges below.
bool DropAllCapabilities(std::string* error);

// The calling thread's credentials as the kernel has them. Capability sets
// are bit masks (bit n = capability n).
struct ProcessCredentials {
  uid_t ruid = 0, euid = 0, suid = 0;
  gid_t rgid = 0, egid = 0, sgid = 0;
  int supplementary_groups = 0;
  uint64_t effective = 0, permitted = 0, inheritable = 0, ambient = 0, bounding = 0;
  bool no_new_privs = false;
  bool dumpable = true;
};
ProcessCredentials ReadCredentials();

// Root in any uid slot, or the capabilities to change ids: the agent can
// (and so must) become its unprivileged user.
bool CanSwitchUser(const ProcessCredentials& c);

// The user and group to become.
struct RunAsTarget {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string user;   // "nobody (uid 65534)"
  std::string group;  // "nogroup (gid 65534)"
};

// user: a name or a decimal uid; group: a name, a decimal gid, or empty for
// the user's primary group. False with a message when either is unknown.
bool ResolveRunAs(const std::string& user, const std::string& group, RunAsTarget* out, std::string* error);

// What the drop does, decided from the credentials at start.
struct DropPlan {
  enum class Kind {
    kNothing,           // no privilege at all: nothing to drop
    kCapabilitiesOnly,  // unprivileged ids holding capabilities (ambient, file caps): drop them
    kSwitchUser,        // root or CAP_SETUID: become target, with no capability
  };
  Kind kind = Kind::kNothing;
  RunAsTarget target;           // kSwitchUser
  bool clear_bounding = false;  // CAP_SETPCAP held: the bounding set is emptied too
  std::string refusal;          // not empty: the drop cannot be done as asked (fatal)
};

// target: the resolved --user/--group, or null when they were not resolved
// (an unprivileged start without them needs none). user_explicit /
// group_explicit: that one was asked for, so an agent that cannot become it
// fails rather than running as someone else.
DropPlan PlanPrivilegeDrop(const ProcessCredentials& now, const RunAsTarget* target, bool user_explicit,
                           bool group_explicit);

// "" when `after` is what the plan asked for, else what differs.
std::string CheckDropped(const ProcessCredentials& after, const DropPlan& plan, const ProcessCredentials& before);

// Carries the plan out, then reads the credentials back (every thread's
// too) and checks them. False with a message on any refusal or difference:
// the caller must not go on.
bool DropPrivileges(const DropPlan& plan, std::string* error);

// One line for the log: "now uid 65534 (nobody) gid 65534 (nogroup), no
// capabilities, no_new_privs" or "nothing to drop: ...".
std::string DescribeDrop(const DropPlan& plan, const ProcessCredentials& before);

}  // namespace chronolink
