// What EtcdClient and EtcdWatcher share about etcd 3.4's v3 JSON gateway
// (HTTP/1.1 + JSON, the grpc-gateway that every etcd client URL also
// serves): the key/value and event records, endpoint options and URLs, and,
// in namespace etcd_gateway, the encoding of requests and answers.
//
// Why the gateway and not gRPC: it needs nothing beyond cpp-httplib and
// nlohmann-json, which the agent links anyway.
//
// What the gateway does that a user must know (etcd 3.4.23, checked by
// tests/unit/etcd_client_test.cc):
//   - keys and values travel base64-encoded; int64s (revisions, lease IDs,
//     TTLs, counts) travel as JSON strings. Both are hidden here: keys and
//     values are raw bytes, any byte allowed.
//   - fields holding their default value are left out of responses: no
//     "kvs" for an empty range, no "TTL" for a lease that no longer exists,
//     no "type" on PUT events, no "succeeded" on a failed transaction.
//   - errors come as a non-200 status with {"error","message","code"}; code
//     is the gRPC code (5 not found, 14 unavailable, ...). Their chunked body
//     ends with an HTTP trailer (Grpc-Trailer-Content-Type) that cpp-httplib
//     0.11 reports as a read error; the client accepts such an answer when
//     its status line and a whole JSON object arrived.
//   - lease keepalive is a streaming RPC: one request gives one
//     {"result":...} object and the stream ends.
//   - a watch is one long POST whose response is a stream of {"result":...}
//     objects; the first says "created". When the start revision was
//     compacted, etcd answers created, then canceled with compact_revision,
//     and leaves the stream open: the client must close it.
//   - the smallest lease TTL is about 2 s with etcd's default timing; a
//     shorter TTL is granted as that.
//   - a transaction holds at most 128 operations (--max-txn-ops).
//   - a range answer says "more" when its limit cut it; later pages read at
//     the first page's revision ("revision") return one consistent snapshot,
//     or fail with code 11 (out of range) once that revision is compacted.
//   - a watch created with "fragment" splits an answer larger than etcd's
//     --max-request-bytes into several, each but the last marked
//     "fragment"; the split may fall between events of one revision.
//
// Security: https endpoints verify etcd's certificate against a given CA and
// may present a client certificate (etcd_tls.h); etcd's user/password auth
// adds a token to every request (etcd_auth.h). Plain http is neither
// encrypted nor authenticated: anyone on its path can read and rewrite the
// traffic (chronolink seals its values with a MAC, etcd_value_seal.h, so
// altered values are refused, but they travel readable).
//
// Answers are untrusted input (anyone on the plain-HTTP path, or a fake
// etcd, can write them): each is read up to max_answer_bytes, parsed only
// when no deeper than kMaxJsonDepth (a recursive walk of deeper JSON, such
// as nlohmann's dump(), would overflow the stack), and quoted in errors as a
// short excerpt of its raw text, never re-serialised.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace httplib {
class ClientImpl;
struct Request;
enum class Error;
}  // namespace httplib

