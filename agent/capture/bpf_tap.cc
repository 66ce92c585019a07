// Loader of the eBPF timestamp tap. See bpf_tap.h and docs/bpf-tap.md.
#include "agent/capture/bpf_tap.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/ethtool.h>
#include <linux/if_link.h>
#include <linux/net_tstamp.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <spdlog/spdlog.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>

// The generated skeleton refers to struct chronolink_tap_config (rodata),
// which bpf/probe_tap.h (included by bpf_tap.h) defines.
#include "probe_tap.skel.h"

#include "agent/capture/netlink_query.h"
#include "agent/capture/tc_filter.h"

namespace chronolink {

namespace {

// Not in the 6.1 uapi headers this builds against (and libbpf 1.1 has no
// tcx API): tcx attach types and the device-bound program flag.
constexpr int kBpfTcxIngress = 46;
constexpr int kBpfTcxEgress = 47;
constexpr uint32_t kBpfFXdpDevBoundOnly = 1u << 6;

// Fixed handle and priority of our classic tc filters: the stale-hook
// cleanup looks there and nowhere else.
constexpr uint32_t kTcHandle = 0xC1C1;
constexpr uint32_t kTcPriority = 0xC1C1;

constexpr char kProgPrefix[] = "chronolink_";

std::string Errno(int err) { return ErrnoText(err); }

// ---- libbpf log capture: libbpf's own messages go to the error we return
// (last few warnings) and to spdlog's debug level, never straight to stderr.

thread_local std::string* t_capture = nullptr;

int LibbpfPrint(enum libbpf_print_level level, const char* fmt, va_list args) {
  char buf[1024];
  vsnprintf(buf, sizeof(buf), fmt, args);
  std::string line(buf);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  if (level != LIBBPF_DEBUG && t_capture != nullptr) {
    if (t_capture->size() < 4096) {
      if (!t_capture->empty()) *t_capture += "; ";
      *t_capture += line;
    }
  }
  if (level == LIBBPF_DEBUG) {
    spdlog::trace("libbpf: {}", line);
  } else {
    spdlog::debug("libbpf: {}", line);
  }
  return 0;
}

void InstallLibbpfPrint() {
  static std::once_flag once;
  std::call_once(once, [] { libbpf_set_print(LibbpfPrint); });
}

struct LogCapture {
  std::string text;
  std::string* prev;
  LogCapture() : prev(t_capture) { t_capture = &text; }
  ~LogCapture() { t_capture = prev; }
  std::string Take() {
    std::string s;
    s.swap(text);
    return s;
  }
};

// ---- program info

std::string ProgName(uint32_t prog_id) {
  const int fd = bpf_prog_get_fd_by_id(prog_id);
  if (fd < 0) return "";
  bpf_prog_info info{};
  uint32_t len = sizeof(info);
  std::string name;
  if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0) name = info.name;
  close(fd);
  return name;
}

bool IsOurs(const std::string& prog_name) {
  return prog_name.rfind(kProgPrefix, 0) == 0;
}

uint32_t ProgIdOfFd(int fd) {
  bpf_prog_info info{};
  uint32_t len = sizeof(info);
  if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len) != 0) return 0;
  return info.id;
}

bpf_tc_opts TcOpts() { return TcFilterOpts(kTcHandle, kTcPriority); }

// Program id of the classic tc filter at our handle/priority, 0 if none.
uint32_t QueryClassicTc(int ifindex, bpf_tc_attach_point point) {
  bpf_tc_hook hook = TcHook(ifindex, point);
  bpf_tc_opts opts = TcOpts();
  if (bpf_tc_query(&hook, &opts) != 0) return 0;
  return opts.prog_id;
}

