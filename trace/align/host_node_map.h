// Which cluster node recorded each trace. A trace names its host (XSpace:
// hostnames[0] or the file name; Chrome JSON: the file name); the agents
// know nodes by id and address. The rules, first match wins
// (docs/traces.md "Hosts and nodes"):
//   1. an explicit pattern (`--host NODE=PATTERN`, shell glob, or a mapping file);
//   2. a node whose `hostname` in the cluster file equals the host name, or
//      its first label (`gpu7` matches `gpu7.example.com` and back);
//   3. the host name is a node's address literal;
//   4. the host name resolves (getaddrinfo) to a node's address.
// Several traces may map to one node (one trace per rank); a trace no rule
// maps is an error naming it. Not thread-safe (getaddrinfo aside, pure).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace chronolink::trace {

struct NodeIdentity {
  uint32_t id = 0;
  std::string address;   // literal, may be empty
  std::string hostname;  // may be empty
};

struct HostPattern {
  uint32_t node = 0;
  std::string pattern;  // fnmatch glob over the host name
};

struct HostNodeRules {
  std::vector<HostPattern> explicit_hosts;
  std::vector<NodeIdentity> nodes;
  bool resolve_names = true;
};

struct HostNodeMatch {
  uint32_t node = 0;
  std::string rule;  // how it was found, for the summary
};

// Parses `NODE=PATTERN` (NODE a decimal id).
bool ParseHostPattern(const std::string& text, HostPattern* out, std::string* error);
// Reads a mapping file: a JSON object {"PATTERN": NODE, ...}.
bool LoadHostMapFile(const std::string& path, std::vector<HostPattern>* out, std::string* error);

bool MapHostsToNodes(const std::vector<std::string>& hosts, const HostNodeRules& rules,
                     std::vector<HostNodeMatch>* matches, std::string* error);

}  // namespace chronolink::trace