namespace chronolink {

class EtcdAuth;
class EtcdTlsCredentials;

struct EtcdKeyValue {
  std::string key, value;
  int64_t create_revision = 0, mod_revision = 0, version = 0, lease = 0;
};

struct EtcdEvent {
  enum class Type { kPut, kDelete } type = Type::kPut;
  EtcdKeyValue kv;  // a delete carries the key and its mod_revision only
};

// Endpoints: a request goes to the current endpoint; when that one does not
// answer, the next request starts at the next endpoint. Within one request
// the next endpoints are tried only where that cannot apply it twice: the
// connection failed (nothing was sent), or the request is a read, a delete
// or a lease keepalive. An answer from etcd, error or not, is final (a 503,
// "unavailable", also moves the next request on). So one call takes at most
// endpoints x (connect_timeout_ms + request_timeout_ms), a refused
// connection costing next to nothing.
struct EtcdClientOptions {
  // "http://host:port" or "https://host:port" (IPv6 as http://[::1]:2379),
  // all of one scheme. Tried in order; the client sticks to the first that
  // answers until it fails.
  std::vector<std::string> endpoints;
  int64_t connect_timeout_ms = 1000;
  // Bounds the wait for the answer (each read, and the whole answer).
  int64_t request_timeout_ms = 2000;
  // The largest answer read, and the largest message of a watch stream.
  // One key-value (and one watch fragment) is at most etcd's
  // --max-request-bytes, 1.5 MiB by default, about 2 MiB as the gateway's
  // base64 JSON: 8 MiB leaves room for an operator who raises that limit to
  // about 5 MiB, and bounds what a hostile answer costs.
  size_t max_answer_bytes = 8u << 20;
  // Keys per page of GetPrefix. A window summary is under 1 KiB as the
  // gateway's JSON, so a page is about 1 MiB; a page over max_answer_bytes
  // (large values) is read again in halves.
  int64_t range_page_keys = 1000;
  // Required by https endpoints: the CA and client certificate.
  std::shared_ptr<const EtcdTlsCredentials> tls = nullptr;
  // etcd user/password auth; null: requests carry no token.
  std::shared_ptr<EtcdAuth> auth = nullptr;
};

// Splits "http://HOST:PORT[/]" or "https://HOST:PORT[/]" into host (brackets
// of an IPv6 literal removed), port and whether it is https. Other schemes,
// user info, paths, queries and missing or bad ports are errors that say
// what is wrong.
bool ParseEtcdEndpoint(const std::string& url, std::string* host, int* port, std::string* error,
                       bool* https = nullptr);

// Checks a list of endpoints as a whole: each parses, all share one scheme,
// and https ones come with TLS credentials. "" when fine, else the error.
std::string CheckEtcdEndpoints(const EtcdClientOptions& options);

// The range_end that makes [prefix, range_end) exactly the keys starting with
// prefix, as etcd's clientv3 computes it: the last byte below 0xff is
// incremented and what follows dropped. "\0" (every key from the start key
// on) when there is no such byte, including for the empty prefix.
std::string PrefixRangeEnd(std::string_view prefix);

// Nesting deeper than this in an answer is refused. etcd's answers nest at
// most 6 deep (a transaction's range response); 32 leaves room for fields
// of later versions and is far from any stack limit.
constexpr int kMaxJsonDepth = 32;

// Splits a byte stream of concatenated JSON objects (the gateway's streaming
// answers: one object per line, but chunks may split or join them) into
// whole objects. It checks only the brackets (each closed by its own kind)
// and strings, not the JSON.
class JsonObjectStream {
 public:
  explicit JsonObjectStream(size_t max_object_bytes = 8u << 20, int max_depth = kMaxJsonDepth)
      : max_object_bytes_(max_object_bytes), max_depth_(max_depth) {}
  // Appends bytes; complete top-level objects are appended to *objects.
  // False (with *error) when the bytes are not a sequence of objects, or one
  // outgrows the size limit or nests deeper than max_depth; the stream is
  // then unusable (Reset it).
  bool Feed(std::string_view bytes, std::vector<std::string>* objects, std::string* error);
  bool InsideObject() const { return !closers_.empty(); }
  void Reset();