std::vector<uint32_t> QueryTcx(int ifindex, int attach_type, int* err) {
  std::vector<uint32_t> ids(64);
  struct bpf_prog_query_opts q {};
  q.sz = sizeof(q);
  q.prog_ids = ids.data();
  q.prog_cnt = static_cast<uint32_t>(ids.size());
  const int r = bpf_prog_query_opts(ifindex, static_cast<bpf_attach_type>(attach_type), &q);
  if (r != 0) {
    *err = -errno;
    return {};
  }
  *err = 0;
  ids.resize(std::min<uint32_t>(q.prog_cnt, ids.size()));
  return ids;
}

uint32_t CurrentNetnsInode() {
  struct stat st {};
  if (stat("/proc/thread-self/ns/net", &st) != 0 && stat("/proc/self/ns/net", &st) != 0) return 0;
  return static_cast<uint32_t>(st.st_ino);
}

// What the device says about RX hardware timestamps, and its driver.
struct DeviceTimestamping {
  bool rx_hardware = false;
  std::string driver;
};

DeviceTimestamping QueryDeviceTimestamping(const std::string& ifname) {
  DeviceTimestamping d;
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return d;
  ifreq ifr{};
  std::snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname.c_str());
  ethtool_drvinfo drv{};
  drv.cmd = ETHTOOL_GDRVINFO;
  ifr.ifr_data = reinterpret_cast<char*>(&drv);
  if (ioctl(fd, SIOCETHTOOL, &ifr) == 0) d.driver = drv.driver;
  ethtool_ts_info ts{};
  ts.cmd = ETHTOOL_GET_TS_INFO;
  ifr.ifr_data = reinterpret_cast<char*>(&ts);
  if (ioctl(fd, SIOCETHTOOL, &ifr) == 0) {
    d.rx_hardware = (ts.so_timestamping & SOF_TIMESTAMPING_RX_HARDWARE) != 0;
  }
  close(fd);
  if (d.driver.empty() && ifname == "lo") d.driver = "loopback";
  return d;
}

// Checks the options and resolves every device first: a name that does not
// exist is a configuration error, not a partial success. Repeats are dropped.
bool ResolveDevices(const BpfTapOptions& o, std::vector<std::pair<std::string, int>>* devs, std::string* error) {
  if (o.interfaces.empty()) {
    *error = "eBPF tap: no interfaces to hook";
    return false;
  }
  if (o.tc_mode != "auto" && o.tc_mode != "tcx" && o.tc_mode != "classic") {
    *error = "eBPF tap: tc_mode must be auto, tcx or classic, not '" + o.tc_mode + "'";
    return false;
  }
  for (const auto& name : o.interfaces) {
    const unsigned idx = if_nametoindex(name.c_str());
    if (idx == 0) {
      *error = "eBPF tap: no network device '" + name + "' in this network namespace (" + Errno(errno) + ")";
      return false;
    }
    bool dup = false;
    for (const auto& [n, i] : *devs) dup |= (i == static_cast<int>(idx));
    if (!dup) devs->emplace_back(name, static_cast<int>(idx));
  }
  return true;
}

}  // namespace

struct BpfTap::Impl {
  struct Device {
    std::string name;
    int ifindex = 0;
    int tcx_ingress_fd = -1;
    int tcx_egress_fd = -1;
    bool tc_ingress = false;  // classic filters we added
    bool tc_egress = false;
    bool created_clsact = false;
    bpf_link* xdp_link = nullptr;
    probe_tap_bpf* hw_skel = nullptr;  // device-bound XDP object of this device
  };

  probe_tap_bpf* skel = nullptr;
  ring_buffer* rb = nullptr;
  bpf_link* dev_xmit_link = nullptr;
  std::vector<Device> devices;
  TcNetlink tc_nl;  // classic tc only: opened in the namespace of the devices
  uint64_t records = 0;
  const RecordSink* sink = nullptr;

