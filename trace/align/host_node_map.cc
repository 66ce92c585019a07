#include "trace/align/host_node_map.h"

#include <arpa/inet.h>
#include <fnmatch.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <nlohmann/json.hpp>
#include <cstring>
#include <optional>

#include "common/quoted_text.h"

namespace chronolink::trace {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string FirstLabel(const std::string& name) { return name.substr(0, name.find('.')); }

bool SameHost(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return false;
  const std::string la = Lower(a), lb = Lower(b);
  return la == lb || FirstLabel(la) == lb || la == FirstLabel(lb);
}

// The canonical text of an address literal, so "::ffff:10.0.0.1" and
// "10.0.0.1" or differently written IPv6 compare equal.
std::optional<std::string> CanonicalAddress(const std::string& text) {
  in6_addr a6{};
  in_addr a4{};
  char buf[INET6_ADDRSTRLEN] = {};
  if (inet_pton(AF_INET, text.c_str(), &a4) == 1) return std::string(inet_ntop(AF_INET, &a4, buf, sizeof buf));
  if (inet_pton(AF_INET6, text.c_str(), &a6) != 1) return std::nullopt;
  if (IN6_IS_ADDR_V4MAPPED(&a6)) {
    std::memcpy(&a4, &a6.s6_addr[12], 4);
    return std::string(inet_ntop(AF_INET, &a4, buf, sizeof buf));
  }
  return std::string(inet_ntop(AF_INET6, &a6, buf, sizeof buf));
}

const NodeIdentity* NodeWithAddress(const HostNodeRules& rules, const std::string& address) {
  const auto want = CanonicalAddress(address);
  if (!want) return nullptr;
  for (const auto& n : rules.nodes) {
    if (CanonicalAddress(n.address) == want) return &n;
  }
  return nullptr;
}

const NodeIdentity* NodeByResolving(const HostNodeRules& rules, const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return nullptr;
  const NodeIdentity* node = nullptr;
  char buf[INET6_ADDRSTRLEN] = {};
  for (addrinfo* a = found; a != nullptr && node == nullptr; a = a->ai_next) {
    const void* raw = a->ai_family == AF_INET
                          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr)
                          : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr);
    if (inet_ntop(a->ai_family, raw, buf, sizeof buf) != nullptr) node = NodeWithAddress(rules, buf);
  }
  freeaddrinfo(found);
  return node;
}

std::optional<HostNodeMatch> Match(const std::string& host, const HostNodeRules& rules) {
  for (const auto& p : rules.explicit_hosts) {
    if (fnmatch(p.pattern.c_str(), host.c_str(), 0) == 0) {
      return HostNodeMatch{p.node, "explicit " + std::to_string(p.node) + "=" + p.pattern};
    }
  }
  for (const auto& n : rules.nodes) {
    if (SameHost(host, n.hostname)) return HostNodeMatch{n.id, "cluster file hostname " + n.hostname};
  }
  if (const NodeIdentity* n = NodeWithAddress(rules, host)) {
    return HostNodeMatch{n->id, "address " + n->address};
  }
  if (rules.resolve_names && !rules.nodes.empty()) {
    if (const NodeIdentity* n = NodeByResolving(rules, host)) {
      return HostNodeMatch{n->id, "resolves to " + n->address};
    }
  }
  return std::nullopt;
}

bool ParseNodeId(const std::string& text, uint32_t* id) {
  const char* end = text.data() + text.size();
  const auto r = std::from_chars(text.data(), end, *id);
  return r.ec == std::errc() && r.ptr == end && !text.empty();
}

}  // namespace

bool ParseHostPattern(const std::string& text, HostPattern* out, std::string* error) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq + 1 == text.size() || !ParseNodeId(text.substr(0, eq), &out->node)) {
    *error = "--host " + QuotedText(text) + ": expected NODE=HOST (a node id, '=', a host name or glob)";
    return false;
  }
  out->pattern = text.substr(eq + 1);
  return true;
}

bool LoadHostMapFile(const std::string& path, std::vector<HostPattern>* out, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = "host map " + path + ": cannot be opened";
    return false;
  }
  const auto doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) {
    *error = "host map " + path + ": expected a JSON object {\"HOST\": NODE_ID, ...}";
    return false;
  }
  for (const auto& [host, node] : doc.items()) {
    if (!node.is_number_unsigned() || node.get<uint64_t>() > UINT32_MAX) {
      *error = "host map " + path + ": the node of " + QuotedText(host) + " must be a node id";
      return false;
    }
    out->push_back({node.get<uint32_t>(), host});
  }
  return true;
}

bool MapHostsToNodes(const std::vector<std::string>& hosts, const HostNodeRules& rules,
                     std::vector<HostNodeMatch>* matches, std::string* error) {
  matches->clear();
  std::vector<std::string> unmapped;
  for (const auto& host : hosts) {
    const auto m = Match(host, rules);
    if (!m) unmapped.push_back(host);
    matches->push_back(m.value_or(HostNodeMatch{}));
  }
  if (unmapped.empty()) return true;
  *error = "no node for host";
  *error += unmapped.size() > 1 ? "s " : " ";
  for (size_t i = 0; i < unmapped.size(); ++i) *error += (i ? ", " : "") + QuotedText(unmapped[i]);
  *error += ": name them with --host NODE=HOST (or --host-map FILE), or give the cluster file "
            "with each node's \"hostname\"";
  return false;
}

}  // namespace chronolink::trace
