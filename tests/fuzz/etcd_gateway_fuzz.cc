// libFuzzer target for the reading of etcd's answers (agent/coord/
// etcd_gateway.h, namespace etcd_gateway): anyone on the plain-HTTP path, or
// a fake etcd, writes them. Each input is, at once:
//  - one unary answer: parsed as the client does (depth check, then the
//    range, lease grant, keepalive, deleterange and txn fields) and as the
//    watcher does (created, canceled, events, fragment);
//  - a watch stream, split into objects by JsonObjectStream, whole and in
//    pieces of input-derived sizes, which must agree;
//  - an endpoint URL and a key prefix (ParseEtcdEndpoint, PrefixRangeEnd).
// Invariants: no crash, hang or sanitizer report (deep nesting included);
// a refusal says why, quoting at most a short printable excerpt; accepted
// JSON is no deeper than kMaxJsonDepth; every key-value read from an answer
// written back as the gateway writes it reads back the same; a split object
// is one balanced {...} within the size limit; an endpoint that parses
// formats back to one that parses the same; a prefix's range end is above
// every key with that prefix.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/coord/etcd/etcd_gateway.h"

namespace {

using nlohmann::json;
namespace gw = chronolink::etcd_gateway;
using chronolink::EtcdEvent;
using chronolink::EtcdKeyValue;

constexpr size_t kStreamLimit = 4096;  // small, so that the limit is reachable

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "etcd_gateway_fuzz invariant violated: %s\n", what);
  std::abort();
}

// Excerpts are short and printable (QuotedText: an escape is at most 6
// bytes for one byte of the answer, UTF-8 passes whole): an untrusted answer
// never reaches a log whole, and never with a raw control character.
void CheckQuoted(const std::string& message, size_t excerpts) {
  if (message.size() > excerpts * (6 * gw::kExcerptBytes + 48) + 64) Fail("a message quotes too much of the answer");
  for (size_t i = 0; i < message.size(); ++i) {
    const auto c = static_cast<unsigned char>(message[i]);
    if (c < 0x20 || c == 0x7f) Fail("a message quotes a control byte");
    if (c == 0xc2 && i + 1 < message.size() && static_cast<unsigned char>(message[i + 1]) < 0xa0) {
      Fail("a message quotes a C1 control");
    }
  }
}

int Depth(const json& j) {
  int deepest = 0;
  if (j.is_object() || j.is_array())
    for (const json& child : j) deepest = std::max(deepest, Depth(child));
  return (j.is_object() || j.is_array()) ? deepest + 1 : 0;
}

bool SameKv(const EtcdKeyValue& a, const EtcdKeyValue& b) {
  return a.key == b.key && a.value == b.value && a.create_revision == b.create_revision &&
         a.mod_revision == b.mod_revision && a.version == b.version && a.lease == b.lease;
}

json AsGateway(const EtcdKeyValue& kv) {
  return json{{"key", gw::Base64(kv.key)},
              {"value", gw::Base64(kv.value)},
              {"create_revision", std::to_string(kv.create_revision)},
              {"mod_revision", std::to_string(kv.mod_revision)},
              {"version", std::to_string(kv.version)},
              {"lease", std::to_string(kv.lease)}};
}

void CheckKeyValues(const json& response) {
  std::vector<EtcdKeyValue> kvs;
  if (!gw::ParseKeyValues(response, &kvs)) return;
  json again = json::array();
  for (const EtcdKeyValue& kv : kvs) again.push_back(AsGateway(kv));
  std::vector<EtcdKeyValue> back;
  if (!gw::ParseKeyValues(json{{"kvs", again}}, &back) || back.size() != kvs.size())
    Fail("key-values written back as the gateway does are refused");
  for (size_t i = 0; i < kvs.size(); ++i)
    if (!SameKv(kvs[i], back[i])) Fail("a key-value written back reads differently");
}

void CheckEvents(const json& result) {
  const json* items = nullptr;
  if (!gw::ArrayField(result, "events", &items)) return;
  for (const json& item : *items) {
    EtcdEvent event;
    if (!gw::ParseEvent(item, &event)) return;
    EtcdEvent back;
    const json written{{"type", event.type == EtcdEvent::Type::kPut ? "PUT" : "DELETE"},
                       {"kv", AsGateway(event.kv)}};
    if (!gw::ParseEvent(written, &back) || back.type != event.type || !SameKv(back.kv, event.kv))
      Fail("an event written back reads differently");
  }
}