  static int OnRecord(void* ctx, void* data, size_t size) {
    auto* self = static_cast<Impl*>(ctx);
    if (size < sizeof(chronolink_tap_record)) return 0;
    chronolink_tap_record rec;
    std::memcpy(&rec, data, sizeof(rec));
    ++self->records;
    if (self->sink != nullptr && *self->sink) (*self->sink)(rec);
    return 0;
  }

  void CloseDevice(Device& d) {
    if (d.xdp_link != nullptr) bpf_link__destroy(d.xdp_link);
    d.xdp_link = nullptr;
    if (d.hw_skel != nullptr) probe_tap_bpf__destroy(d.hw_skel);
    d.hw_skel = nullptr;
    if (d.tcx_ingress_fd >= 0) close(d.tcx_ingress_fd);
    if (d.tcx_egress_fd >= 0) close(d.tcx_egress_fd);
    d.tcx_ingress_fd = d.tcx_egress_fd = -1;
    // Classic filters: through the netlink socket opened at attach time, so
    // this works from any thread and namespace.
    bool all_detached = true;
    for (auto [parent, attached] : {std::pair{kClsactIngressParent, &d.tc_ingress},
                                    std::pair{kClsactEgressParent, &d.tc_egress}}) {
      if (!*attached) continue;
      const int r = tc_nl.DeleteBpfFilter(d.ifindex, parent, kTcHandle, kTcPriority);
      if (r != 0 && r != -ENOENT) {
        all_detached = false;
        spdlog::warn("bpf tap: could not remove the classic tc filter on {} ({}); the next "
                     "start removes it", d.name, Errno(r));
      }
      *attached = false;
    }
    if (d.created_clsact && all_detached) {
      // Remove the clsact qdisc we created, but only while it is empty: a
      // filter someone else added since must survive (deleting the qdisc
      // deletes every filter on it).
      std::string err;
      if (tc_nl.CountFilters(d.ifindex, kClsactIngressParent, &err) == 0 &&
          tc_nl.CountFilters(d.ifindex, kClsactEgressParent, &err) == 0) {
        tc_nl.DeleteClsact(d.ifindex);
      }
    }
    d.created_clsact = false;
  }

  void CloseAll() {
    if (dev_xmit_link != nullptr) bpf_link__destroy(dev_xmit_link);
    dev_xmit_link = nullptr;
    for (auto& d : devices) CloseDevice(d);
    devices.clear();
    if (rb != nullptr) ring_buffer__free(rb);
    rb = nullptr;
    if (skel != nullptr) probe_tap_bpf__destroy(skel);
    skel = nullptr;
  }

  void Configure(probe_tap_bpf* s, const BpfTapOptions& o, uint32_t netns_ino) {
    s->rodata->tap_config.udp_port = o.udp_port;
    s->rodata->tap_config.pad = 0;
    s->rodata->tap_config.magic = o.magic;
    s->rodata->tap_config.cluster_id = o.cluster_id;
    s->rodata->tap_config.netns_ino = netns_ino;
  }

  // Classic tc on one device: clsact (create if missing) + our two filters.
  bool AttachClassicTc(Device& d, BpfTapAttachment* a, std::string* why) {
    if (!tc_nl.Open(why)) return false;  // needed to detach later, from anywhere
    bpf_tc_hook both = TcHook(d.ifindex, static_cast<bpf_tc_attach_point>(BPF_TC_INGRESS |
                                                                          BPF_TC_EGRESS));
    int r = bpf_tc_hook_create(&both);
    if (r == 0) {
      d.created_clsact = true;
    } else if (r != -EEXIST) {
      *why = "cannot create the clsact qdisc: " + Errno(r);
      return false;
    }
    struct Item {
      bpf_tc_attach_point point;
      bpf_program* prog;
      bool* flag;
      bool* out;
    };
    for (const Item& it : {Item{BPF_TC_EGRESS, skel->progs.chronolink_tc_egress, &d.tc_egress,
                                &a->tc_egress},
                           Item{BPF_TC_INGRESS, skel->progs.chronolink_tc_ingress,
                                &d.tc_ingress, &a->tc_ingress}}) {
      bpf_tc_hook hook = TcHook(d.ifindex, it.point);
      bpf_tc_opts opts = TcOpts();
      opts.prog_fd = bpf_program__fd(it.prog);
      r = bpf_tc_attach(&hook, &opts);
      if (r != 0) {
        *why += std::string(why->empty() ? "" : "; ") + "classic tc " +
                (it.point == BPF_TC_EGRESS ? "egress" : "ingress") + " attach failed: " +
                Errno(r) +
                (r == -EEXIST ? " (another filter holds handle/priority 0xC1C1)" : "");
        continue;
      }
      *it.flag = true;
      *it.out = true;
    }
    return a->tc_egress || a->tc_ingress;
  }

