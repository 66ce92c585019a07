// Loader of the test bed's probe-loss program. See probe_loss_loader.h and
// docs/testbed.md "Probe loss".
#include "tools/testbed/probe_loss/probe_loss_loader.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <net/if.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <vector>

// The skeleton refers to struct chronolink_loss_config (rodata), defined in
// bpf/probe_loss.h (included by the header above).
#include "probe_loss.skel.h"

#include "agent/capture/netlink_query.h"
#include "agent/capture/tc_filter.h"

namespace chronolink::testbed {

namespace {

// Our classic tc filter: one fixed handle and priority, next to the agent
// tap's 0xC1C1 (which runs first where both are classic, so the tap stamps
// a probe that this filter then loses, as a NIC stamps one the wire loses).
constexpr uint32_t kTcHandle = 0xC1C2;
constexpr uint32_t kTcPriority = 0xC1C2;
constexpr char kProgName[] = "chronolink_loss";
constexpr char kCountersMap[] = "loss_counters";

std::string Errno(int err) { return ErrnoText(err); }

// libbpf's warnings go into the error we return, never straight to stderr.
std::string g_libbpf_log;
int LibbpfPrint(enum libbpf_print_level level, const char* fmt, va_list args) {
  if (level == LIBBPF_DEBUG || g_libbpf_log.size() > 4096) return 0;
  char buf[1024];
  vsnprintf(buf, sizeof(buf), fmt, args);
  std::string line(buf);
  while (!line.empty() && line.back() == '\n') line.pop_back();
  if (!g_libbpf_log.empty()) g_libbpf_log += "; ";
  g_libbpf_log += line;
  return 0;
}

bpf_tc_hook EgressHook(int ifindex) { return TcHook(ifindex, BPF_TC_EGRESS); }

bpf_tc_opts OurOpts() { return TcFilterOpts(kTcHandle, kTcPriority); }

// Every entry point resolves its device first: libbpf's print hook goes in
// here (bpf_tc_query on a device without clsact logs a kernel message).
bool ResolveDevice(const std::string& device, int* ifindex, std::string* error) {
  libbpf_set_print(LibbpfPrint);
  if (device.empty() || device.size() >= IF_NAMESIZE) {
    *error = "bad device name '" + device + "'";
    return false;
  }
  const unsigned idx = if_nametoindex(device.c_str());
  if (idx == 0) {
    *error = "no network device '" + device + "' in this network namespace (" + Errno(errno) + ")";
    return false;
  }
  *ifindex = static_cast<int>(idx);
  return true;
}

// Program id of our filter on the device's egress, 0 if none.
uint32_t QueryOurFilter(int ifindex) {
  bpf_tc_hook hook = EgressHook(ifindex);
  bpf_tc_opts opts = OurOpts();
  if (bpf_tc_query(&hook, &opts) != 0) return 0;
  return opts.prog_id;
}

struct ProgMaps {
  std::string prog_name;
  int counters_fd = -1;
  int rodata_fd = -1;
  ~ProgMaps() {
    if (counters_fd >= 0) close(counters_fd);
    if (rodata_fd >= 0) close(rodata_fd);
  }
};

// The counters and rodata maps of a loaded program, by their names.
bool FindProgMaps(uint32_t prog_id, ProgMaps* out, std::string* error) {
  const int pfd = bpf_prog_get_fd_by_id(prog_id);
  if (pfd < 0) {
    *error = "cannot open program " + std::to_string(prog_id) + ": " + Errno(errno);
    return false;
  }
  std::vector<uint32_t> ids(16);
  bpf_prog_info info{};
  info.nr_map_ids = static_cast<uint32_t>(ids.size());
  info.map_ids = reinterpret_cast<uint64_t>(ids.data());
  uint32_t len = sizeof(info);
  const int r = bpf_obj_get_info_by_fd(pfd, &info, &len);
  close(pfd);
  if (r != 0) {
    *error = "cannot read program " + std::to_string(prog_id) + ": " + Errno(errno);
    return false;
  }
  out->prog_name = info.name;
  ids.resize(std::min<uint32_t>(info.nr_map_ids, ids.size()));
  for (uint32_t id : ids) {
    const int mfd = bpf_map_get_fd_by_id(id);
    if (mfd < 0) continue;
    bpf_map_info mi{};
    uint32_t mlen = sizeof(mi);
    const std::string name = bpf_obj_get_info_by_fd(mfd, &mi, &mlen) == 0 ? mi.name : "";
    if (name == kCountersMap && out->counters_fd < 0) {
      out->counters_fd = mfd;
    } else if (name.size() > 7 && name.compare(name.size() - 7, 7, ".rodata") == 0 &&
               mi.value_size >= sizeof(chronolink_loss_config) && out->rodata_fd < 0) {
      out->rodata_fd = mfd;
    } else {
      close(mfd);
    }
  }
  return true;
}

bool ReadCounters(int fd, ProbeLossStats* out, std::string* error) {
  const int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) {
    *error = "cannot count the possible CPUs: " + Errno(cpus);
    return false;
  }
  std::vector<chronolink_loss_count> per_cpu(static_cast<size_t>(cpus));
  for (uint32_t slot = 0; slot < CHRONOLINK_LOSS_SLOTS; ++slot) {
    if (bpf_map_lookup_elem(fd, &slot, per_cpu.data()) != 0) {
      *error = "cannot read the counters: " + Errno(errno);
      return false;
    }
    chronolink_loss_count sum{};
    for (const auto& c : per_cpu) {
      sum.seen += c.seen;
      sum.dropped += c.dropped;
    }
    out->by_slot[slot] = sum;
  }
  return true;
}

uint64_t NsInode(const char* path) {
  struct stat st {};
  return stat(path, &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

// bpffs at /sys/fs/bpf, mounting it where it is missing (as bpftool does).
// Not in a mount namespace of our own: `ip netns exec` makes one with a
// private /sys, where a bpffs (and the pin) would die with this process.
bool EnsureBpffs(const std::string& pin_root, std::string* note) {
  const std::string base = "/sys/fs/bpf";
  if (pin_root.rfind(base, 0) != 0) return true;  // a caller's own bpffs
  struct statfs fs {};
  if (statfs(base.c_str(), &fs) == 0 && static_cast<unsigned long>(fs.f_type) == BPF_FS_MAGIC)
    return true;
  if (NsInode("/proc/self/ns/mnt") != NsInode("/proc/1/ns/mnt")) {
    *note = "counters not pinned: " + base + " is no bpffs in this private mount namespace (`ip "
            "netns exec`?); stats reads them through the attached filter, or use --netns";
    return false;
  }
  if (mount("bpf", base.c_str(), "bpf", 0, "mode=0700") != 0) {
    *note = "counters not pinned: " + base + " is no bpffs and mounting one failed: " + Errno(errno);
    return false;
  }
  return true;
}

uint64_t NetnsInode() {
  const uint64_t ino = NsInode("/proc/thread-self/ns/net");
  return ino != 0 ? ino : NsInode("/proc/self/ns/net");
}

}  // namespace

bool ParseProbeLossTypes(const std::string& list, uint32_t* mask, std::string* error) {
  uint32_t m = 0;
  std::stringstream ss(list);
  std::string item;
  int items = 0;
  while (std::getline(ss, item, ',')) {
    ++items;
    if (item == "all") {
      m |= CHRONOLINK_LOSS_ALL_TYPES;
      continue;
    }
    bool found = false;
    for (int slot = 1; slot < CHRONOLINK_LOSS_SLOTS; ++slot) {
      if (item == ProbeLossTypeName(slot)) {
        m |= 1u << slot;
        found = true;
      }
    }
    if (!found) {
      *error = "unknown probe type '" + item + "' (forward, reverse, followup, pilot or all)";
      return false;
    }
  }
  if (items == 0 || m == 0) {
    *error = "no probe types given (forward, reverse, followup, pilot or all)";
    return false;
  }
  *mask = m;
  return true;
}

std::string ProbeLossTypeName(int slot) {
  switch (slot) {
    case CHRONOLINK_LOSS_TYPE_FORWARD: return "forward";
    case CHRONOLINK_LOSS_TYPE_REVERSE: return "reverse";
    case CHRONOLINK_LOSS_TYPE_FOLLOWUP: return "followup";
    case CHRONOLINK_LOSS_TYPE_PILOT: return "pilot";
    default: return "other";
  }
}

bool ProbeLossFractionToPpm(double fraction, uint32_t* ppm, std::string* error) {
  if (!std::isfinite(fraction) || fraction < 0 || fraction > 1) {
    *error = "the drop fraction must be a number in [0, 1]";
    return false;
  }
  *ppm = static_cast<uint32_t>(std::llround(fraction * 1e6));
  return true;
}

std::string ProbeLossPinPath(const std::string& root, const std::string& device) {
  return root + "/" + std::to_string(NetnsInode()) + "-" + device;
}

bool EnterNetns(const std::string& name_or_path, std::string* error) {
  const std::string path =
      name_or_path.find('/') == std::string::npos ? "/run/netns/" + name_or_path : name_or_path;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = "no network namespace " + path + " (" + Errno(errno) + ")";
    return false;
  }
  const int r = setns(fd, CLONE_NEWNET);
  const int err = errno;
  close(fd);
  if (r != 0) {
    *error = "cannot enter the network namespace " + path + ": " + Errno(err);
    return false;
  }
  return true;
}

bool AttachProbeLoss(const ProbeLossConfig& config, ProbeLossAttachment* out, std::string* error) {
  *out = {};
  uint32_t ppm = 0;
  if (!ProbeLossFractionToPpm(config.fraction, &ppm, error)) return false;
  if ((config.type_mask & ~static_cast<uint32_t>(CHRONOLINK_LOSS_ALL_TYPES)) != 0 ||
      config.type_mask == 0) {
    *error = "bad probe type mask";
    return false;
  }
  if (!ResolveDevice(config.device, &out->ifindex, error)) return false;
  g_libbpf_log.clear();

  probe_loss_bpf* skel = probe_loss_bpf__open();
  if (skel == nullptr) {
    *error = "cannot open the BPF object: " + Errno(errno);
    return false;
  }
  skel->rodata->loss_config.udp_port = config.port;
  skel->rodata->loss_config.pad = 0;
  skel->rodata->loss_config.magic = config.magic;
  skel->rodata->loss_config.drop_ppm = ppm;
  skel->rodata->loss_config.type_mask = config.type_mask;
  int r = probe_loss_bpf__load(skel);
  if (r != 0) {
    *error = "loading the BPF program failed: " + Errno(r) +
             (r == -EPERM || r == -EACCES ? " (needs CAP_BPF and CAP_NET_ADMIN, or root)" : "") +
             (g_libbpf_log.empty() ? "" : ": " + g_libbpf_log);
    probe_loss_bpf__destroy(skel);
    return false;
  }

  bpf_tc_hook hook = EgressHook(out->ifindex);
  r = bpf_tc_hook_create(&hook);  // the clsact qdisc
  if (r != 0 && r != -EEXIST) {
    *error = "cannot create the clsact qdisc on " + config.device + ": " + Errno(r);
    probe_loss_bpf__destroy(skel);
    return false;
  }
  const uint32_t old_id = QueryOurFilter(out->ifindex);
  if (old_id != 0) {
    ProgMaps old;
    std::string ignored;
    FindProgMaps(old_id, &old, &ignored);
    if (old.prog_name != kProgName) {
      *error = "the tc filter at handle/priority 0xC1C2 on " + config.device + " egress runs '" +
               old.prog_name + "', not ours: left alone";
      probe_loss_bpf__destroy(skel);
      return false;
    }
    out->replaced = true;
  }
  bpf_tc_opts opts = OurOpts();
  opts.prog_fd = bpf_program__fd(skel->progs.chronolink_loss);
  opts.flags = BPF_TC_F_REPLACE;
  r = bpf_tc_attach(&hook, &opts);
  if (r != 0) {
    *error = "cannot attach the tc filter on " + config.device + " egress: " + Errno(r);
    probe_loss_bpf__destroy(skel);
    return false;
  }
  out->prog_id = opts.prog_id;

  // Pin the counters; a stale pin of a replaced program goes first.
  const std::string pin = ProbeLossPinPath(config.pin_root, config.device);
  if (EnsureBpffs(config.pin_root, &out->note)) {
    std::error_code ec;
    std::filesystem::create_directories(config.pin_root, ec);
    unlink(pin.c_str());
    r = bpf_map__pin(skel->maps.loss_counters, pin.c_str());
    if (r == 0) {
      out->pin_path = pin;
    } else {
      out->note = "counters not pinned at " + pin + ": " + Errno(r);
    }
  }
  // The filter holds the program, the program and the pin hold the map.
  probe_loss_bpf__destroy(skel);
  return true;
}

bool ReadProbeLossStats(const std::string& device, const std::string& pin_root, ProbeLossStats* out,
                        std::string* error) {
  *out = {};
  int ifindex = 0;
  if (!ResolveDevice(device, &ifindex, error)) return false;
  out->pin_path = ProbeLossPinPath(pin_root, device);
  out->prog_id = QueryOurFilter(ifindex);
  ProgMaps maps;
  if (out->prog_id != 0) {
    if (!FindProgMaps(out->prog_id, &maps, error)) return false;
    out->attached = maps.prog_name == kProgName;
    if (out->attached && maps.rodata_fd >= 0) {
      std::vector<uint8_t> value(4096);
      uint32_t key = 0;
      if (bpf_map_lookup_elem(maps.rodata_fd, &key, value.data()) == 0) {
        std::memcpy(&out->config, value.data(), sizeof(out->config));
        out->have_config = true;
      }
    }
  }
  const int pinned = bpf_obj_get(out->pin_path.c_str());
  if (pinned >= 0) {
    out->counters_from = "pin";
    const bool ok = ReadCounters(pinned, out, error);
    close(pinned);
    return ok;
  }
  out->pin_path.clear();
  if (out->attached && maps.counters_fd >= 0) {
    out->counters_from = "filter";
    return ReadCounters(maps.counters_fd, out, error);
  }
  return true;  // nothing attached, nothing pinned: all zero
}

bool DetachProbeLoss(const std::string& device, const std::string& pin_root, std::string* what,
                     std::string* error) {
  what->clear();
  int ifindex = 0;
  if (!ResolveDevice(device, &ifindex, error)) return false;
  const uint32_t id = QueryOurFilter(ifindex);
  if (id != 0) {
    ProgMaps maps;
    if (!FindProgMaps(id, &maps, error)) return false;
    if (maps.prog_name != kProgName) {
      *error = "the tc filter at handle/priority 0xC1C2 on " + device + " egress runs '" +
               maps.prog_name + "', not ours: left alone";
      return false;
    }
    bpf_tc_hook hook = EgressHook(ifindex);
    bpf_tc_opts opts = OurOpts();
    const int r = bpf_tc_detach(&hook, &opts);
    if (r != 0 && r != -ENOENT) {
      *error = "cannot remove the tc filter on " + device + " egress: " + Errno(r);
      return false;
    }
    *what = "filter (program " + std::to_string(id) + ")";
    // The clsact qdisc goes too when nothing else is on it (deleting it
    // would delete anyone else's filters with it).
    std::string ignored;
    if (CountTcFilters(ifindex, kClsactIngressParent, &ignored) == 0 &&
        CountTcFilters(ifindex, kClsactEgressParent, &ignored) == 0) {
      bpf_tc_hook both = EgressHook(ifindex);
      both.attach_point = static_cast<bpf_tc_attach_point>(BPF_TC_INGRESS | BPF_TC_EGRESS);
      if (bpf_tc_hook_destroy(&both) == 0) *what += ", empty clsact qdisc";
    }
  }
  const std::string pin = ProbeLossPinPath(pin_root, device);
  if (unlink(pin.c_str()) == 0) {
    *what += std::string(what->empty() ? "" : ", ") + "pin " + pin;
  } else if (errno != ENOENT) {
    *error = "cannot remove the pin " + pin + ": " + Errno(errno);
    return false;
  }
  return true;
}

}  // namespace chronolink::testbed
