#include "agent/coord/peer_list.h"

#include <nlohmann/json.hpp>

namespace chronolink {

namespace {

// A non-negative JSON integer no larger than max. nlohmann's get<uint16_t>
// would wrap 72855 to 7319 and truncate 3.9 to 3.
bool UnsignedAtMost(const nlohmann::json& v, uint64_t max, uint64_t* out) {
  if (!v.is_number_unsigned() || v.get<uint64_t>() > max) return false;
  *out = v.get<uint64_t>();
  return true;
}

}  // namespace

nlohmann::json MemberToJson(const Member& m) { return {{"id", m.id}, {"address", m.address}, {"port", m.port}}; }

bool MemberFromJson(const nlohmann::json& j, Member* m) {
  if (!j.is_object()) return false;
  const auto id = j.find("id"), port = j.find("port"), address = j.find("address");
  if (id == j.end() || port == j.end() || address == j.end() || !address->is_string()) return false;
  uint64_t id_value = 0, port_value = 0;
  if (!UnsignedAtMost(*id, UINT32_MAX, &id_value) || !UnsignedAtMost(*port, UINT16_MAX, &port_value)) return false;
  const std::string& text = address->get_ref<const std::string&>();
  if (id_value == 0 || port_value == 0 || text.empty() || text.size() > kMaxMemberAddressBytes) return false;
  m->id = static_cast<uint32_t>(id_value);
  m->address = text;
  m->port = static_cast<uint16_t>(port_value);
  return true;
}

std::string EncodePeerList(const PeerList& list) {
  nlohmann::json peers = nlohmann::json::array();
  for (const Member& m : list.peers) peers.push_back(MemberToJson(m));
  return nlohmann::json{{"leader", list.leader}, {"peers", std::move(peers)}}.dump();
}

bool DecodePeerList(std::string_view text, PeerList* out, std::string* error) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    *error = "not a JSON object";
    return false;
  }
  PeerList list;
  uint64_t leader = 0;
  const auto l = j.find("leader");
  if (l == j.end() || !UnsignedAtMost(*l, UINT32_MAX, &leader) || leader == 0) {
    *error = "\"leader\" is not a node id";
    return false;
  }
  list.leader = static_cast<uint32_t>(leader);
  const auto p = j.find("peers");
  if (p == j.end() || !p->is_array() || p->size() > kMaxPeerListSize) {
    *error = "\"peers\" is not an array of at most " + std::to_string(kMaxPeerListSize) + " members";
    return false;
  }
  for (const nlohmann::json& e : *p) {
    Member m;
    if (!MemberFromJson(e, &m)) {
      *error = "a peer is not {\"id\", \"address\", \"port\"} with a non-zero id and port and an address";
      return false;
    }
    if (!list.peers.empty() && m.id <= list.peers.back().id) {
      *error = "peer ids are not strictly increasing";
      return false;
    }
    list.peers.push_back(std::move(m));
  }
  *out = std::move(list);
  return true;
}

}  // namespace chronolink