  bool AttachTcx(Device& d, BpfTapAttachment* a, std::string* why) {
    const int eg = bpf_link_create(bpf_program__fd(skel->progs.chronolink_tc_egress), d.ifindex,
                                   static_cast<bpf_attach_type>(kBpfTcxEgress), nullptr);
    if (eg < 0) {
      *why = "tcx egress: " + Errno(errno);
      return false;
    }
    const int in = bpf_link_create(bpf_program__fd(skel->progs.chronolink_tc_ingress),
                                   d.ifindex, static_cast<bpf_attach_type>(kBpfTcxIngress),
                                   nullptr);
    if (in < 0) {
      *why = "tcx ingress: " + Errno(errno);
      close(eg);
      return false;
    }
    d.tcx_egress_fd = eg;
    d.tcx_ingress_fd = in;
    a->tc_egress = a->tc_ingress = true;
    return true;
  }

  // Device-bound XDP with the NIC RX stamp: a second instance of the same
  // object, loaded for this one device, sharing the ring buffer and the
  // counters of the main object. Returns false (with *why) to fall back to
  // the plain XDP program.
  bool AttachXdpHw(Device& d, const BpfTapOptions& o, uint32_t netns_ino, std::string* why) {
    LogCapture cap;
    probe_tap_bpf* hw = probe_tap_bpf__open();
    if (hw == nullptr) {
      *why = "device-bound XDP: open failed: " + Errno(errno);
      return false;
    }
    Configure(hw, o, netns_ino);
    bpf_program* p;
    bpf_object__for_each_program(p, hw->obj) bpf_program__set_autoload(p, false);
    bpf_program__set_autoload(hw->progs.chronolink_xdp_hw, true);
    bpf_program__set_ifindex(hw->progs.chronolink_xdp_hw, static_cast<uint32_t>(d.ifindex));
    bpf_program__set_flags(hw->progs.chronolink_xdp_hw,
                           bpf_program__flags(hw->progs.chronolink_xdp_hw) | kBpfFXdpDevBoundOnly);
    int r = bpf_map__reuse_fd(hw->maps.tap_records, bpf_map__fd(skel->maps.tap_records));
    if (r == 0) r = bpf_map__reuse_fd(hw->maps.tap_counters, bpf_map__fd(skel->maps.tap_counters));
    if (r == 0) r = probe_tap_bpf__load(hw);
    if (r != 0) {
      *why = "device-bound XDP: load failed: " + Errno(r) + " " + cap.Take();
      probe_tap_bpf__destroy(hw);
      return false;
    }
    bpf_link* link = bpf_program__attach_xdp(hw->progs.chronolink_xdp_hw, d.ifindex);
    if (link == nullptr) {
      *why = "device-bound XDP: attach failed: " + Errno(errno) + " " + cap.Take();
      probe_tap_bpf__destroy(hw);
      return false;
    }
    d.hw_skel = hw;
    d.xdp_link = link;
    return true;
  }

