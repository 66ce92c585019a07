// Loader of the eBPF timestamp tap (bpf/probe_tap.bpf.c): opens the
// generated skeleton, configures it (port, magic, cluster) through rodata,
// attaches tc/tcx egress and ingress, XDP and tp_btf/net_dev_start_xmit,
// and hands every record to a callback when Consume() is called. The ring
// buffer never wakes anyone (BPF_RB_NO_WAKEUP): the agent consumes it on
// its own schedule, which costs no system call. Everything attached is
// detached in Close() and by the kernel when the process dies (links).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bpf/probe_tap.h"

namespace chronolink {

struct BpfTapOptions {
  uint16_t udp_port = 7319;
  uint32_t magic = 0x43484C4B;
  uint32_t cluster_id = 0;
  std::vector<std::string> interfaces;  // devices to hook (by name)
  bool attach_xdp = true;
  bool attach_dev_xmit = true;
  // "auto": tcx links where the kernel has them (6.6+), classic cls_bpf
  // filters otherwise; "tcx" or "classic" to force one (tests).
  std::string tc_mode = "auto";
  // Test-only: load the device-bound XDP program (bpf_xdp_metadata_rx_timestamp)
  // even where the device reports no RX hardware stamps (veth: it then
  // returns 0 with a zero stamp), to exercise that path.
  bool force_device_bound_xdp = false;
  // XDP on veth devices. A veth with an XDP program receives through NAPI
  // (a ptr_ring) instead of the backlog, which delays every RX stamp on it
  // (SO_TIMESTAMPING ones too): measured on the test bed, sender
  // dev_start_xmit -> receiver RX_SOFTWARE 1.36 us p50 / ~5 us p90 with XDP
  // against 0.47 / ~1 us without. With false, veth devices get no XDP (said
  // in the note) and tc ingress is their earliest RX hook.
  bool xdp_on_veth = true;
};

// One BPF program attached to a device, as the kernel reports it.
struct BpfHookInfo {
  std::string kind;       // tcx_ingress, tcx_egress, tc_ingress, tc_egress (classic, at
                          // our handle/priority 0xC1C1 only), xdp_drv, xdp_skb, xdp_hw
  uint32_t prog_id = 0;
  std::string prog_name;  // kernel's name (15 characters at most)
};

// What happened on each interface, for the start-up log and for tests.
struct BpfTapAttachment {
  std::string interface;
  int ifindex = 0;
  bool tc_egress = false;
  bool tc_ingress = false;
  std::string tc_mode;      // "tcx" or "tc" (classic cls_bpf, when tcx is unavailable)
  bool xdp = false;
  bool xdp_hw_rx_timestamp = false;  // device-bound XDP with bpf_xdp_metadata_rx_timestamp
  std::string note;         // why something is missing, in words
};

struct BpfTapCounters {
  uint64_t seen = 0;            // probe packets recognised by the BPF side (all CPUs)
  uint64_t ringbuf_full = 0;    // records the BPF side could not submit
  uint64_t parse_short = 0;
  uint64_t records = 0;         // records consumed by userspace
};

class BpfTap {
 public:
  using RecordSink = std::function<void(const chronolink_tap_record&)>;

  BpfTap();
  ~BpfTap();
  BpfTap(const BpfTap&) = delete;
  BpfTap& operator=(const BpfTap&) = delete;

  // Loads and attaches; false with a message when the tap cannot run at all
  // (no BPF support, no privileges). Partial success (e.g. no XDP on one
  // device) is true, with the details in attachments().
  bool Open(const BpfTapOptions& options, std::string* error);
  void Close();
  bool is_open() const;

  // Hands every record in the ring buffer to `sink`; no system call.
  int Consume(const RecordSink& sink);

  const std::vector<BpfTapAttachment>& attachments() const { return attachments_; }
  BpfTapCounters counters() const;

  // Removes tap hooks a killed agent left on `ifindex` (classic tc filters
  // and XDP programs whose program name starts with "chronolink_"); never
  // touches anything else. Returns how many it removed.
  static int RemoveStaleHooks(int ifindex, std::string* log);

  // What is attached to `ifindex` right now (tcx, classic tc at 0xC1C1, XDP),
  // ours or not; for the start-up log and tests. Query errors in *error.
  static std::vector<BpfHookInfo> ListHooks(int ifindex, std::string* error);

  // Kernel ids of the programs this tap loaded (empty when closed).
  std::vector<uint32_t> ProgramIds() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::vector<BpfTapAttachment> attachments_;
};

// Devices carrying traffic to the given peer addresses (from the routing
// table, through netlink / `ip route get` semantics). Errors in *error.
std::vector<std::string> InterfacesTowards(const std::vector<std::string>& peer_addresses,
                                           std::string* error);

}  // namespace chronolink
