#include "agent/runtime/privileges.h"

#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

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

bool Has(uint64_t set, int cap) { return (set >> cap) & 1; }

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

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

// Empties the bounding set as far as CAP_SETPCAP allows; false if some
// capability stayed in it.
bool ClearBoundingSet() {
  bool all = true;
  for (int cap = 0; cap < 64; ++cap) {
    const int in = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
    if (in < 0) break;  // past the last capability this kernel knows
    if (in == 1 && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) all = false;
  }
  return all;
}

// Effective, permitted and inheritable sets of the calling thread to empty.
bool ClearCapabilitySets(std::string* error) {
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
  return true;
}

// Capabilities and uids are per thread in the kernel: a thread started
// before the drop keeps its own. The ids of threads that still hold
// capabilities (or, with check_uid, run as another uid), comma-separated.
std::string OtherThreadsWithPrivilege(bool check_uid, uid_t uid) {
  std::string holders;
  std::error_code ec;
  for (const auto& t : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream f(t.path() / "status");
    std::string line;
    bool privileged = false;
    while (std::getline(f, line)) {
      const bool caps = line.rfind("CapEff:", 0) == 0 || line.rfind("CapPrm:", 0) == 0;
      if (caps && line.find_first_not_of("0 \t", 7) != std::string::npos) privileged = true;
      if (check_uid && line.rfind("Uid:", 0) == 0) {
        std::istringstream in(line.substr(4));
        uid_t r = 0, e = 0, s = 0;
        in >> r >> e >> s;
        if (r != uid || e != uid || s != uid) privileged = true;
      }
    }
    if (privileged) holders += (holders.empty() ? "" : ",") + t.path().filename().string();
  }
  return holders;
}

bool ParseId(const std::string& text, uint32_t* out) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

std::string GroupLabel(gid_t gid) {
  std::vector<char> buf(16384);
  group gr{};
  group* found = nullptr;
  getgrgid_r(gid, &gr, buf.data(), buf.size(), &found);
  return (found != nullptr ? std::string(found->gr_name) + " " : std::string()) + "(gid " +
         std::to_string(gid) + ")";
}

bool ResolveGroup(const std::string& name, gid_t* gid, std::string* error) {
  uint32_t number = 0;
  if (ParseId(name, &number)) {
    *gid = static_cast<gid_t>(number);  // a gid needs no group entry
    return true;
  }
  std::vector<char> buf(16384);
  group gr{};
  group* found = nullptr;
  const int rc = getgrnam_r(name.c_str(), &gr, buf.data(), buf.size(), &found);
  if (found == nullptr) {
    *error = "no such group '" + name + "'" + (rc != 0 ? " (" + ErrnoText(rc) + ")" : std::string()) +
             ": --group must name an existing group (or a numeric gid)";
    return false;
  }
  *gid = found->gr_gid;
  return true;
}

std::string Ids(uid_t r, uid_t e, uid_t s) {
  return std::to_string(r) + "/" + std::to_string(e) + "/" + std::to_string(s);
}

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
  ClearBoundingSet();
  if (!ClearCapabilitySets(error)) return false;
  // Ambient capabilities need permitted+inheritable, both empty now; clear
  // them explicitly anyway (EINVAL on kernels without ambient sets is fine).
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    if (error != nullptr) *error = "prctl(PR_SET_NO_NEW_PRIVS): " + ErrnoText(errno);
    return false;
  }
  const std::string holders = OtherThreadsWithPrivilege(false, 0);
  if (!holders.empty()) {
    if (error != nullptr) {
      *error = "capabilities dropped on this thread, but threads " + holders +
               " still hold theirs (capabilities are per thread: drop before starting threads)";
    }
    return false;
  }
  return true;
}

ProcessCredentials ReadCredentials() {
  ProcessCredentials c;
  getresuid(&c.ruid, &c.euid, &c.suid);
  getresgid(&c.rgid, &c.egid, &c.sgid);
  c.supplementary_groups = getgroups(0, nullptr);
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &hdr, data) == 0) {
    auto join = [](uint32_t lo, uint32_t hi) { return (static_cast<uint64_t>(hi) << 32) | lo; };
    c.effective = join(data[0].effective, data[1].effective);
    c.permitted = join(data[0].permitted, data[1].permitted);
    c.inheritable = join(data[0].inheritable, data[1].inheritable);
  } else {
    c.effective = c.permitted = c.inheritable = ~0ULL;  // unknown reads as held
  }
  // Past the last capability the kernel knows, both reads fail with EINVAL.
  for (int cap = 0; cap < 64; ++cap) {
    const int in_bounding = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
    if (in_bounding < 0) break;
    if (in_bounding == 1) c.bounding |= 1ULL << cap;
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0) == 1) c.ambient |= 1ULL << cap;
  }
  c.no_new_privs = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1;
  c.dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0;
  return c;
}