  // Opens and loads the object (the XDP program only when asked) and maps
  // the ring buffer. A kernel without tp_btf for net_dev_start_xmit
  // refuses that program: load once more without it, *dev_xmit false and
  // the reason in *note.
  bool Load(const BpfTapOptions& o, uint32_t netns_ino, bool* dev_xmit, std::string* note, std::string* error) {
    LogCapture cap;
    for (int attempt = 0;; ++attempt) {
      skel = probe_tap_bpf__open();
      if (skel == nullptr) {
        *error = "eBPF tap: cannot open the BPF object: " + Errno(errno);
        return false;
      }
      Configure(skel, o, netns_ino);
      bpf_program__set_autoload(skel->progs.chronolink_xdp_hw, false);
      bpf_program__set_autoload(skel->progs.chronolink_xdp, o.attach_xdp);
      bpf_program__set_autoload(skel->progs.chronolink_dev_xmit, *dev_xmit);
      const int r = probe_tap_bpf__load(skel);
      if (r == 0) break;
      const std::string log = cap.Take();
      probe_tap_bpf__destroy(skel);
      skel = nullptr;
      if (r == -EPERM || r == -EACCES) {
        *error = "eBPF tap: loading BPF programs was refused (" + Errno(r) +
                 "): the tap needs CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN (or root)";
        return false;
      }
      if (*dev_xmit && attempt == 0 && log.find("chronolink_dev_xmit") != std::string::npos) {
        *dev_xmit = false;
        *note = "tp_btf/net_dev_start_xmit unavailable (" + Errno(r) + ")";
        continue;
      }
      *error = "eBPF tap: loading the BPF programs failed: " + Errno(r) + (log.empty() ? "" : ": ") + log;
      return false;
    }
    rb = ring_buffer__new(bpf_map__fd(skel->maps.tap_records), &Impl::OnRecord, this, nullptr);
    if (rb == nullptr) {
      *error = "eBPF tap: cannot map the ring buffer: " + Errno(errno);
      CloseAll();
      return false;
    }
    return true;
  }

  // tc: tcx links where the kernel has them (6.6+), classic cls_bpf otherwise.
  void AttachTc(Device& d, const BpfTapOptions& o, BpfTapAttachment* a, std::vector<std::string>* notes) {
    std::string why;
    if (o.tc_mode != "classic" && AttachTcx(d, a, &why)) {
      a->tc_mode = "tcx";
      return;
    }
    if (o.tc_mode == "tcx") {
      notes->push_back("tcx unavailable (" + why + "), tc_mode=tcx: no tc hooks");
      return;
    }
    if (!why.empty()) notes->push_back("tcx unavailable (" + why + "), using classic tc");
    std::string classic_why;
    if (AttachClassicTc(d, a, &classic_why)) a->tc_mode = "tc";
    if (!classic_why.empty()) notes->push_back(classic_why);
  }

  // XDP, unless another program holds the device or it is a veth (where
  // XDP would delay every RX stamp): device-bound with the NIC's RX stamp
  // where the device has one, else the plain program.
  void AttachXdp(Device& d, const BpfTapOptions& o, uint32_t netns_ino, BpfTapAttachment* a,
                 std::vector<std::string>* notes) {
    bpf_xdp_query_opts q{};
    q.sz = sizeof(q);
    uint32_t owner = 0;
    if (bpf_xdp_query(d.ifindex, 0, &q) == 0) {
      owner = q.prog_id ? q.prog_id : (q.drv_prog_id ? q.drv_prog_id : q.skb_prog_id);
    }
    const DeviceTimestamping ts = QueryDeviceTimestamping(d.name);
    const std::string driver = ts.driver.empty() ? "unknown driver" : ts.driver;
    if (owner != 0) {
      notes->push_back("XDP on " + d.name + " is taken by program '" + ProgName(owner) + "' (id " +
                       std::to_string(owner) + "): left alone, no XDP stamps there");
      return;
    }
    if (!o.xdp_on_veth && ts.driver == "veth") {
      notes->push_back("no XDP on " + d.name + " (veth): XDP would move its receive path into "
                       "NAPI and delay every RX stamp; tc ingress is the earliest RX hook there");
      return;
    }
    if (ts.rx_hardware || o.force_device_bound_xdp) {
      std::string why;
      if (AttachXdpHw(d, o, netns_ino, &why)) {
        a->xdp = true;
        a->xdp_hw_rx_timestamp = ts.rx_hardware;
        if (!ts.rx_hardware) {
          notes->push_back("device-bound XDP forced on " + d.name + " (" + driver +
                           "), which reports no RX hardware timestamps: hw_rx_ns stays 0");
        }
        return;
      }
      notes->push_back(why + "; using plain XDP");
    } else {
      notes->push_back("no RX hardware timestamp on " + d.name + " (" + driver + ")");
    }
    d.xdp_link = bpf_program__attach_xdp(skel->progs.chronolink_xdp, d.ifindex);
    if (d.xdp_link != nullptr) {
      a->xdp = true;
    } else {
      notes->push_back("XDP attach failed on " + d.name + ": " + Errno(errno));
    }
  }

