// Static cluster file: {"cluster_id": 7, "nodes": [{"id": 1, "address":
// "10.77.1.2", "port": 7319}, ...]}. Strict: unknown or duplicate keys, bad
// types and inconsistent nodes are errors with the offending item named
// (docs/configuration.md).
#include <arpa/inet.h>

#include <array>
#include <cerrno>
#include <compare>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/config/agent_config.h"
#include "agent/config/json_file.h"

namespace chronolink {
namespace {

using nlohmann::json;

// Binary form of an address literal, so that "::1" and "0::1" compare equal.
struct AddressKey {
  int family = 0;
  std::array<uint8_t, 16> bytes{};
  auto operator<=>(const AddressKey&) const = default;
};

bool ParseAddress(const std::string& text, AddressKey* key) {
  AddressKey k;
  if (inet_pton(AF_INET, text.c_str(), k.bytes.data()) == 1) {
    k.family = AF_INET;
  } else if (inet_pton(AF_INET6, text.c_str(), k.bytes.data()) == 1) {
    k.family = AF_INET6;
  } else {
    return false;
  }
  if (key != nullptr) *key = k;
  return true;
}

bool GetUnsigned(const json& v, uint64_t max, uint64_t* out) {
  if (!v.is_number_unsigned()) return false;  // nlohmann stores non-negative ints as unsigned
  uint64_t x = v.get<uint64_t>();
  if (x > max) return false;
  *out = x;
  return true;
}

}  // namespace

const ClusterNode* ClusterFile::Find(uint32_t id) const {
  for (const ClusterNode& n : nodes) {
    if (n.id == id) return &n;
  }
  return nullptr;
}


bool LoadClusterFile(const std::string& path, ClusterFile* out, std::string* error) {
  std::string text, why;
  if (!ReadWholeFile(path, &text, &why)) {
    *error = "cluster file '" + path + "': " + why;
    return false;
  }
  return ParseClusterFile(text, path, out, error);
}

bool ParseClusterFile(const std::string& text, const std::string& path, ClusterFile* out, std::string* error) {
  const std::string where = "cluster file '" + path + "'";
  auto fail = [&](const std::string& msg) {
    *error = where + ": " + msg;
    return false;
  };

  std::string why;
  json doc;
  if (!ParseJsonNoDuplicates(text, &doc, &why)) return fail(why);
  if (!doc.is_object()) return fail("the top level must be a JSON object");

  for (const auto& [key, value] : doc.items()) {
    if (key != "cluster_id" && key != "nodes") {
      return fail("unknown key '" + key + "' (allowed: cluster_id, nodes)");
    }
  }

  ClusterFile result;
  if (!doc.contains("cluster_id")) return fail("'cluster_id' is missing (an integer 0..4294967295)");
  uint64_t cluster_id = 0;
  if (!GetUnsigned(doc["cluster_id"], std::numeric_limits<uint32_t>::max(), &cluster_id)) {
    return fail("'cluster_id' must be an integer 0..4294967295, got " + doc["cluster_id"].dump());
  }
  result.cluster_id = static_cast<uint32_t>(cluster_id);

  if (!doc.contains("nodes")) return fail("'nodes' is missing (a non-empty array of nodes)");
  const json& nodes = doc["nodes"];
  if (!nodes.is_array()) return fail("'nodes' must be an array");
  if (nodes.empty()) return fail("'nodes' is empty; list at least one node");

  std::set<uint32_t> ids;
  std::set<std::pair<AddressKey, uint16_t>> endpoints;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const json& n = nodes[i];
    std::string item = "nodes[" + std::to_string(i) + "]";
    if (!n.is_object()) return fail(item + " must be an object {\"id\", \"address\", \"port\"}");
    for (const auto& [key, value] : n.items()) {
      if (key != "id" && key != "address" && key != "port" && key != "hostname") {
        return fail(item + ": unknown key '" + key + "' (allowed: id, address, port, hostname)");
      }
    }
    ClusterNode node;
    uint64_t id = 0;
    if (!n.contains("id")) return fail(item + ": 'id' is missing");
    if (!GetUnsigned(n["id"], std::numeric_limits<uint32_t>::max(), &id) || id == 0) {
      return fail(item + ": 'id' must be an integer 1..4294967295, got " + n["id"].dump());
    }
    node.id = static_cast<uint32_t>(id);
    item += " (id " + std::to_string(node.id) + ")";
    if (!ids.insert(node.id).second) return fail(item + ": node id " + std::to_string(node.id) + " is listed twice");

    if (!n.contains("address")) return fail(item + ": 'address' is missing");
    if (!n["address"].is_string()) return fail(item + ": 'address' must be a string");
    node.address = n["address"].get<std::string>();
    AddressKey addr;
    if (!ParseAddress(node.address, &addr)) {
      return fail(item + ": address '" + node.address +
                  "' is not an IPv4 or IPv6 address literal (host names are not resolved)");
    }

    if (n.contains("port")) {
      uint64_t port = 0;
      if (!GetUnsigned(n["port"], 65535, &port) || port == 0) {
        return fail(item + ": 'port' must be an integer 1..65535, got " + n["port"].dump());
      }
      node.port = static_cast<uint16_t>(port);
    }
    if (n.contains("hostname")) {
      // Only chronolink-trace reads it: which node recorded a trace of this host.
      if (!n["hostname"].is_string() || n["hostname"].get<std::string>().empty()) {
        return fail(item + ": 'hostname' must be a non-empty string");
      }
      node.hostname = n["hostname"].get<std::string>();
    }
    if (!endpoints.insert({addr, node.port}).second) {
      return fail(item + ": address " + node.address + " port " + std::to_string(node.port) +
                  " is already used by another node");
    }
    result.nodes.push_back(std::move(node));
  }

  *out = std::move(result);
  return true;
}

}  // namespace chronolink
