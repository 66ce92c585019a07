// Validation of the merged settings, one function per concern. The order of
// the steps is the order in which problems are reported (the first one wins),
// and later steps rely on what earlier ones filled in (the backend, the
// cluster file, the probe spacing and interval), so keep it.
#include "agent/config/config_validation.h"

#include <arpa/inet.h>
#include <sodium.h>
#include <time.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "agent/cluster/probe_graph.h"
#include "agent/coord/etcd/etcd_tls.h"
#include "agent/wire/private_file.h"

namespace chronolink::config_internal {
namespace {

// Sets the message and returns false, so that a check reads
// `return Fail(error, ...)`.
bool Fail(std::string* error, const std::string& msg) {
  *error = msg;
  return false;
}

bool IsVirtualClockKey(const std::string& key) { return key.rfind("virtual_clock.", 0) == 0; }

int AddressFamily(const std::string& text) {
  unsigned char buf[16];
  if (inet_pton(AF_INET, text.c_str(), buf) == 1) return AF_INET;
  if (inet_pton(AF_INET6, text.c_str(), buf) == 1) return AF_INET6;
  return 0;
}

int64_t RealtimeNowNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::string Us(int64_t ns) { return FormatNsAs(ns, Kind::kNsFromUs) + " us"; }
std::string Ms(int64_t ns) { return FormatNsAs(ns, Kind::kNsFromMs) + " ms"; }
std::string Sec(int64_t ns) { return FormatNsAs(ns, Kind::kNsFromSec) + " s"; }

// Test-only options first: production must never skew its clock.
bool ValidateTestMode(const Merged& m, const std::string& virtual_block_origin, AgentConfig* c,
                      std::string* error) {
  c->test_mode = m.Get<bool>("test_mode", false);
  if (!c->test_mode) {
    std::string offending;
    for (const auto& [key, value] : m.layer()) {
      if (IsVirtualClockKey(key)) {
        offending = value.origin;
        break;
      }
    }
    if (offending.empty()) offending = virtual_block_origin;
    if (!offending.empty()) {
      return Fail(error,
                  "the virtual clock options are test-only and require --test-mode (or "
                  "CHRONOLINK_TEST_MODE=1, or \"test_mode\": true in the config file), but " +
                      offending +
                      " was given without it. A production agent never skews its clock; remove the "
                      "virtual clock setting, or switch test mode on for a test bed.");
    }
    return true;
  }
  c->virtual_clock.offset_ns = m.Get<int64_t>("virtual_clock.offset_ns", 0);
  c->virtual_clock.drift_ppm = m.Get<double>("virtual_clock.drift_ppm", 0.0);
  if (!(std::fabs(c->virtual_clock.drift_ppm) <= 100000.0)) {
    return Fail(error, "virtual clock drift " + std::to_string(c->virtual_clock.drift_ppm) + " ppm (" +
                           m.From("virtual_clock.drift_ppm") + ") is out of range -100000..100000 ppm");
  }
  if (m.Has("virtual_clock.t0_ns")) {
    c->virtual_clock.t0_ns = m.Get<int64_t>("virtual_clock.t0_ns", 0);
    c->virtual_t0_defaulted = false;
  } else {
    c->virtual_clock.t0_ns = RealtimeNowNs();
    c->virtual_t0_defaulted = true;
  }
  c->virtual_clock.step_ns = m.Get<int64_t>("virtual_clock.step_ns", 0);
  if (c->virtual_clock.step_ns != 0 && !m.Has("virtual_clock.step_at_ns")) {
    return Fail(error, "a virtual clock step (" + m.From("virtual_clock.step_ns") +
                           ") needs the real instant it happens at (--virtual-step-at-ns)");
  }
  c->virtual_clock.step_at_ns = m.Get<int64_t>("virtual_clock.step_at_ns", 0);
  c->virtual_clock_state_file = m.Get<std::string>("virtual_clock.state_file", "");
  if (!c->virtual_clock_state_file.empty()) {
    for (const char* linear : {"virtual_clock.offset_ns", "virtual_clock.drift_ppm", "virtual_clock.step_ns"}) {
      if (m.Has(linear)) {
        return Fail(error, "the test bed's clock state (" + m.From("virtual_clock.state_file") +
                               ") replaces the linear virtual clock, but " + m.From(linear) +
                               " was given too: give one or the other");
      }
    }
  }
  return true;
}

// The coordination backend comes early: it decides whether a cluster file is
// needed.
bool ValidateCoordinationBackend(const Merged& m, AgentConfig* c, std::string* error) {
  ClusterSettings& cs = c->cluster_settings;
  const std::string backend = m.Get<std::string>("cluster.coordination", "static");
  if (backend == "static") cs.backend = CoordinationBackend::kStatic;
  else if (backend == "etcd") cs.backend = CoordinationBackend::kEtcd;
  else if (backend == "none") cs.backend = CoordinationBackend::kNone;
  else return Fail(error, "coordination backend '" + backend + "' (" + m.From("cluster.coordination") +
                              ") must be static, etcd or none");
  return true;
}

bool IsEtcd(const AgentConfig& c) { return c.cluster_settings.backend == CoordinationBackend::kEtcd; }

// With a cluster file: load it and find this node in it.
bool LoadIdentityFromClusterFile(const Merged& m, AgentConfig* c, const ClusterNode** self, std::string* error) {
  std::string why;
  c->cluster_file_path = m.Get<std::string>("cluster_file", "");
  if (!LoadClusterFile(c->cluster_file_path, &c->cluster, &why)) {
    return Fail(error, why + " (cluster file from " + m.From("cluster_file") + ")");
  }
  *self = c->cluster.Find(c->node_id);
  if (*self == nullptr) {
    std::string ids;
    for (const ClusterNode& n : c->cluster.nodes) ids += (ids.empty() ? "" : ", ") + std::to_string(n.id);
    return Fail(error, "node id " + std::to_string(c->node_id) + " (" + m.From("node_id") +
                           ") is not in cluster file " + c->cluster_file_path + " (ids: " + ids + ")");
  }
  if (m.Has("cluster.id")) {
    return Fail(error, "--cluster-id (" + m.From("cluster.id") + ") and a cluster file (" +
                           m.From("cluster_file") + ") both give the cluster id; keep one");
  }
  return true;
}

// etcd without a file: this node's own identity is all it needs; the
// members come from etcd.
bool ValidateIdentityWithoutClusterFile(const Merged& m, AgentConfig* c, std::string* error) {
  const int64_t id = m.Get<int64_t>("cluster.id", -1);
  if (id < 0 || id > static_cast<int64_t>(UINT32_MAX)) {
    return Fail(error, m.Has("cluster.id") ? "cluster id (" + m.From("cluster.id") + ") must be in 0..4294967295"
                                           : std::string("--coordination etcd without a cluster file needs "
                                                         "--cluster-id N"));
  }
  c->cluster.cluster_id = static_cast<uint32_t>(id);
  if (!m.Has("listen") || !m.Has("port")) {
    return Fail(error, "--coordination etcd without a cluster file needs --listen ADDR and --port N: the "
                       "address other nodes probe this one at");
  }
  return true;
}

// Cluster and identity. *self: this node in the cluster file; stays nullptr
// without a file (etcd only).
bool ValidateIdentity(const Merged& m, AgentConfig* c, const ClusterNode** self, std::string* error) {
  if (!m.Has("cluster_file") && !IsEtcd(*c)) {
    return Fail(error, "no cluster file: give --cluster-file FILE (or CHRONOLINK_CLUSTER_FILE, or "
                       "\"cluster_file\" in the config file), or use --coordination etcd");
  }
  if (!m.Has("node_id")) {
    return Fail(error, "no node id: give --node-id N (or CHRONOLINK_NODE_ID, or \"node_id\" in the config "
                       "file)");
  }
  c->node_id = static_cast<uint32_t>(m.Get<int64_t>("node_id", 0));
  if (m.Has("cluster_file")) return LoadIdentityFromClusterFile(m, c, self, error);
  return ValidateIdentityWithoutClusterFile(m, c, error);
}

// The probe socket.
bool ValidateListenSocket(const Merged& m, const ClusterNode* self, AgentConfig* c, std::string* error) {
  c->listen_address = m.Get<std::string>("listen", self != nullptr ? self->address : std::string());
  c->listen_port = static_cast<uint16_t>(m.Get<int64_t>("port", self != nullptr ? self->port : 0));
  if (IsEtcd(*c) && (c->listen_address == "0.0.0.0" || c->listen_address == "::")) {
    return Fail(error, "listen address " + c->listen_address + " (" + m.From("listen") +
                           ") is a wildcard; with etcd it is also the address other nodes probe this one at, so "
                           "give this node's own address");
  }
  return true;
}

// The probe graph's degree and the reference clock of the solved offsets.
bool ValidateProbeKAndReference(const Merged& m, const ClusterNode* self, AgentConfig* c, std::string* error) {
  ClusterSettings& cs = c->cluster_settings;
  cs.probe_k = static_cast<int>(m.Get<int64_t>("cluster.probe_k", 0));
  if (m.Has("cluster.probe_k") && cs.probe_k < 2) {
    return Fail(error, "probe k " + std::to_string(cs.probe_k) + " (" + m.From("cluster.probe_k") +
                           ") must be at least 2 (fewer peers leave no cycle to check loops on)");
  }
  const std::string ref = m.Get<std::string>("cluster.reference", "mean");
  if (ref == "mean") return true;
  uint32_t id = 0;
  const auto [ptr, ec2] = std::from_chars(ref.data(), ref.data() + ref.size(), id);
  if (ec2 != std::errc() || ptr != ref.data() + ref.size() || id == 0) {
    return Fail(error, "reference '" + ref + "' (" + m.From("cluster.reference") + ") must be mean or a node id");
  }
  // Without a cluster file the members are not known yet.
  if (self != nullptr && c->cluster.Find(id) == nullptr) {
    return Fail(error, "reference node " + ref + " (" + m.From("cluster.reference") +
                           ") is not in cluster file " + c->cluster_file_path);
  }
  cs.reference_node = id;
  return true;
}

// The channel between nodes: the static backend's port, etcd's endpoints and
// prefix.
bool ValidateCoordinationChannel(const Merged& m, AgentConfig* c, std::string* error) {
  ClusterSettings& cs = c->cluster_settings;
  const bool etcd = IsEtcd(*c);
  cs.coordination_port = static_cast<uint16_t>(m.Get<int64_t>("cluster.coordination_port", 0));
  std::stringstream ss(m.Get<std::string>("cluster.etcd_endpoints", ""));
  std::string url;
  size_t https = 0;
  while (std::getline(ss, url, ',')) {
    const bool is_https = url.rfind("https://", 0) == 0 && url.size() > 8;
    if (!is_https && (url.rfind("http://", 0) != 0 || url.size() <= 7)) {
      return Fail(error, "etcd endpoint '" + url + "' (" + m.From("cluster.etcd_endpoints") +
                             ") must be http://HOST:PORT or https://HOST:PORT");
    }
    if (is_https) ++https;
    cs.etcd_endpoints.push_back(url);
  }
  if (https != 0 && https != cs.etcd_endpoints.size()) {
    return Fail(error, "etcd endpoints (" + m.From("cluster.etcd_endpoints") +
                           ") mix http:// and https://: give all of one scheme (an etcd cluster serves one; "
                           "https with --etcd-cacert in production)");
  }
  if (etcd && cs.etcd_endpoints.empty()) {
    return Fail(error, "--coordination etcd needs --etcd-endpoints http://HOST:PORT[,...] or https://HOST:PORT[,...]");
  }
  if (!etcd && m.Has("cluster.etcd_endpoints")) {
    return Fail(error, "etcd endpoints (" + m.From("cluster.etcd_endpoints") +
                           ") are given, but the coordination backend is " +
                           std::string(CoordinationBackendName(cs.backend)) + "; add --coordination etcd");
  }
  cs.etcd_prefix = m.Get<std::string>("cluster.etcd_prefix", cs.etcd_prefix);
  if (cs.etcd_prefix.empty() || cs.etcd_prefix.back() != '/') cs.etcd_prefix += '/';
  return true;
}

// A PEM file that is no secret (a certificate), read whole: at most 1 MiB.
bool ReadPemFile(const std::string& path, const std::string& what, std::string* out, std::string* error) {
  constexpr size_t kMaxPemBytes = 1u << 20;
  std::ifstream in(path, std::ios::binary);
  if (!in) return Fail(error, "cannot open " + what + " '" + path + "': " + std::strerror(errno));
  out->assign(kMaxPemBytes + 1, '\0');
  in.read(out->data(), static_cast<std::streamsize>(out->size()));
  out->resize(static_cast<size_t>(in.gcount()));
  if (out->size() > kMaxPemBytes) return Fail(error, what + " '" + path + "' is larger than 1 MiB");
  return true;
}

// etcd over TLS (https endpoints) and etcd's user/password auth. Every file
// is read here, at start-up and before privileges drop.
bool ValidateEtcdSecurity(const Merged& m, AgentConfig* c, std::string* error) {
  ClusterSettings& cs = c->cluster_settings;
  const bool https = !cs.etcd_endpoints.empty() && cs.etcd_endpoints.front().rfind("https://", 0) == 0;
  const char* const kTlsKeys[] = {"cluster.etcd_cacert", "cluster.etcd_cert", "cluster.etcd_key"};
  for (const char* key : kTlsKeys) {
    if (m.Has(key) && !https) {
      return Fail(error, std::string("TLS settings (") + m.From(key) +
                             ") need https:// etcd endpoints" +
                             (IsEtcd(*c) ? " (the endpoints are http://)" : " and --coordination etcd"));
    }
  }
  for (const char* key : {"cluster.etcd_user", "cluster.etcd_password_file"}) {
    if (m.Has(key) && !IsEtcd(*c)) {
      return Fail(error, std::string("etcd auth (") + m.From(key) + ") needs --coordination etcd");
    }
  }
  if (https) {
    if (!m.Has("cluster.etcd_cacert")) {
      return Fail(error, "https etcd endpoints need --etcd-cacert FILE: the CA that signed etcd's certificate "
                         "(the system's CAs are not trusted for etcd)");
    }
    if (m.Has("cluster.etcd_cert") != m.Has("cluster.etcd_key")) {
      return Fail(error, "--etcd-cert and --etcd-key go together: give both (a client certificate for etcd's "
                         "--client-cert-auth) or neither");
    }
    cs.etcd_cacert_file = m.Get<std::string>("cluster.etcd_cacert", "");
    if (!ReadPemFile(cs.etcd_cacert_file, "etcd CA file", &cs.etcd_cacert_pem, error)) return false;
    if (m.Has("cluster.etcd_cert")) {
      cs.etcd_cert_file = m.Get<std::string>("cluster.etcd_cert", "");
      cs.etcd_key_file = m.Get<std::string>("cluster.etcd_key", "");
      if (!ReadPemFile(cs.etcd_cert_file, "etcd client certificate", &cs.etcd_cert_pem, error)) return false;
      std::string why;
      if (!ReadPrivateFile(cs.etcd_key_file, "etcd client key file '" + cs.etcd_key_file + "'",
                           "the etcd client key", 1u << 20, &cs.etcd_key_pem, &why)) {
        return Fail(error, why + " (from " + m.From("cluster.etcd_key") + ")");
      }
    }
    std::string why;
    const auto credentials = EtcdTlsCredentials::Parse({cs.etcd_cacert_pem, cs.etcd_cert_pem, cs.etcd_key_pem}, &why);
    if (!credentials) {
      return Fail(error, "etcd TLS settings (" + cs.etcd_cacert_file +
                             (cs.etcd_cert_file.empty() ? "" : ", " + cs.etcd_cert_file) + "): " + why);
    }
    if (m.Has("cluster.etcd_user") && !credentials->ClientCommonName().empty()) {
      c->warnings.push_back("the etcd client certificate " + cs.etcd_cert_file + " has a CommonName (" +
                            credentials->ClientCommonName() +
                            "): etcd 3.4's JSON gateway refuses every request from such a certificate once etcd's "
                            "auth is on; issue it without a CN (docs/deployment.md)");
    }
  } else if (IsEtcd(*c)) {
    c->warnings.push_back(
        "etcd traffic to " + cs.etcd_endpoints.front() +
        " is plain http: neither encrypted nor authenticated on the wire. Anyone on the path can read it and "
        "can rewrite or drop it; chronolink seals its values with a MAC under the cluster key, so altered "
        "values are refused, but they are readable, and etcd itself (leases, keys, "
        "--etcd-user's password) is not protected. Use https endpoints with --etcd-cacert outside a trusted "
        "network (docs/deployment.md)");
  }
  if (m.Has("cluster.etcd_user") != m.Has("cluster.etcd_password_file")) {
    return Fail(error, "--etcd-user and --etcd-password-file go together (the password is read from the file "
                       "only, never from the command line)");
  }
  if (m.Has("cluster.etcd_user")) {
    cs.etcd_user = m.Get<std::string>("cluster.etcd_user", "");
    cs.etcd_password_file = m.Get<std::string>("cluster.etcd_password_file", "");
    std::string text, why;
    if (!ReadPrivateFile(cs.etcd_password_file, "etcd password file '" + cs.etcd_password_file + "'",
                         "the etcd password", 4096, &text, &why)) {
      return Fail(error, why + " (from " + m.From("cluster.etcd_password_file") + ")");
    }
    // The first line, without its line end: `echo secret > file` works.
    cs.etcd_password = text.substr(0, text.find_first_of("\r\n"));
    sodium_memzero(text.data(), text.size());
    if (cs.etcd_password.empty()) {
      return Fail(error, "etcd password file '" + cs.etcd_password_file + "' (" +
                             m.From("cluster.etcd_password_file") + ") has an empty first line");
    }
  }
  return true;
}

// Leases, solving and window retention; and the clock page.
bool ValidateLeadershipTiming(const Merged& m, AgentConfig* c, std::string* error) {
  ClusterSettings& cs = c->cluster_settings;
  cs.lease_ttl_s = m.Get<int64_t>("cluster.lease_ttl_s", cs.lease_ttl_s);
  if (cs.lease_ttl_s < 2 || cs.lease_ttl_s > 60) {
    return Fail(error, "lease TTL " + std::to_string(cs.lease_ttl_s) + " s (" + m.From("cluster.lease_ttl_s") +
                           ") must be in 2..60 s");
  }
  cs.member_lease_ttl_s = m.Get<int64_t>("cluster.member_lease_ttl_s", cs.member_lease_ttl_s);
  if (cs.member_lease_ttl_s < cs.lease_ttl_s || cs.member_lease_ttl_s > 3600) {
    return Fail(error, "member lease TTL " + std::to_string(cs.member_lease_ttl_s) + " s (" +
                           m.From("cluster.member_lease_ttl_s") + ") must be in " + std::to_string(cs.lease_ttl_s) +
                           "..3600 s (at least the leader's lease TTL)");
  }
  cs.solve_delay_ns = m.Get<int64_t>("cluster.solve_delay_ms", cs.solve_delay_ns);
  if (cs.solve_delay_ns < 0) {
    return Fail(error, "solve delay (" + m.From("cluster.solve_delay_ms") + ") must not be negative");
  }
  cs.retention_ns = m.Get<int64_t>("cluster.retention_s", cs.retention_ns);
  if (cs.retention_ns < 10'000'000'000) {
    return Fail(error, "window retention " + Sec(cs.retention_ns) + " (" + m.From("cluster.retention_s") +
                           ") must be at least 10 s");
  }
  cs.page_drift_span_ns = m.Get<int64_t>("cluster.page_drift_span_s", cs.page_drift_span_ns);
  if (cs.page_drift_span_ns != 0 &&
      (cs.page_drift_span_ns < 4'000'000'000 || cs.page_drift_span_ns > 600'000'000'000)) {
    return Fail(error, "page drift span " + Sec(cs.page_drift_span_ns) + " (" + m.From("cluster.page_drift_span_s") +
                           ") must be 0 (off) or 4..600 s");
  }
  const int64_t rotate_mb = m.Get<int64_t>("cluster.offsets_rotate_mb", cs.offsets_rotate_bytes >> 20);
  if (rotate_mb < 0 || rotate_mb > (1 << 20)) {
    return Fail(error, "offsets rotation size " + std::to_string(rotate_mb) + " MB (" +
                           m.From("cluster.offsets_rotate_mb") + ") must be 0 (never) to 1048576");
  }
  cs.offsets_rotate_bytes = rotate_mb << 20;
  const std::string form = m.Get<std::string>("cluster.offsets_format", OffsetsFormName(cs.offsets_form));
  if (!ParseOffsetsForm(form, &cs.offsets_form)) {
    return Fail(error, "offsets format '" + form + "' (" + m.From("cluster.offsets_format") +
                           ") must be rows, columns or auto");
  }
  const std::string page = m.Get<std::string>("clock_page", "/dev/shm/chronolink-" + std::to_string(c->node_id));
  cs.clock_page_path = page == "off" ? std::string() : page;
  return true;
}

// --peers: each one another node of the cluster file, listed once.
bool CheckExplicitPeers(const Merged& m, const std::vector<uint32_t>& peers, const AgentConfig& c,
                        std::string* error) {
  std::set<uint32_t> seen;
  for (uint32_t p : peers) {
    if (p == c.node_id) {
      return Fail(error, "peer " + std::to_string(p) + " (" + m.From("peers") +
                             ") is this node itself; a node does not probe itself");
    }
    if (c.cluster.Find(p) == nullptr) {
      return Fail(error, "peer " + std::to_string(p) + " (" + m.From("peers") + ") is not in cluster file " +
                             c.cluster_file_path);
    }
    if (!seen.insert(p).second) {
      return Fail(error, "peer " + std::to_string(p) + " is listed twice (" + m.From("peers") + ")");
    }
  }
  return true;
}

// Peers: --peers, or the node's neighbours in the probe graph (with etcd,
// none here: they follow etcd's member list).
bool ValidatePeers(const Merged& m, AgentConfig* c, std::string* error) {
  ClusterSettings& cs = c->cluster_settings;
  const bool etcd = IsEtcd(*c);
  std::vector<uint32_t> peers = m.Get<std::vector<uint32_t>>("peers", {});
  if (!peers.empty() && etcd) {
    return Fail(error, "--peers (" + m.From("peers") + ") cannot be used with --coordination etcd: the peers "
                       "follow etcd's member list through the probe graph");
  }
  if (peers.empty() && !etcd) {
    std::vector<uint32_t> ids;
    for (const ClusterNode& n : c->cluster.nodes) ids.push_back(n.id);
    ProbeGraphOptions go;
    go.k = cs.probe_k;
    peers = ProbeGraph::Build(ids, go).PeersOf(c->node_id);
    if (peers.empty()) {
      return Fail(error, "cluster file " + c->cluster_file_path + " lists only this node (" +
                             std::to_string(c->node_id) + "); there is no peer to probe");
    }
  } else if (!peers.empty()) {
    cs.peers_explicit = true;
    if (!CheckExplicitPeers(m, peers, *c, error)) return false;
  }
  c->peers = std::move(peers);
  return true;
}

// A socket of one family cannot reach peers of the other; only an IPv6
// wildcard ("::", dual-stack) may serve both.
bool ValidatePeerAddressFamilies(const Merged& m, const AgentConfig& c, std::string* error) {
  if (c.listen_address == "::") return true;
  const int listen_family = AddressFamily(c.listen_address);
  for (uint32_t id : c.peers) {
    const ClusterNode* peer = c.cluster.Find(id);
    if (AddressFamily(peer->address) != listen_family) {
      return Fail(error, "peer " + std::to_string(id) + " has address " + peer->address +
                             ", but this node listens on " + c.listen_address + " (" +
                             (m.Has("listen") ? m.From("listen") : std::string("its address in the cluster file")) +
                             "), an address of the other IP family; choose peers of the same family (--peers), or "
                             "listen on \"::\" for a dual-stack socket");
    }
  }
  return true;
}

// A key on the command line is in every user's `ps`; one in the environment
// is in /proc/<pid>/environ and in every child's environment. Say so once,
// at start, where the operator looks.
void WarnIfKeyIsVisible(const std::string& origin, AgentConfig* c) {
  std::string where;
  if (origin.rfind("--", 0) == 0) {
    where = "on the command line (" + origin +
            "), where every local user can read it in the process list (ps, /proc/<pid>/cmdline)";
  } else if (origin.rfind("environment variable", 0) == 0) {
    where = "in the " + origin +
            ", where it stays readable in /proc/<pid>/environ and is passed on to child processes";
  } else {
    return;  // a config file: as private as the file is
  }
  c->warnings.push_back("the cluster key was given " + where +
                        "; in production use --key-file FILE (mode 0600, see docs/deployment.md)");
}

// The cluster key is mandatory: the wire format is authenticated.
bool ValidateKey(const Merged& m, AgentConfig* c, std::string* error) {
  std::string why;
  if (m.Has("key_file")) {
    c->key_file_path = m.Get<std::string>("key_file", "");
    if (!LoadClusterKeyFile(c->key_file_path, &c->key, &why)) {
      return Fail(error, why + " (key file from " + m.From("key_file") + ")");
    }
  } else if (m.Has("key_hex")) {
    std::string hex = m.Get<std::string>("key_hex", "");
    const bool parsed = ParseClusterKeyHex(hex, &c->key, &why);
    sodium_memzero(hex.data(), hex.size());
    if (!parsed) return Fail(error, "cluster key from " + m.From("key_hex") + ": " + why);
    WarnIfKeyIsVisible(m.From("key_hex"), c);
  } else {
    return Fail(error, "no cluster key: give --key-file FILE (preferred) or --key-hex HEX (or "
                       "CHRONOLINK_KEY_FILE / CHRONOLINK_KEY_HEX, or \"key_file\" / \"key_hex\" in the "
                       "config file). The key is mandatory because every probe is authenticated.");
  }
  return true;
}

// Where results, logs and metrics go.
bool ValidateOutputs(const Merged& m, AgentConfig* c, std::string* error) {
  c->output_dir = m.Get<std::string>("output_dir", c->output_dir);
  c->log_level = m.Get<std::string>("log_level", c->log_level);
  const std::string metrics = m.Get<std::string>("metrics", "off");
  if (metrics == "off") return true;
  // A bare PORT serves on loopback only: the port takes no authentication,
  // so reaching it from the network must be asked for by address.
  const size_t colon = metrics.rfind(':');
  std::string host = colon == std::string::npos ? "127.0.0.1" : metrics.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string port = colon == std::string::npos ? metrics : metrics.substr(colon + 1);
  int64_t port_value = -1;
  try {
    size_t used = 0;
    port_value = std::stoll(port, &used);
    if (used != port.size()) port_value = -1;
  } catch (...) {
    // Not a number: port_value stays -1 and the check below reports it.
  }
  if (!IsIpAddressLiteral(host) || port_value < 0 || port_value > 65535) {
    return Fail(error, "metrics address '" + metrics + "' (" + m.From("metrics") +
                           ") must be IP:PORT, e.g. 10.0.0.1:9319 ([::1]:9319 for IPv6), or a bare PORT for "
                           "127.0.0.1:PORT (port 0 picks one), or off");
  }
  unsigned char any[16] = {};
  unsigned char bytes[16] = {};
  const int family = AddressFamily(host);
  if (inet_pton(family, host.c_str(), bytes) == 1 &&
      std::memcmp(bytes, any, family == AF_INET ? 4 : 16) == 0) {
    c->warnings.push_back("metrics on the wildcard address " + metrics + " (" + m.From("metrics") +
                          "): the metrics port is then reachable from every network this node is on; "
                          "bind the node's own address (IP:PORT) or loopback (a bare PORT) instead");
  }
  c->metrics_address = host;
  c->metrics_port = static_cast<uint16_t>(port_value);
  return true;
}

constexpr int64_t kPilotAutoMinIntervalNs = 2'000'000;

// The pilot goes well inside the gap before its pair, whatever the jitter.
bool ValidatePilot(const Merged& m, ProbeSettings* p, std::string* error) {
  const std::string mode = m.Get<std::string>("probe.pilot", "auto");
  if (mode != "auto" && mode != "on" && mode != "off") {
    return Fail(error, "pilot mode '" + mode + "' (" + m.From("probe.pilot") + ") must be auto, on or off");
  }
  // auto: where a pair finds the path cold. At one pair per ms it does not
  // (the pilot bought nothing measurable); from 2 ms on it does, more and
  // more (docs/PERFORMANCE.md section 9).
  p->pilot = mode == "on" || (mode == "auto" && p->interval_ns >= kPilotAutoMinIntervalNs);
  // The reverse pair goes out the moment the forward one is read: its pilot
  // can only lead it in the same system call.
  const std::string reverse = m.Get<std::string>("probe.reverse_pilot", "on");
  if (reverse != "on" && reverse != "off") {
    return Fail(error,
                "reverse pilot mode '" + reverse + "' (" + m.From("probe.reverse_pilot") + ") must be on or off");
  }
  p->reverse_pilot = p->pilot && reverse == "on";
  // Unset, the lead shrinks to fit a short interval; set, it must fit.
  p->pilot_lead_ns = m.Has("probe.pilot_lead_us") ? m.Get<int64_t>("probe.pilot_lead_us", 0)
                                                   : std::min(p->pilot_lead_ns, p->interval_ns / 4);
  if (p->pilot_lead_ns < 0 || p->pilot_lead_ns > p->interval_ns / 4) {
    return Fail(error, "pilot lead " + Us(p->pilot_lead_ns) + " (" + m.From("probe.pilot_lead_us") +
                           ") must be 0 or more and at most a quarter of the probe interval " + Us(p->interval_ns) +
                           " (" + m.From("probe.interval_us") + ")");
  }
  return true;
}

// Adaptive cadence: its range and targets (agent/estimate/probe_cadence.h).
bool ValidateCadence(const Merged& m, ProbeSettings* p, std::string* error) {
  const std::string mode = m.Get<std::string>("probe.adaptive", "on");
  if (mode != "on" && mode != "off") {
    return Fail(error, "adaptive cadence '" + mode + "' (" + m.From("probe.adaptive") + ") must be on or off");
  }
  p->adaptive = mode == "on";
  p->fastest_interval_ns = m.Get<int64_t>("probe.min_interval_us", 0);
  if (!m.Has("probe.min_interval_us")) p->fastest_interval_ns = std::max(p->interval_ns / 8, 2 * p->spacing_ns);
  if (p->fastest_interval_ns < 2 * p->spacing_ns || p->fastest_interval_ns > p->interval_ns) {
    return Fail(error, "fastest probe interval " + Us(p->fastest_interval_ns) + " (" + m.From("probe.min_interval_us") +
                           ") must be at least twice the probe spacing " + Us(p->spacing_ns) +
                           " and at most the probe interval " + Us(p->interval_ns) + " (" +
                           m.From("probe.interval_us") + ")");
  }
  p->target_pure_points = static_cast<int>(m.Get<int64_t>("probe.target_pure_points", p->target_pure_points));
  p->target_uncertainty_ns = m.Get<double>("probe.target_uncertainty_ns", p->target_uncertainty_ns);
  if (!(p->target_uncertainty_ns >= 0) || !std::isfinite(p->target_uncertainty_ns)) {
    return Fail(error, "target uncertainty (" + m.From("probe.target_uncertainty_ns") + ") must be 0 (none) or more");
  }
  return true;
}

bool ValidateProbing(const Merged& m, AgentConfig* c, std::string* error) {
  ProbeSettings& p = c->probe;
  p.spacing_ns = m.Get<int64_t>("probe.spacing_us", p.spacing_ns);
  p.interval_ns = m.Get<int64_t>("probe.interval_us", p.interval_ns);
  p.jitter_fraction = m.Get<double>("probe.jitter", p.jitter_fraction);
  p.tuple_timeout_ns = m.Get<int64_t>("probe.tuple_timeout_ms", p.tuple_timeout_ns);
  p.followup_delay_ns = m.Get<int64_t>("probe.followup_delay_ms", p.followup_delay_ns);
  if (!m.Has("probe.followup_delay_ms")) {
    p.followup_delay_ns = std::min(p.interval_ns * 5 / 2, p.tuple_timeout_ns / 2);
  }
  p.max_pending_tuples =
      static_cast<size_t>(m.Get<int64_t>("probe.max_pending_tuples", static_cast<int64_t>(p.max_pending_tuples)));
  if (p.spacing_ns != 0 && p.spacing_ns < 1000) {
    return Fail(error, "probe spacing " + Us(p.spacing_ns) + " (" + m.From("probe.spacing_us") +
                           ") must be 0 (back to back) or at least 1 us");
  }
  if (p.interval_ns < 2 * p.spacing_ns) {
    return Fail(error, "probe interval " + Us(p.interval_ns) + " (" + m.From("probe.interval_us") +
                           ") must be at least twice the probe spacing " + Us(p.spacing_ns) + " (" +
                           m.From("probe.spacing_us") + "), so that the pairs of one edge never overlap");
  }
  if (p.interval_ns > 10'000'000'000) {
    return Fail(error, "probe interval " + Us(p.interval_ns) + " (" + m.From("probe.interval_us") +
                           ") must be at most 10 s");
  }
  if (!(p.jitter_fraction >= 0.0 && p.jitter_fraction <= 0.9)) {
    return Fail(error, "probe jitter " + std::to_string(p.jitter_fraction) + " (" + m.From("probe.jitter") +
                           ") must be a fraction in 0..0.9");
  }
  if (p.tuple_timeout_ns <= 0) {
    return Fail(error, "tuple timeout " + Ms(p.tuple_timeout_ns) + " (" + m.From("probe.tuple_timeout_ms") +
                           ") must be positive");
  }
  if (p.followup_delay_ns <= 0 || p.followup_delay_ns >= p.tuple_timeout_ns) {
    return Fail(error, "follow-up delay " + Ms(p.followup_delay_ns) + " (" + m.From("probe.followup_delay_ms") +
                           ") must be positive and shorter than the tuple timeout " + Ms(p.tuple_timeout_ns) +
                           " (" + m.From("probe.tuple_timeout_ms") +
                           "), or the last tuples of a session never complete");
  }
  if (p.max_pending_tuples < 1) {
    return Fail(error, "max pending tuples (" + m.From("probe.max_pending_tuples") + ") must be at least 1");
  }
  return ValidatePilot(m, &p, error) && ValidateCadence(m, &p, error);
}

// Windows and fit parameters, checked against the probing settings.
bool ValidateEstimationWindows(const Merged& m, AgentConfig* c, std::string* error) {
  const ProbeSettings& p = c->probe;
  EstimationSettings& e = c->estimation;
  e.window_ns = m.Get<int64_t>("estimation.window_s", e.window_ns);
  e.window_grace_ns = m.Get<int64_t>("estimation.window_grace_ms", e.window_grace_ns);
  e.purity_tolerance_ns = m.Get<int64_t>("estimation.purity_tolerance_ns", e.purity_tolerance_ns);
  e.min_points_per_side = static_cast<int>(m.Get<int64_t>("estimation.min_points", e.min_points_per_side));
  const int64_t floor_points = m.Get<int64_t>("estimation.floor_points", e.floor_points);
  if (floor_points < 1 || floor_points > 64) {
    return Fail(error, "fit floor points " + std::to_string(floor_points) + " (" + m.From("estimation.floor_points") +
                           ") must be 1..64 (1: the hard margin)");
  }
  e.floor_points = static_cast<int>(floor_points);
  const int64_t drift_windows = m.Get<int64_t>("estimation.drift_windows", e.drift_windows);
  if (drift_windows < 0 || drift_windows > 200) {
    return Fail(error, "fit drift windows " + std::to_string(drift_windows) + " (" +
                           m.From("estimation.drift_windows") + ") must be 0..200 (0: each window's own slope)");
  }
  e.drift_windows = static_cast<int>(drift_windows);
  const std::string points = m.Get<std::string>("estimation.points", "every");
  if (points != "every" && points != "pure") {
    return Fail(error, "estimate points '" + points + "' (" + m.From("estimation.points") + ") must be every or pure");
  }
  e.fit_every_probe = points == "every";
  const std::string later_half = m.Get<std::string>("estimation.fit_later_half", "on");
  if (later_half != "on" && later_half != "off") {
    return Fail(error,
                "fit later half '" + later_half + "' (" + m.From("estimation.fit_later_half") + ") must be on or off");
  }
  e.fit_later_half = later_half == "on";
  const std::string probes = m.Get<std::string>("estimation.fit_probes", "link");
  if (probes != "link" && probes != "own") {
    return Fail(error, "fit probes '" + probes + "' (" + m.From("estimation.fit_probes") + ") must be link or own");
  }
  e.fit_peer_probes = probes == "link";
  const std::string fit_clock = m.Get<std::string>("estimation.fit_clock", "raw");
  if (fit_clock != "raw" && fit_clock != "realtime") {
    return Fail(error, "fit clock '" + fit_clock + "' (" + m.From("estimation.fit_clock") + ") must be raw or realtime");
  }
  e.fit_on_raw = fit_clock == "raw";
  e.path_asymmetry_ns = m.Get<double>("estimation.path_asymmetry_ns", e.path_asymmetry_ns);
  if (!(e.path_asymmetry_ns >= 0) || !std::isfinite(e.path_asymmetry_ns) || e.path_asymmetry_ns > 1e9) {
    return Fail(error, "path asymmetry (" + m.From("estimation.path_asymmetry_ns") + ") must be 0..1e9 ns");
  }
  if (e.window_ns < 100'000'000) {
    return Fail(error, "estimation window " + Sec(e.window_ns) + " (" + m.From("estimation.window_s") +
                           ") must be at least 0.1 s");
  }
  e.fit_span_ns = m.Get<int64_t>("estimation.fit_span_s", e.fit_span_ns);
  if (e.fit_span_ns != 0 && (e.fit_span_ns < e.window_ns || e.fit_span_ns > 8 * e.window_ns)) {
    return Fail(error, "fit span " + Sec(e.fit_span_ns) + " (" + m.From("estimation.fit_span_s") +
                           ") must be from the window " + Sec(e.window_ns) + " (" +
                           m.From("estimation.window_s") + ") to 8 windows");
  }
  e.fit_span_max_ns = m.Get<int64_t>("estimation.fit_span_max_s", e.fit_span_max_ns);
  if (e.fit_span_max_ns != 0 && (e.fit_span_max_ns < 2 * e.window_ns || e.fit_span_max_ns > 8 * e.window_ns)) {
    return Fail(error, "longest fit span " + Sec(e.fit_span_max_ns) + " (" +
                           m.From("estimation.fit_span_max_s") + ") must be from 2 windows (2 x " +
                           Sec(e.window_ns) + ", " + m.From("estimation.window_s") + ") to 8 windows");
  }
  e.fit_span_trailing_max_ns = m.Get<int64_t>("estimation.fit_span_trailing_max_s", e.fit_span_trailing_max_ns);
  if (e.fit_span_trailing_max_ns != 0 &&
      (e.fit_span_trailing_max_ns < e.FitSpan() || e.fit_span_trailing_max_ns > kMaxTrailingWindows * e.window_ns)) {
    return Fail(error, "longest trailing fit span " + Sec(e.fit_span_trailing_max_ns) + " (" +
                           m.From("estimation.fit_span_trailing_max_s") + ") must be from the longest centred span " +
                           Sec(e.FitSpan()) + " (" + m.From("estimation.fit_span_max_s") + ") to " +
                           std::to_string(kMaxTrailingWindows) + " windows (" + std::to_string(kMaxTrailingWindows) +
                           " x " + Sec(e.window_ns) + ", " + m.From("estimation.window_s") + ")");
  }
  if (e.MinFitSpan() / 10 < p.interval_ns) {
    return Fail(error, "fit span " + Sec(e.MinFitSpan()) + " (" + m.From("estimation.fit_span_s") + ", " +
                           m.From("estimation.window_s") + ") must be at least 10x the probe interval " +
                           Us(p.interval_ns) + " (" + m.From("probe.interval_us") +
                           "), or a fit holds too few pairs");
  }
  if (e.window_grace_ns < 0 || e.window_grace_ns >= e.window_ns) {
    return Fail(error, "window grace " + Ms(e.window_grace_ns) + " (" + m.From("estimation.window_grace_ms") +
                           ") must be 0 or more and shorter than the window " + Sec(e.window_ns) + " (" +
                           m.From("estimation.window_s") + ")");
  }
  // Back-to-back probes leave the kernel a few us apart: no spacing to bound the tolerance.
  const int64_t max_tolerance = p.spacing_ns == 0 ? 100'000 : p.spacing_ns;
  if (e.purity_tolerance_ns < 1 || e.purity_tolerance_ns > max_tolerance) {
    const std::string range = p.spacing_ns == 0 ? "1 ns..100 us (probes go back to back: spacing 0, " +
                                                      m.From("probe.spacing_us") + ")"
                                                : "1 ns..the probe spacing " + Us(p.spacing_ns) + " (" +
                                                      m.From("probe.spacing_us") + ")";
    return Fail(error, "purity tolerance " + std::to_string(e.purity_tolerance_ns) + " ns (" +
                           m.From("estimation.purity_tolerance_ns") + ") must be in " + range);
  }
  if (c->probe.target_pure_points < e.min_points_per_side) {
    return Fail(error, "adaptive target of " + std::to_string(c->probe.target_pure_points) + " pure points (" +
                           m.From("probe.target_pure_points") + ") must be at least the minimum points " +
                           std::to_string(e.min_points_per_side) + " (" + m.From("estimation.min_points") + ")");
  }
  if (e.min_points_per_side < 2) {
    return Fail(error, "min points " + std::to_string(e.min_points_per_side) + " (" +
                           m.From("estimation.min_points") + ") must be at least 2 (a line needs two points)");
  }
  return true;
}

// The timestamp source classes to estimate from: at least one, each once.
bool ValidateEstimationSources(const Merged& m, AgentConfig* c, std::string* error) {
  EstimationSettings& e = c->estimation;
  e.source_classes = m.Get<std::vector<SourceClass>>("estimation.sources", e.source_classes);
  if (e.source_classes.empty()) {
    return Fail(error, "no timestamp source class to estimate from (" + m.From("estimation.sources") +
                           "); list at least one of kernel, userspace");
  }
  std::set<SourceClass> seen;
  for (SourceClass sc : e.source_classes) {
    if (!seen.insert(sc).second) {
      return Fail(error, "source class '" + std::string(SourceClassName(sc)) + "' is listed twice (" +
                             m.From("estimation.sources") + ")");
    }
  }
  return true;
}

// The eBPF tap: whether to use it, XDP, and which devices to hook.
bool ValidateBpfTap(const Merged& m, AgentConfig* c, std::string* error) {
  CaptureSettings& cap = c->capture;
  const std::string bpf = m.Get<std::string>("capture.bpf", "auto");
  if (bpf == "auto") cap.bpf = BpfMode::kAuto;
  else if (bpf == "on") cap.bpf = BpfMode::kOn;
  else if (bpf == "off") cap.bpf = BpfMode::kOff;
  else return Fail(error, "eBPF mode '" + bpf + "' (" + m.From("capture.bpf") + ") must be auto, on or off");
  const std::string xdp = m.Get<std::string>("capture.xdp", "auto");
  if (xdp == "auto") cap.xdp = BpfMode::kAuto;
  else if (xdp == "on") cap.xdp = BpfMode::kOn;
  else if (xdp == "off") cap.xdp = BpfMode::kOff;
  else return Fail(error, "XDP mode '" + xdp + "' (" + m.From("capture.xdp") + ") must be auto, on or off");
  const std::string devs = m.Get<std::string>("capture.bpf_interfaces", "");
  std::stringstream ss(devs);
  std::string dev;
  while (std::getline(ss, dev, ',')) {
    if (dev.empty() || dev.size() >= 16) {
      return Fail(error, "interface name '" + dev + "' (" + m.From("capture.bpf_interfaces") +
                             ") must be 1..15 characters");
    }
    cap.bpf_interfaces.push_back(dev);
  }
  return true;
}

// A forced kernel-class stamp source (for comparisons), and the stamp log.
bool ValidateTimestampSource(const Merged& m, AgentConfig* c, std::string* error) {
  CaptureSettings& cap = c->capture;
  const std::string src = m.Get<std::string>("capture.timestamp_source", "auto");
  if (src != "auto") {
    StampSource forced;
    if (!ParseStampSource(src, &forced) || forced == StampSource::kNone ||
        forced == StampSource::kUserspace) {
      return Fail(error, "timestamp source '" + src + "' (" + m.From("capture.timestamp_source") +
                             ") must be auto, socket_sched, socket_software, bpf_tc, bpf_xdp or hardware");
    }
    if ((forced == StampSource::kBpfTc || forced == StampSource::kBpfXdp) && cap.bpf == BpfMode::kOff) {
      return Fail(error, "timestamp source '" + src + "' needs the eBPF tap, but it is off (" +
                             m.From("capture.bpf") + ")");
    }
    cap.forced_source = forced;
  }
  cap.stamp_log_path = m.Get<std::string>("capture.stamp_log", "");
  return true;
}

// Whom to become after start-up. Resolved (and refused when unknown) by the
// runtime, which alone knows whether it started privileged.
bool ValidateRunAs(const Merged& m, AgentConfig* c, std::string* error) {
  c->run_as_user_explicit = m.Has("user");
  c->run_as_group_explicit = m.Has("group");
  c->run_as_user = m.Get<std::string>("user", c->run_as_user);
  c->run_as_group = m.Get<std::string>("group", "");
  if (c->run_as_group == "root" || c->run_as_group == "0") {
    return Fail(error, "group '" + c->run_as_group + "' (" + m.From("group") +
                           ") is root, but the agent never keeps gid 0 after start-up: name an unprivileged "
                           "group (default the user's own)");
  }
  if (c->run_as_user == "root" || c->run_as_user == "0") {
    return Fail(error, "user '" + c->run_as_user + "' (" + m.From("user") +
                           ") is root, but the agent never keeps uid 0 after start-up: name an unprivileged "
                           "user (default nobody; a dedicated one in production, docs/deployment.md)");
  }
  return true;
}

bool ValidateRunLength(const Merged& m, AgentConfig* c, std::string* error) {
  if (!m.Has("duration_s")) return true;
  int64_t d = m.Get<int64_t>("duration_s", 0);
  if (d <= 0) {
    return Fail(error, "duration " + Sec(d) + " (" + m.From("duration_s") +
                           ") must be positive; leave it out to run until signalled");
  }
  c->duration_ns = d;
  return true;
}

}  // namespace

bool Validate(const Merged& m, const std::string& virtual_block_origin, AgentConfig* c, std::string* error) {
  const ClusterNode* self = nullptr;  // set by ValidateIdentity when there is a cluster file
  return ValidateTestMode(m, virtual_block_origin, c, error) &&
         ValidateCoordinationBackend(m, c, error) &&
         ValidateIdentity(m, c, &self, error) &&
         ValidateListenSocket(m, self, c, error) &&
         ValidateProbeKAndReference(m, self, c, error) &&
         ValidateCoordinationChannel(m, c, error) &&
         ValidateEtcdSecurity(m, c, error) &&
         ValidateLeadershipTiming(m, c, error) &&
         ValidatePeers(m, c, error) &&
         ValidatePeerAddressFamilies(m, *c, error) &&
         ValidateKey(m, c, error) &&
         ValidateOutputs(m, c, error) &&
         ValidateProbing(m, c, error) &&
         ValidateEstimationWindows(m, c, error) &&
         ValidateEstimationSources(m, c, error) &&
         ValidateBpfTap(m, c, error) &&
         ValidateTimestampSource(m, c, error) &&
         ValidateRunAs(m, c, error) &&
         ValidateRunLength(m, c, error);
}

}  // namespace chronolink::config_internal
