// libFuzzer target for the static cluster file (agent/config/cluster_file.cc,
// docs/configuration.md): each input is one file's text. Invariants: no
// crash, hang or sanitizer report (deep nesting included); a refusal names
// the file; an accepted file has at least one node, ids unique and non-zero,
// ports non-zero, addresses that are IP literals and no two nodes on one
// address and port; written back as a cluster file it reads back the same.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/config/agent_config.h"

namespace {

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "cluster_file_fuzz invariant violated: %s\n", what);
  std::abort();
}

bool Same(const chronolink::ClusterFile& a, const chronolink::ClusterFile& b) {
  if (a.cluster_id != b.cluster_id || a.nodes.size() != b.nodes.size()) return false;
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    const auto &x = a.nodes[i], &y = b.nodes[i];
    if (x.id != y.id || x.address != y.address || x.port != y.port || x.hostname != y.hostname) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string path = "fuzz-cluster.json";
  chronolink::ClusterFile file;
  std::string error;
  if (!chronolink::ParseClusterFile(text, path, &file, &error)) {
    if (error.find("cluster file '" + path + "'") != 0) Fail("a refusal that does not name the file");
    return 0;
  }
  if (file.nodes.empty()) Fail("a cluster without nodes accepted");
  std::set<uint32_t> ids;
  std::set<std::pair<std::string, uint16_t>> endpoints;
  nlohmann::json nodes = nlohmann::json::array();
  for (const chronolink::ClusterNode& n : file.nodes) {
    if (n.id == 0 || n.port == 0) Fail("node id or port 0 accepted");
    if (!ids.insert(n.id).second) Fail("a node id listed twice accepted");
    if (!chronolink::IsIpAddressLiteral(n.address)) Fail("an address that is no IP literal accepted");
    if (file.Find(n.id) == nullptr) Fail("a listed node is not found");
    nlohmann::json node{{"id", n.id}, {"address", n.address}, {"port", n.port}};
    if (!n.hostname.empty()) node["hostname"] = n.hostname;
    nodes.push_back(node);
  }
  const std::string again = nlohmann::json{{"cluster_id", file.cluster_id}, {"nodes", nodes}}.dump();
  chronolink::ClusterFile back;
  if (!chronolink::ParseClusterFile(again, path, &back, &error) || !Same(file, back))
    Fail("a cluster file written back reads differently");
  return 0;
}
