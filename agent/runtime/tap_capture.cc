#include "agent/runtime/tap_capture.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "agent/capture/packet_key.h"
#include "agent/probe/probe_engine.h"
#include "agent/runtime/privileges.h"

namespace chronolink {

namespace {

std::string MissingCapabilities(const Capabilities& c) {
  std::string missing;
  auto add = [&](bool have, const char* name) {
    if (!have) missing += (missing.empty() ? "" : ", ") + std::string(name);
  };
  add(c.bpf, "CAP_BPF");
  add(c.net_admin, "CAP_NET_ADMIN");
  add(c.perfmon, "CAP_PERFMON");
  return missing;
}

// Where the probes will go. With etcd the peers are not known before the
// members are read, so the devices towards etcd stand in for them (the
// cluster network, as a rule); --bpf-interfaces says otherwise.
std::vector<std::string> PeerAddresses(const AgentConfig& config) {
  std::vector<std::string> out;
  for (uint32_t peer : config.peers) {
    if (const ClusterNode* n = config.cluster.Find(peer)) out.push_back(n->address);
  }
  if (config.cluster_settings.backend == CoordinationBackend::kEtcd) {
    for (const ClusterNode& n : config.cluster.nodes) {
      if (n.id != config.node_id) out.push_back(n.address);
    }
    for (const std::string& url : config.cluster_settings.etcd_endpoints) {
      std::string host = url.substr(std::string_view("http://").size());
      host = host.substr(0, host.rfind(':'));
      if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
      if (IsIpAddressLiteral(host)) out.push_back(host);
    }
  }
  return out;
}

}  // namespace

bool TapCapture::Start(const AgentConfig& config, std::string* error) {
  const bool required = config.capture.bpf == BpfMode::kOn;
  auto unavailable = [&](const std::string& why) {
    state_ = "off: " + why;
    if (required) {
      *error = "the eBPF tap is required (--bpf on) but " + why;
      return false;
    }
    spdlog::warn("eBPF tap off: {}; timestamps come from SO_TIMESTAMPING alone", why);
    return true;
  };
  devices_ = config.capture.bpf_interfaces;
  if (devices_.empty()) {
    std::string why;
    devices_ = InterfacesTowards(PeerAddresses(config), &why);
    if (devices_.empty()) spdlog::warn("no device found towards the peers: {}", why);
  }
  if (config.capture.bpf == BpfMode::kOff) {
    state_ = "off: --bpf off";
    spdlog::info("eBPF tap off (--bpf off); timestamps come from SO_TIMESTAMPING");
    return true;
  }
  const std::string missing = MissingCapabilities(CurrentCapabilities());
  if (!missing.empty()) return unavailable("missing " + missing);

  if (devices_.empty()) return unavailable("no device found towards the peers");
  BpfTapOptions options;
  options.udp_port = config.listen_port;
  options.cluster_id = config.cluster.cluster_id;
  options.interfaces = devices_;
  options.attach_xdp = config.capture.xdp != BpfMode::kOff;
  options.xdp_on_veth = config.capture.xdp == BpfMode::kOn;
  std::string why;
  if (!tap_.Open(options, &why)) return unavailable(why);

  state_ = "on";
  for (const BpfTapAttachment& a : tap_.attachments()) {
    spdlog::info("eBPF tap on {}: tc egress {}, tc ingress {} ({}), XDP {}{}", a.interface,
                 a.tc_egress ? "yes" : "no", a.tc_ingress ? "yes" : "no", a.tc_mode,
                 a.xdp ? "yes" : "no", a.note.empty() ? "" : "; " + a.note);
  }
  mapping_.Sample(ReadClockNs(CLOCK_MONOTONIC));
  return true;
}

void TapCapture::Pump(ProbeEngine& engine, const FitClock& clock) {
  if (!tap_.is_open()) return;
  // Sample right before draining: the drained stamps then lie between two
  // measurements and are interpolated (kernel_clock_mapping.h).
  mapping_.Sample(ReadClockNs(CLOCK_MONOTONIC));
  tap_.Consume([&](const chronolink_tap_record& r) {
    ++records_;
    TapStamp t;
    if (TapRecordIsClockRemap(r)) return;
    if (!ParseTapRecord(r, &t)) {
      ++unparsable_;
      return;
    }
    const ConvertedStamp c = mapping_.MonotonicToRealtime(static_cast<int64_t>(r.mono_ns));
    if (!c.ok) {
      ++conversion_failed_;
      return;
    }
    if (c.error_ns > kMaxConversionErrorNs) {
      ++conversion_too_loose_;
      return;
    }
    max_conversion_error_ns_ = std::max(max_conversion_error_ns_, c.error_ns);
    t.stamp.ns = clock.Ingest(c.realtime_ns);
    // The engine binds it to an authentic packet by key and MAC, and
    // routes it by the hook's direction.
    engine.OnTapStamp(t);
  });
}

nlohmann::ordered_json TapCapture::Stats() const {
  nlohmann::ordered_json j;
  j["state"] = state_;
  if (!tap_.is_open()) return j;
  const BpfTapCounters k = tap_.counters();
  j["kernel_seen"] = k.seen;
  j["kernel_ringbuf_full"] = k.ringbuf_full;
  j["kernel_parse_short"] = k.parse_short;
  j["records"] = records_;
  j["unparsable"] = unparsable_;
  j["conversion_failed"] = conversion_failed_;
  j["conversion_too_loose"] = conversion_too_loose_;
  j["max_conversion_error_ns"] = max_conversion_error_ns_;
  j["monotonic_bracket_ns"] = mapping_.last_bracket_ns();
  nlohmann::ordered_json devs = nlohmann::ordered_json::array();
  for (const BpfTapAttachment& a : tap_.attachments()) {
    devs.push_back({{"interface", a.interface}, {"tc_egress", a.tc_egress},
                    {"tc_ingress", a.tc_ingress}, {"tc_mode", a.tc_mode}, {"xdp", a.xdp},
                    {"xdp_hw_rx_timestamp", a.xdp_hw_rx_timestamp}, {"note", a.note}});
  }
  j["devices"] = devs;
  return j;
}

}  // namespace chronolink