void Answer(std::string_view text) {
  json body;
  std::string error;
  if (!gw::ParseJsonAnswer(text, &body, &error)) {
    if (error.empty()) Fail("a refused answer without a message");
    // "bad JSON (<excerpt>) in \"<excerpt>\"": two excerpts and some words.
    CheckQuoted(error, 2);
    return;
  }
  if (Depth(body) > chronolink::kMaxJsonDepth) Fail("JSON deeper than the limit accepted");
  int64_t value = 0;
  int code = 0;
  CheckQuoted(gw::GatewayErrorMessage(body, &code), 1);
  if (!body.is_object()) return;
  // The client's answers.
  CheckKeyValues(body);
  (void)gw::HeaderRevision(body, &value);
  (void)gw::BoolField(body, "more");
  (void)gw::BoolField(body, "succeeded");
  (void)gw::Int64Field(body, "deleted", &value);
  (void)gw::Int64Field(body, "ID", &value);
  const json* responses = nullptr;
  if (gw::ArrayField(body, "responses", &responses)) {
    for (const json& r : *responses) {
      if (const json* range = gw::ObjectField(r, "response_range")) CheckKeyValues(*range);
      if (const json* del = gw::ObjectField(r, "response_delete_range")) (void)gw::Int64Field(*del, "deleted", &value);
    }
  }
  // The watcher's.
  if (const json* result = gw::ObjectField(body, "result")) {
    (void)gw::Int64Field(*result, "TTL", &value);
    (void)gw::Int64Field(*result, "compact_revision", &value);
    (void)gw::HeaderRevision(*result, &value);
    CheckEvents(*result);
  }
}

struct Split {
  bool ok = true;
  std::vector<std::string> objects;
};

Split SplitStream(std::string_view bytes, bool in_pieces) {
  chronolink::JsonObjectStream stream(kStreamLimit);
  Split out;
  std::string error;
  uint32_t state = 0x2545F491u ^ static_cast<uint32_t>(bytes.size());
  for (size_t pos = 0; pos < bytes.size() && out.ok;) {
    size_t n = bytes.size() - pos;
    if (in_pieces) {
      state = state * 1664525u + 1013904223u;
      n = std::min<size_t>(n, 1 + (state >> 25));
    }
    out.ok = stream.Feed(bytes.substr(pos, n), &out.objects, &error);
    pos += n;
  }
  if (!out.ok) {
    if (error.empty()) Fail("a refused stream without a message");
    CheckQuoted(error, 1);
  }
  for (const std::string& o : out.objects) {
    if (o.size() > kStreamLimit || o.front() != '{' || o.back() != '}') Fail("a split object is not {...}");
  }
  return out;
}

void Stream(std::string_view bytes) {
  const Split whole = SplitStream(bytes, false);
  const Split pieces = SplitStream(bytes, true);
  if (whole.ok != pieces.ok || whole.objects != pieces.objects) Fail("splitting in pieces differs");
  for (const std::string& o : whole.objects) Answer(o);
}

void Endpoint(std::string_view text) {
  std::string host, error;
  int port = 0;
  if (!chronolink::ParseEtcdEndpoint(std::string(text), &host, &port, &error)) {
    if (error.empty()) Fail("a refused endpoint without a message");
    CheckQuoted(error, 1);
    return;
  }
  if (host.empty() || host.find('\0') != std::string::npos || port < 1 || port > 65535)
    Fail("a bad endpoint accepted");
  const bool ipv6 = host.find(':') != std::string::npos;
  const std::string url = "http://" + (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
  std::string host2;
  int port2 = 0;
  if (!chronolink::ParseEtcdEndpoint(url, &host2, &port2, &error) || host2 != host || port2 != port)
    Fail("an endpoint does not parse back from its own URL");
}

void Prefix(std::string_view prefix) {
  const std::string end = chronolink::PrefixRangeEnd(prefix);
  if (end == std::string(1, '\0')) {
    if (prefix.find_first_not_of('\xff') != std::string_view::npos) Fail("range end \\0 for a bounded prefix");
    return;
  }
  const auto below = [&](const std::string& key) {
    return std::lexicographical_compare(key.begin(), key.end(), end.begin(), end.end(),
                                        [](char a, char b) { return static_cast<uint8_t>(a) < static_cast<uint8_t>(b); });
  };
  if (!below(std::string(prefix)) || !below(std::string(prefix) + std::string(8, '\xff')))
    Fail("a key with the prefix is not below its range end");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Answer(text);
  Stream(text);
  Endpoint(text);
  Prefix(text.substr(0, 64));
  return 0;
}