  // The driver-level TX stamp (tp_btf/net_dev_start_xmit). False, with the
  // reason in *note, when it cannot attach.
  bool AttachDevXmit(std::string* note) {
    dev_xmit_link = bpf_program__attach(skel->progs.chronolink_dev_xmit);
    if (dev_xmit_link == nullptr) {
      *note = "tp_btf/net_dev_start_xmit attach failed: " + Errno(errno);
      return false;
    }
    return true;
  }
};

BpfTap::BpfTap() : impl_(std::make_unique<Impl>()) {}
BpfTap::~BpfTap() { Close(); }

bool BpfTap::is_open() const { return impl_->skel != nullptr; }

void BpfTap::Close() {
  impl_->CloseAll();
  attachments_.clear();
}

bool BpfTap::Open(const BpfTapOptions& options, std::string* error) {
  Close();
  InstallLibbpfPrint();
  std::vector<std::pair<std::string, int>> devs;
  if (!ResolveDevices(options, &devs, error)) return false;
  const uint32_t netns_ino = CurrentNetnsInode();
  Impl& im = *impl_;
  bool dev_xmit = options.attach_dev_xmit;
  std::string dev_xmit_note;
  if (!im.Load(options, netns_ino, &dev_xmit, &dev_xmit_note, error)) return false;

  int hooks = 0;
  im.devices.reserve(devs.size());
  for (const auto& [name, ifindex] : devs) {
    BpfTapAttachment a;
    a.interface = name;
    a.ifindex = ifindex;
    std::vector<std::string> notes;
    std::string stale_log;
    if (RemoveStaleHooks(ifindex, &stale_log) > 0) notes.push_back(stale_log);
    im.devices.emplace_back();
    Impl::Device& d = im.devices.back();
    d.name = name;
    d.ifindex = ifindex;
    im.AttachTc(d, options, &a, &notes);
    if (options.attach_xdp) im.AttachXdp(d, options, netns_ino, &a, &notes);
    hooks += (a.tc_egress ? 1 : 0) + (a.tc_ingress ? 1 : 0) + (a.xdp ? 1 : 0);
    for (size_t i = 0; i < notes.size(); ++i) a.note += (i ? "; " : "") + notes[i];
    attachments_.push_back(std::move(a));
  }
  if (dev_xmit && im.AttachDevXmit(&dev_xmit_note)) ++hooks;
  if (!dev_xmit_note.empty()) {
    for (auto& a : attachments_) a.note += (a.note.empty() ? "" : "; ") + dev_xmit_note;
  }
  if (hooks == 0) {
    std::string all;
    for (const auto& a : attachments_) all += " [" + a.interface + ": " + a.note + "]";
    *error = "eBPF tap: nothing could be attached:" + all;
    Close();
    return false;
  }
  return true;
}