 private:
  size_t max_object_bytes_;
  int max_depth_;
  std::string current_;
  std::string closers_;  // the bracket each open '{' or '[' expects, innermost last
  bool in_string_ = false, escaped_ = false;
};

// The encoding, for etcd_client.cc and etcd_watcher.cc only.
namespace etcd_gateway {

using Clock = std::chrono::steady_clock;
int64_t ElapsedMs(Clock::time_point since);

constexpr int kGrpcNotFound = 5;
constexpr int kGrpcOutOfRange = 11;  // a read at a compacted revision
constexpr int kHttpUnavailable = 503;
constexpr size_t kMaxTxnOps = 128;  // etcd's default --max-txn-ops

std::string Base64(std::string_view bytes);

// Fields of an answer. The gateway writes int64s as strings (numbers are
// accepted too) and leaves out fields holding their default: an absent
// field reads as 0, false, empty. False: present but of the wrong kind.
bool Int64Field(const nlohmann::json& object, const char* name, int64_t* out);
bool BoolField(const nlohmann::json& object, const char* name);
// An object member, or nullptr when absent or not an object.
const nlohmann::json* ObjectField(const nlohmann::json& object, const char* name);
// An array member; an absent one is empty (the gateway omits empty lists).
bool ArrayField(const nlohmann::json& object, const char* name, const nlohmann::json** out);

bool ParseKeyValues(const nlohmann::json& range_response, std::vector<EtcdKeyValue>* out);
bool ParseEvent(const nlohmann::json& j, EtcdEvent* event);
// The revision in the answer's header; 0 without a header.
bool HeaderRevision(const nlohmann::json& response, int64_t* revision);
// The message of a gateway error object: {"error": "...", "message": "...",
// "code": N} for unary calls, {"error": {"message": ..., "grpc_code": N}} in
// streams, as an excerpt. Empty when j is no such object.
std::string GatewayErrorMessage(const nlohmann::json& j, int* grpc_code);
// Parses one answer: JSON no deeper than kMaxJsonDepth (checked in a first
// pass that builds nothing). False, with a message that quotes an excerpt of
// the text, for bad or too deeply nested JSON.
bool ParseJsonAnswer(std::string_view text, nlohmann::json* out, std::string* error);

// A short quoted excerpt (QuotedText: escaped, at most kExcerptBytes, then
// "...") of what the server sent, for error messages: never the whole of
// an untrusted text, never a raw control character.
constexpr size_t kExcerptBytes = 200;
std::string Excerpt(std::string_view text);

// Request bodies for one key, and for every key under a prefix.
nlohmann::json RangeRequest(std::string_view key);
nlohmann::json PrefixRequest(std::string_view prefix);
// One page of a prefix read: the keys from start_key (empty: the prefix's
// first) to the prefix's end, at most limit of them, sorted by key, read at
// revision (0: the current one).
nlohmann::json PrefixPageRequest(std::string_view prefix, std::string_view start_key, int64_t limit,
                                 int64_t revision);
nlohmann::json PutRequest(std::string_view key, std::string_view value, int64_t lease);

// One connection per request (nothing stale after a server restart), with a
// Host header that survives IPv6 literals; over TLS (EtcdTlsClient) for
// https, which needs options.tls.
std::unique_ptr<httplib::ClientImpl> MakeHttpClient(const std::string& host, int port, bool https,
                                                    const EtcdClientOptions& options);
void SetTimeouts(httplib::ClientImpl* client, int64_t connect_ms, int64_t read_ms, int64_t write_ms);
// The Authorization header with auth's token, when there is one.
void AddAuthHeader(const EtcdAuth* auth, httplib::Request* request);
// What TLS said about the client's last exchange (EtcdTlsClient::failure),
// empty for plain http or when it said nothing; and clearing it before one.
std::string TlsFailure(const httplib::ClientImpl* client);
void ClearTlsFailure(httplib::ClientImpl* client);
// With TLS 1.3 etcd checks the client certificate after the handshake: a
// refusal then shows as a connection closed under the first request, its
// alert often lost to the reset. True for such an end of an https exchange
// (a failed write, or a read that ended before the timeout).
bool TlsClosedAfterHandshake(httplib::Error error, int64_t elapsed_ms, const EtcdClientOptions& options,
                             const httplib::ClientImpl* client);
// What a failed exchange means, in words. httplib reports kinds, not errno;
// for TLS, the reason OpenSSL gave comes first.
std::string DescribeTransportError(httplib::Error error, const std::string& host, int64_t elapsed_ms,
                                   const EtcdClientOptions& options, const httplib::ClientImpl* client = nullptr);
// TCP keepalives notice a server that vanished without closing the
// connection (a partition, a power cut) on a quiet watch: about 11 s.
void EnableKeepalive(int socket);

}  // namespace etcd_gateway
}  // namespace chronolink
