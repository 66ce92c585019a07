// The peers an etcd leader gives each node (docs/cluster.md, "Membership"):
// that node's neighbours in the probe graph the leader built from every
// registered member, with their probe addresses. A follower needs these,
// not the member list: if every agent watched members/, each join would
// cost etcd one event per agent, n²/2 over a cluster's start (5·10⁷ at
// 10 000 nodes). The leader alone reads and watches the members.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "agent/coord/coordination_options.h"

namespace chronolink {

// A graph's degree stays near 2k (k ≤ 64); far above that is not a probe
// graph but a message to refuse.
inline constexpr size_t kMaxPeerListSize = 1024;
inline constexpr size_t kMaxMemberAddressBytes = 255;

struct PeerList {
  uint32_t leader = 0;        // who built it
  std::vector<Member> peers;  // strictly increasing ids
  friend bool operator==(const PeerList&, const PeerList&) = default;
};

// {"leader", "peers": [{"id", "address", "port"}, ...]}
std::string EncodePeerList(const PeerList& list);
// Refuses (with a reason) anything but a complete list: a non-zero leader,
// at most kMaxPeerListSize members, each with a non-zero id and port and an
// address of 1..kMaxMemberAddressBytes bytes, ids strictly increasing.
bool DecodePeerList(std::string_view text, PeerList* out, std::string* error);

// One member as JSON, and back: false for anything but a complete member
// (as DecodePeerList checks each).
nlohmann::json MemberToJson(const Member& m);
bool MemberFromJson(const nlohmann::json& j, Member* m);

}  // namespace chronolink