bool CanSwitchUser(const ProcessCredentials& c) {
  return c.ruid == 0 || c.euid == 0 || c.suid == 0 ||
         (Has(c.effective, CAP_SETUID) && Has(c.effective, CAP_SETGID));
}

bool ResolveRunAs(const std::string& user, const std::string& group, RunAsTarget* out, std::string* error) {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  uint32_t number = 0;
  const bool numeric = ParseId(user, &number);
  const int rc = numeric ? getpwuid_r(static_cast<uid_t>(number), &pw, buf.data(), buf.size(), &found)
                         : getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found);
  if (found == nullptr && !numeric) {
    *error = "no such user '" + user + "'" + (rc != 0 ? " (" + ErrnoText(rc) + ")" : std::string()) +
             ": --user must name an existing user (or a numeric uid)";
    return false;
  }
  if (found == nullptr && group.empty()) {
    *error = "uid " + user + " has no passwd entry and so no primary group: give --group too";
    return false;
  }
  RunAsTarget t;
  t.uid = found != nullptr ? found->pw_uid : static_cast<uid_t>(number);
  t.user = (found != nullptr ? std::string(found->pw_name) + " " : std::string()) + "(uid " +
           std::to_string(t.uid) + ")";
  if (group.empty()) {
    t.gid = found->pw_gid;
  } else if (!ResolveGroup(group, &t.gid, error)) {
    return false;
  }
  t.group = GroupLabel(t.gid);
  *out = t;
  return true;
}

DropPlan PlanPrivilegeDrop(const ProcessCredentials& now, const RunAsTarget* target, bool user_explicit,
                           bool group_explicit) {
  DropPlan p;
  p.clear_bounding = Has(now.effective, CAP_SETPCAP);
  const bool switching = CanSwitchUser(now);
  if (target != nullptr && target->uid == 0 && (switching || user_explicit)) {
    p.refusal = "--user names root (uid 0), but the agent never keeps uid 0 after start-up: name an "
                "unprivileged user (default nobody; a dedicated one in production, docs/deployment.md)";
    return p;
  }
  // Group root owns files that matter (in /dev, /etc): keeping it is keeping
  // a privilege.
  if (target != nullptr && target->gid == 0 && (switching || group_explicit)) {
    p.refusal = "the group to become is root (gid 0), but the agent never keeps gid 0 after start-up: name an "
                "unprivileged --group (default the user's own)";
    return p;
  }
  if (switching) {
    if (target == nullptr) {
      p.refusal = "started with privileges but no user to become was resolved";
      return p;
    }
    if (!Has(now.effective, CAP_SETUID) || !Has(now.effective, CAP_SETGID)) {
      p.refusal = "started as uid " + Ids(now.ruid, now.euid, now.suid) +
                  " without CAP_SETUID and CAP_SETGID, so it cannot become user " + target->user +
                  "; start it as root with both, or as that user";
      return p;
    }
    p.kind = DropPlan::Kind::kSwitchUser;
    p.target = *target;
    return p;
  }
  // Unprivileged ids: nobody to become but ourselves.
  if (target != nullptr && ((user_explicit && target->uid != now.euid) ||
                            (group_explicit && target->gid != now.egid))) {
    p.refusal = "asked to run as user " + target->user + " group " + target->group + ", but started as uid " +
                std::to_string(now.euid) + " gid " + std::to_string(now.egid) +
                " without the right to switch (not root, no CAP_SETUID/CAP_SETGID): start it as root, or "
                "as that user, or leave --user/--group out";
    return p;
  }
  const uint64_t held = now.effective | now.permitted | now.inheritable | now.ambient;
  p.kind = held != 0 ? DropPlan::Kind::kCapabilitiesOnly : DropPlan::Kind::kNothing;
  return p;
}

