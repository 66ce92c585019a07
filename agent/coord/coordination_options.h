// What a coordinator needs to know, and nothing more: the caller gathers it
// from the agent's configuration (CoordinationOptionsFrom,
// agent/config/agent_config.h), so coord/ knows nothing of config/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/wire/cluster_key.h"

namespace chronolink {

enum class CoordinationBackend : uint8_t {
  kNone = 0,    // probe and write edges.jsonl only: no leader, no offsets
  kStatic = 1,  // the cluster file; the lowest live node id leads
  kEtcd = 2,    // members and leader in etcd; windows and offsets over the channel
};

// A live member and where it listens for probes.
struct Member {
  uint32_t id = 0;
  std::string address;
  uint16_t port = 0;
  friend bool operator==(const Member&, const Member&) = default;
};

struct CoordinationOptions {
  CoordinationBackend backend = CoordinationBackend::kStatic;
  uint32_t node_id = 0;
  std::string listen_address;  // this node's probe address and port
  uint16_t listen_port = 0;
  ClusterKey key{};
  uint32_t cluster_id = 0;
  int probe_k = 0;                        // peers per node in the probe graph; 0: min(6, nodes - 1)
  int64_t retention_ns = 120'000'000'000;  // windows kept for catch-up and failover
  // Of those, what goes again to a new leader (it solves back only so far:
  // TakeoverResendNs); at most the retention.
  int64_t resend_ns = 120'000'000'000;

  // The static backend: every member, from the cluster file, and where
  // they came from (for messages).
  std::vector<Member> members;
  std::string members_source;
  uint16_t coordination_port = 0;  // TCP on every node, both backends; 0: each one's probe port

  // The etcd backend (docs/deployment.md): endpoints (all http:// or all
  // https://), the key prefix, TLS material (PEM text, read before the
  // privilege drop), user/password auth, the member lease.
  std::vector<std::string> etcd_endpoints;
  std::string etcd_prefix = "/chronolink/";
  std::string etcd_cacert_pem, etcd_cert_pem, etcd_key_pem;
  std::string etcd_user;  // empty: no etcd auth
  std::string etcd_password;
  int64_t lease_ttl_s = 5;           // the leader key's lease: how fast a dead leader is replaced
  int64_t member_lease_ttl_s = 180;  // a registration's: how fast a killed member leaves the list
  // The leader rewrites the `graph` key (its size grows with the members:
  // about 400 kB at 10 000) at most this often: while thousands of nodes join,
  // the members change at every 100 ms turn, and each rewrite stays in
  // etcd's history until compaction.
  int64_t graph_interval_ns = 10'000'000'000;
};

}  // namespace chronolink