int BpfTap::Consume(const RecordSink& sink) {
  Impl& im = *impl_;
  if (im.rb == nullptr) return 0;
  im.sink = &sink;
  const uint64_t before = im.records;
  ring_buffer__consume(im.rb);
  im.sink = nullptr;
  return static_cast<int>(im.records - before);
}

BpfTapCounters BpfTap::counters() const {
  BpfTapCounters c;
  const Impl& im = *impl_;
  c.records = im.records;
  if (im.skel == nullptr) return c;
  const int fd = bpf_map__fd(im.skel->maps.tap_counters);
  const int ncpu = libbpf_num_possible_cpus();
  if (fd < 0 || ncpu <= 0) return c;
  std::vector<uint64_t> vals(static_cast<size_t>(ncpu));
  uint64_t* out[] = {&c.seen, &c.ringbuf_full, &c.parse_short};
  for (uint32_t key = 0; key < CHRONOLINK_CNT_MAX; ++key) {
    if (bpf_map_lookup_elem(fd, &key, vals.data()) != 0) continue;
    uint64_t sum = 0;
    for (uint64_t v : vals) sum += v;
    *out[key] = sum;
  }
  return c;
}

std::vector<uint32_t> BpfTap::ProgramIds() const {
  std::vector<uint32_t> ids;
  const Impl& im = *impl_;
  if (im.skel == nullptr) return ids;
  bpf_program* p;
  bpf_object__for_each_program(p, im.skel->obj) {
    const uint32_t id = ProgIdOfFd(bpf_program__fd(p));
    if (id != 0) ids.push_back(id);
  }
  for (const auto& d : im.devices) {
    if (d.hw_skel == nullptr) continue;
    const uint32_t id = ProgIdOfFd(bpf_program__fd(d.hw_skel->progs.chronolink_xdp_hw));
    if (id != 0) ids.push_back(id);
  }
  return ids;
}

std::vector<BpfHookInfo> BpfTap::ListHooks(int ifindex, std::string* error) {
  std::vector<BpfHookInfo> out;
  std::string errs;
  for (auto [type, kind] : {std::pair{kBpfTcxIngress, "tcx_ingress"},
                            std::pair{kBpfTcxEgress, "tcx_egress"}}) {
    int err = 0;
    for (uint32_t id : QueryTcx(ifindex, type, &err)) out.push_back({kind, id, ProgName(id)});
    if (err != 0 && err != -EINVAL && err != -ENOENT) {
      errs += std::string(errs.empty() ? "" : "; ") + kind + " query: " + Errno(err);
    }
  }
  for (auto [point, kind] : {std::pair{BPF_TC_INGRESS, "tc_ingress"},
                             std::pair{BPF_TC_EGRESS, "tc_egress"}}) {
    const uint32_t id = QueryClassicTc(ifindex, point);
    if (id != 0) out.push_back({kind, id, ProgName(id)});
  }
  bpf_xdp_query_opts q{};
  q.sz = sizeof(q);
  const int r = bpf_xdp_query(ifindex, 0, &q);
  if (r == 0) {
    if (q.drv_prog_id) out.push_back({"xdp_drv", q.drv_prog_id, ProgName(q.drv_prog_id)});
    if (q.skb_prog_id) out.push_back({"xdp_skb", q.skb_prog_id, ProgName(q.skb_prog_id)});
    if (q.hw_prog_id) out.push_back({"xdp_hw", q.hw_prog_id, ProgName(q.hw_prog_id)});
  } else {
    errs += std::string(errs.empty() ? "" : "; ") + "xdp query: " + Errno(r);
  }
  if (error != nullptr) *error = errs;
  return out;
}