std::string CheckDropped(const ProcessCredentials& after, const DropPlan& plan, const ProcessCredentials& before) {
  std::string diff;
  auto expect = [&](bool ok, const std::string& what) {
    if (!ok) diff += (diff.empty() ? "" : "; ") + what;
  };
  if (plan.kind == DropPlan::Kind::kSwitchUser) {
    const uid_t u = plan.target.uid;
    const gid_t g = plan.target.gid;
    expect(after.ruid == u && after.euid == u && after.suid == u,
           "uids are " + Ids(after.ruid, after.euid, after.suid) + ", not " + std::to_string(u));
    expect(after.rgid == g && after.egid == g && after.sgid == g,
           "gids are " + Ids(after.rgid, after.egid, after.sgid) + ", not " + std::to_string(g));
    expect(after.supplementary_groups == 0,
           std::to_string(after.supplementary_groups) + " supplementary groups remain");
    expect(!after.dumpable, "the process is still dumpable");
  } else {
    expect(after.ruid == before.ruid && after.euid == before.euid && after.suid == before.suid &&
               after.rgid == before.rgid && after.egid == before.egid && after.sgid == before.sgid,
           "the ids changed");
  }
  expect(after.effective == 0, "effective capabilities " + Hex(after.effective));
  expect(after.permitted == 0, "permitted capabilities " + Hex(after.permitted));
  expect(after.inheritable == 0, "inheritable capabilities " + Hex(after.inheritable));
  expect(after.ambient == 0, "ambient capabilities " + Hex(after.ambient));
  if (plan.clear_bounding) expect(after.bounding == 0, "bounding set " + Hex(after.bounding));
  expect(after.no_new_privs, "no_new_privs is not set");
  return diff;
}

bool DropPrivileges(const DropPlan& plan, std::string* error) {
  if (!plan.refusal.empty()) {
    *error = plan.refusal;
    return false;
  }
  const ProcessCredentials before = ReadCredentials();
  auto fail = [&](const std::string& what) {
    *error = "privilege drop failed: " + what;
    return false;
  };
  // The bounding set needs CAP_SETPCAP, which the uid switch takes away.
  if (plan.clear_bounding && !ClearBoundingSet()) return fail("cannot empty the bounding set: " + ErrnoText(errno));
  if (plan.kind == DropPlan::Kind::kSwitchUser) {
    // Groups first (setgroups and setgid need CAP_SETGID), the uid last:
    // after it no set*id call is allowed any more, and the kernel empties
    // the permitted and effective sets.
    if (setgroups(0, nullptr) != 0) return fail("setgroups(0): " + ErrnoText(errno));
    const gid_t g = plan.target.gid;
    if (setresgid(g, g, g) != 0) return fail("setresgid(" + plan.target.group + "): " + ErrnoText(errno));
    const uid_t u = plan.target.uid;
    if (setresuid(u, u, u) != 0) return fail("setresuid(" + plan.target.user + "): " + ErrnoText(errno));
  }
  std::string why;
  if (!ClearCapabilitySets(&why)) return fail(why);
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);  // EINVAL without ambient sets: nothing to clear
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return fail("prctl(PR_SET_NO_NEW_PRIVS): " + ErrnoText(errno));
  // The kernel makes a process that changed ids non-dumpable; say so
  // ourselves: no core with the key in it, no ptrace by other processes of
  // the same (shared) user.
  if (plan.kind == DropPlan::Kind::kSwitchUser && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
    return fail("prctl(PR_SET_DUMPABLE, 0): " + ErrnoText(errno));
  }
  if (const std::string diff = CheckDropped(ReadCredentials(), plan, before); !diff.empty()) {
    return fail("after the drop, " + diff);
  }
  const bool switched = plan.kind == DropPlan::Kind::kSwitchUser;
  if (const std::string t = OtherThreadsWithPrivilege(switched, plan.target.uid); !t.empty()) {
    return fail("threads " + t + " kept their privileges (drop before starting threads)");
  }
  return true;
}

std::string DescribeDrop(const DropPlan& plan, const ProcessCredentials& before) {
  switch (plan.kind) {
    case DropPlan::Kind::kSwitchUser:
      return "dropped privileges: now user " + plan.target.user + ", group " + plan.target.group +
             ", no supplementary groups, no capabilities" + (plan.clear_bounding ? ", empty bounding set" : "") +
             ", no_new_privs";
    case DropPlan::Kind::kCapabilitiesOnly:
      return "dropped every capability (staying uid " + std::to_string(before.euid) + " gid " +
             std::to_string(before.egid) + ": started unprivileged), no_new_privs";
    case DropPlan::Kind::kNothing:
      break;
  }
  return "nothing to drop: started as uid " + std::to_string(before.euid) + " gid " +
         std::to_string(before.egid) + " without capabilities";
}

}  // namespace chronolink