int BpfTap::RemoveStaleHooks(int ifindex, std::string* log) {
  InstallLibbpfPrint();
  LogCapture cap;  // keep libbpf's "no such qdisc" chatter out of stderr
  int removed = 0;
  std::string text;
  auto say = [&](const std::string& s) { text += (text.empty() ? "" : "; ") + s; };

  // Classic tc filters at our handle/priority whose program is ours.
  for (auto [point, kind] : {std::pair{BPF_TC_INGRESS, "ingress"},
                             std::pair{BPF_TC_EGRESS, "egress"}}) {
    const uint32_t id = QueryClassicTc(ifindex, point);
    if (id == 0) continue;
    const std::string name = ProgName(id);
    if (!IsOurs(name)) {
      say(std::string("classic tc ") + kind + " filter at 0xC1C1 runs '" + name +
          "', not ours: left alone");
      continue;
    }
    bpf_tc_hook hook = TcHook(ifindex, point);
    bpf_tc_opts opts = TcOpts();
    const int r = bpf_tc_detach(&hook, &opts);
    if (r == 0) {
      ++removed;
      say(std::string("removed stale classic tc ") + kind + " filter '" + name + "' (prog id " +
          std::to_string(id) + ")");
    } else {
      say(std::string("could not remove stale classic tc ") + kind + " filter: " + Errno(r));
    }
  }

  // XDP attached without a link (a link dies with its process; these do not).
  bpf_xdp_query_opts q{};
  q.sz = sizeof(q);
  if (bpf_xdp_query(ifindex, 0, &q) == 0) {
    for (auto [id, mode, kind] : {std::tuple{q.drv_prog_id, XDP_FLAGS_DRV_MODE, "drv"},
                                  std::tuple{q.skb_prog_id, XDP_FLAGS_SKB_MODE, "skb"}}) {
      if (id == 0) continue;
      const std::string name = ProgName(id);
      if (!IsOurs(name)) continue;  // someone else's XDP: never ours to touch
      const int fd = bpf_prog_get_fd_by_id(id);
      bpf_xdp_attach_opts o{};
      o.sz = sizeof(o);
      o.old_prog_fd = fd;
      const int r = bpf_xdp_detach(ifindex, mode, &o);
      if (fd >= 0) close(fd);
      if (r == 0) {
        ++removed;
        say(std::string("removed stale XDP (") + kind + ") program '" + name + "' (prog id " +
            std::to_string(id) + ")");
      } else if (r == -EBUSY) {
        say(std::string("XDP program '") + name + "' (id " + std::to_string(id) +
            ") is held by a live XDP link (another running agent?): left alone");
      } else {
        say(std::string("could not remove stale XDP program '") + name + "': " + Errno(r));
      }
    }
  }

  // tcx: link-owned programs go away with their process, so a killed agent
  // leaves none. A chronolink_ program found here belongs either to a live
  // link (another agent on this device: leave it) or was attached without a
  // link (BPF_PROG_ATTACH, which we never do): detach only that kind.
  for (auto [type, kind] : {std::pair{kBpfTcxIngress, "ingress"},
                            std::pair{kBpfTcxEgress, "egress"}}) {
    int err = 0;
    for (uint32_t id : QueryTcx(ifindex, type, &err)) {
      const std::string name = ProgName(id);
      if (!IsOurs(name)) continue;
      const int fd = bpf_prog_get_fd_by_id(id);
      if (fd < 0) continue;
      const int r = bpf_prog_detach2(fd, ifindex, static_cast<bpf_attach_type>(type));
      const int e = errno;
      close(fd);
      if (r == 0) {
        ++removed;
        say(std::string("removed stale tcx ") + kind + " program '" + name + "' (prog id " +
            std::to_string(id) + ")");
      } else {
        say(std::string("tcx ") + kind + " program '" + name + "' (id " + std::to_string(id) +
            ") is owned by a live link (another running agent?): left alone (" + Errno(e) + ")");
      }
    }
  }
  if (log != nullptr) *log = text;
  return removed;
}

}  // namespace chronolink
