#include "agent/coord/etcd/etcd_client.h"

#include <httplib.h>
#include <sodium.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "agent/coord/etcd/etcd_auth.h"

namespace chronolink {

using namespace etcd_gateway;  // NOLINT: this file is the gateway's client
using nlohmann::json;

namespace {

// Keys and values of one PutMany transaction: base64 makes it ~1.4 MiB on
// the wire, under etcd's default --max-request-bytes of 1.5 MiB.
constexpr size_t kMaxTxnPayloadBytes = 1u << 20;

// A prefix read whose revision is compacted between two pages starts over
// at the current revision, this many times in all.
constexpr int kPrefixReadAttempts = 3;

std::string LeaseNotFound(int64_t lease_id) { return "etcd: lease " + std::to_string(lease_id) + " not found"; }

// What etcd 3.4's gateway answers, in plain text, to a client certificate
// with a CommonName once auth is on (whatever the token says).
constexpr char kGatewayRefusesCommonName[] = "CommonName of client sending a request against gateway";

// etcd's answers that no retry can fix: the credentials or the role.
bool IsAuthRefusal(std::string_view message) {
  return message.find("authentication failed") != std::string_view::npos ||
         message.find("permission denied") != std::string_view::npos;
}

// A token goes into a header line: printable ASCII only, of a sane length
// (etcd's simple tokens are ~25 characters, JWTs a few hundred).
bool ValidToken(const std::string& token) {
  constexpr size_t kMaxTokenBytes = 8192;
  return !token.empty() && token.size() <= kMaxTokenBytes &&
         std::all_of(token.begin(), token.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

}  // namespace

struct EtcdClient::Endpoint {
  std::string url, host;
  int port = 0;
  bool https = false;
  std::unique_ptr<httplib::ClientImpl> http;  // created on first use
};

struct EtcdClient::Reply {
  std::string text;  // the answer as it came, for excerpts in errors
  json body;         // parsed, and so no deeper than kMaxJsonDepth
  int http_status = 0;
  int grpc_code = 0;
  bool too_large = false;  // cut at max_answer_bytes
  std::string message;     // etcd's error message, when it answered one
  std::string url;         // the endpoint that answered
};

EtcdClient::EtcdClient(EtcdClientOptions options) : options_(std::move(options)) {
  for (const std::string& url : options_.endpoints) {
    auto endpoint = std::make_unique<Endpoint>();
    endpoint->url = url;
    std::string error;
    ParseEtcdEndpoint(url, &endpoint->host, &endpoint->port, &error, &endpoint->https);
    endpoints_.push_back(std::move(endpoint));
  }
  config_error_ = CheckEtcdEndpoints(options_);
}

EtcdClient::~EtcdClient() = default;

const std::string& EtcdClient::current_endpoint() const {
  static const std::string kNone;
  return endpoints_.empty() ? kNone : endpoints_[current_]->url;
}

// One POST and its answer, read within limits: the read timeout bounds each
// wait, the deadline a server that dribbles its answer, the size limit one
// that sends too much.
struct EtcdClient::Exchange {
  bool sent = false;
  httplib::Error http_error = httplib::Error::Success;
  int status = 0;
  bool too_slow = false, too_large = false;
  int64_t elapsed_ms = 0;
};

EtcdClient::Exchange EtcdClient::Post(Endpoint& endpoint, const std::string& path, const std::string& body,
                                      bool with_token, std::string* answer) {
  if (!endpoint.http) endpoint.http = MakeHttpClient(endpoint.host, endpoint.port, endpoint.https, options_);
  ClearTlsFailure(endpoint.http.get());
  SetTimeouts(endpoint.http.get(), options_.connect_timeout_ms, options_.request_timeout_ms,
              options_.request_timeout_ms);
  const Clock::time_point start = Clock::now();
  Exchange x;
  answer->clear();
  httplib::Request request;
  request.method = "POST";
  request.path = path;
  request.headers = {{"Content-Type", "application/json"}};
  if (with_token) AddAuthHeader(options_.auth.get(), &request);
  request.body = body;
  request.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    x.too_large = answer->size() + size > options_.max_answer_bytes;
    if (!x.too_large) answer->append(data, size);
    x.too_slow = ElapsedMs(start) > options_.connect_timeout_ms + options_.request_timeout_ms;
    return !x.too_large && !x.too_slow;
  };
  request.response_handler = [&](const httplib::Response& response) {
    x.status = response.status;
    return true;
  };
  httplib::Response response;
  x.sent = endpoint.http->send(request, response, x.http_error);
  x.elapsed_ms = ElapsedMs(start);
  return x;
}

// cpp-httplib 0.11 (the client's version): etcd ends its error answers with
// an HTTP trailer, which httplib takes for a broken chunked body after it
// delivered the body whole. Such an answer arrived.
bool EtcdClient::TrailerOnlyFailure(const Exchange& x, const Reply& reply) {
  return !x.sent && x.http_error == httplib::Error::Read && x.status != 0 && !x.too_slow && !x.too_large &&
         reply.body.is_object();
}

// Nothing usable came back: why, and whether another endpoint may be tried.
void EtcdClient::ClassifyTransportFailure(const Exchange& x, Endpoint& endpoint, const std::string& path,
                                          const std::string& answer, Reply* reply, bool* may_retry,
                                          std::string* error) {
  const std::string where = "etcd " + endpoint.url + ": ";
  *may_retry = x.http_error == httplib::Error::Connection || x.http_error == httplib::Error::ConnectionTimeout ||
               x.http_error == httplib::Error::SSLConnection;  // the handshake failed: nothing was sent
  // A refusal OpenSSL named (a certificate, an alert), or etcd closing the
  // connection under the first request, is a setting to fix; a handshake
  // that merely failed may be a slow or restarting etcd.
  const bool tls_refused = !TlsFailure(endpoint.http.get()).empty() ||
                           TlsClosedAfterHandshake(x.http_error, x.elapsed_ms, options_, endpoint.http.get());
  last_failure_ = tls_refused ? EtcdFailure::kTls : EtcdFailure::kUnreachable;
  if (x.too_large) {
    last_failure_ = EtcdFailure::kAnswer;
    reply->too_large = true;
    *error = where + "answer to " + path + " larger than " + std::to_string(options_.max_answer_bytes) +
             " bytes: " + Excerpt(answer);
  } else if (x.too_slow) {
    *error = where + "no complete answer within " + std::to_string(options_.request_timeout_ms) + " ms";
  } else {
    *error = where + DescribeTransportError(x.http_error, endpoint.host, x.elapsed_ms, options_,
                                            endpoint.http.get());
  }
}

// etcd 3.4.10+ (the server's version): with auth on, its gateway refuses,
// in plain text with HTTP 400, every request whose client certificate has
// a CommonName. Says so and how to fix it, or "" for any other answer.
std::string EtcdClient::CommonNameRefusal(const std::string& answer) {
  if (answer.find(kGatewayRefusesCommonName) == std::string::npos) return "";
  return "etcd refuses gateway requests whose client certificate has a CommonName while its auth is on (" +
         Excerpt(answer) + "): issue the agents' certificate (--etcd-cert) without a CN, e.g. subject /O=chronolink";
}

// An answer other than 200: etcd's message, and what kind of failure.
void EtcdClient::ClassifyHttpError(int status, const std::string& where, const std::string& answer, Reply* reply,
                                   std::string* error) {
  reply->message = GatewayErrorMessage(reply->body, &reply->grpc_code);
  if (IsAuthRefusal(reply->message)) last_failure_ = EtcdFailure::kAuth;
  if (std::string refusal = CommonNameRefusal(answer); !refusal.empty()) {
    last_failure_ = EtcdFailure::kTls;
    reply->message = std::move(refusal);
  }
  *error = where + "HTTP " + std::to_string(status) + ": " + (reply->message.empty() ? Excerpt(answer) : reply->message);
}

bool EtcdClient::CallOne(Endpoint& endpoint, const std::string& path, const std::string& body, bool with_token,
                         Reply* reply, bool* may_retry, std::string* error) {
  reply->message.clear();
  reply->url = endpoint.url;
  reply->too_large = false;
  std::string& answer = reply->text;
  const Exchange x = Post(endpoint, path, body, with_token, &answer);
  std::string parse_error;
  reply->body = json();
  const bool parsed = !x.too_large && !x.too_slow && ParseJsonAnswer(answer, &reply->body, &parse_error);
  if (!x.sent && !TrailerOnlyFailure(x, *reply)) {
    ClassifyTransportFailure(x, endpoint, path, answer, reply, may_retry, error);
    return false;
  }
  const std::string where = "etcd " + endpoint.url + ": ";
  *may_retry = false;
  reply->http_status = x.status;
  last_failure_ = EtcdFailure::kAnswer;
  if (x.status != 200) {
    ClassifyHttpError(x.status, where, answer, reply, error);
    return false;
  }
  if (!parsed) {
    *error = where + "bad answer to " + path + ": " + parse_error;
    return false;
  }
  if (!reply->body.is_object()) {
    *error = where + "answer to " + path + " is not a JSON object: " + Excerpt(answer);
    return false;
  }
  last_failure_ = EtcdFailure::kNone;
  return true;
}

bool EtcdClient::Call(const std::string& path, const std::string& body, bool idempotent, Reply* reply,
                      std::string* error) {
  EtcdAuth* auth = options_.auth.get();
  if (auth != nullptr && !auth->token() && !Authenticate(error)) return false;
  const std::string token = auth != nullptr ? auth->token().value_or("") : "";
  if (CallEndpoints(path, body, idempotent, /*with_token=*/true, reply, error)) return true;
  if (auth == nullptr || reply->http_status == 0 || !IsStaleTokenMessage(reply->message)) return false;
  // etcd refused the token (expired, or issued by an etcd since restarted),
  // not the request, which was not applied: a new token, and once more.
  spdlog::debug("{}; authenticating again", *error);
  auth->Invalidate(token);
  if (!Authenticate(error)) return false;
  *reply = Reply();
  if (CallEndpoints(path, body, idempotent, /*with_token=*/true, reply, error)) return true;
  if (IsStaleTokenMessage(reply->message)) {
    last_failure_ = EtcdFailure::kAuth;
    *error += " (also with a token just issued)";
  }
  return false;
}

bool EtcdClient::Authenticate(std::string* error) {
  EtcdAuth* auth = options_.auth.get();
  if (auth == nullptr) {
    *error = "etcd: no user configured";
    return false;
  }
  std::string body = json{{"name", auth->user()}, {"password", auth->password()}}.dump();
  Reply reply;
  // Idempotent: a second token does no harm.
  const bool ok = CallEndpoints("/v3/auth/authenticate", body, /*idempotent=*/true, /*with_token=*/false,
                                &reply, error);
  sodium_memzero(body.data(), body.size());
  if (!ok) {
    // Unreachable, or TLS (the certificate's CommonName included): *error says so.
    if (reply.http_status == 0 || last_failure_ == EtcdFailure::kTls) return false;
    if (reply.message.find("authentication is not enabled") != std::string::npos) {
      // A user was configured before etcd's auth was switched on: go
      // without a token; "user name is empty" later brings us back here.
      spdlog::warn("etcd {}: a user is configured (--etcd-user) but etcd has authentication switched off; "
                   "requests go without a token",
                   reply.url);
      auth->SetToken("");
      last_failure_ = EtcdFailure::kNone;
      return true;
    }
    last_failure_ = EtcdFailure::kAuth;
    *error = "etcd " + reply.url + ": authentication failed for user " + Excerpt(auth->user()) +
             ": etcd says " + (reply.message.empty() ? Excerpt(reply.text) : reply.message);
    return false;
  }
  auto token = reply.body.find("token");
  if (token == reply.body.end() || !token->is_string() || !ValidToken(token->get_ref<const std::string&>())) {
    last_failure_ = EtcdFailure::kAnswer;
    *error = "etcd " + reply.url + ": bad authenticate answer (no usable token)";
    return false;
  }
  auth->SetToken(token->get<std::string>());
  return true;
}

bool EtcdClient::CallEndpoints(const std::string& path, const std::string& body, bool idempotent,
                               bool with_token, Reply* reply, std::string* error) {
  if (!config_error_.empty()) {
    last_failure_ = EtcdFailure::kAnswer;
    *error = config_error_;
    return false;
  }
  std::string errors;
  const size_t first = current_;
  for (size_t attempt = 0; attempt < endpoints_.size(); ++attempt) {
    const size_t index = (first + attempt) % endpoints_.size();
    bool may_retry = false;
    std::string one_error;
    if (CallOne(*endpoints_[index], path, body, with_token, reply, &may_retry, &one_error)) {
      current_ = index;
      return true;
    }
    errors += (errors.empty() ? "" : "; ") + one_error;
    if (reply->too_large) {  // every endpoint holds the same data: final
      *error = one_error;
      return false;
    }
    const bool answered = reply->http_status != 0;
    if (answered) {
      // etcd answered: the answer is final. An unavailable member (no
      // leader, overloaded) is left for the next request, though.
      if (reply->http_status == kHttpUnavailable) current_ = (index + 1) % endpoints_.size();
      *error = one_error;
      return false;
    }
    // No answer: the next request starts elsewhere; this one goes on only
    // where repeating it cannot apply it twice.
    current_ = (index + 1) % endpoints_.size();
    if (!may_retry && !idempotent) break;
    reply->http_status = 0;
  }
  *error = errors;
  return false;
}

bool EtcdClient::RawCall(const std::string& path, const std::string& json_body, std::string* json_answer,
                         std::string* error) {
  Reply reply;
  if (!Call(path, json_body, /*idempotent=*/false, &reply, error)) return false;
  *json_answer = std::move(reply.text);
  return true;
}

bool EtcdClient::Put(std::string_view key, std::string_view value, int64_t lease, std::string* error,
                     int64_t* revision) {
  Reply reply;
  if (!Call("/v3/kv/put", PutRequest(key, value, lease).dump(), /*idempotent=*/false, &reply, error)) {
    if (reply.grpc_code == kGrpcNotFound && lease != 0) *error = LeaseNotFound(lease);
    return false;
  }
  int64_t put_revision = 0;
  if (!HeaderRevision(reply.body, &put_revision)) {
    *error = "etcd " + current_endpoint() + ": bad header in the answer to a put";
    return false;
  }
  if (revision != nullptr) *revision = put_revision;
  return true;
}

bool EtcdClient::Get(std::string_view key, std::optional<EtcdKeyValue>* out, std::string* error,
                     int64_t* revision) {
  Reply reply;
  if (!Call("/v3/kv/range", RangeRequest(key).dump(), /*idempotent=*/true, &reply, error)) return false;
  std::vector<EtcdKeyValue> kvs;
  int64_t header_revision = 0;
  if (!ParseKeyValues(reply.body, &kvs) || !HeaderRevision(reply.body, &header_revision)) {
    *error = "etcd " + current_endpoint() + ": bad range answer: " + Excerpt(reply.text);
    return false;
  }
  out->reset();
  if (!kvs.empty()) *out = std::move(kvs.front());
  if (revision != nullptr) *revision = header_revision;
  return true;
}

bool EtcdClient::GetPrefix(std::string_view prefix, std::vector<EtcdKeyValue>* out, std::string* error,
                           int64_t* revision, const KeyValueFilter& keep) {
  for (int attempt = 1;; ++attempt) {
    bool compacted = false;
    int64_t read_revision = 0;
    if (ReadPrefixPages(prefix, out, &read_revision, &compacted, keep, error)) {
      if (revision != nullptr) *revision = read_revision;
      return true;
    }
    out->clear();
    if (!compacted || attempt == kPrefixReadAttempts) return false;
  }
}

bool EtcdClient::ReadPrefixPages(std::string_view prefix, std::vector<EtcdKeyValue>* out, int64_t* read_revision,
                                 bool* compacted, const KeyValueFilter& keep, std::string* error) {
  out->clear();
  *read_revision = 0;
  std::string last_key;
  int64_t limit = std::max<int64_t>(1, options_.range_page_keys);
  std::string start;  // the first key of the next page; empty: the prefix's first
  for (;;) {
    Reply reply;
    const json request = PrefixPageRequest(prefix, start, limit, *read_revision);
    if (!Call("/v3/kv/range", request.dump(), /*idempotent=*/true, &reply, error)) {
      if (reply.too_large && limit > 1) {  // large values: the same page again, in halves
        limit = (limit + 1) / 2;
        continue;
      }
      *compacted = *read_revision != 0 && reply.grpc_code == kGrpcOutOfRange;
      return false;
    }
    std::vector<EtcdKeyValue> page;
    int64_t header_revision = 0;
    if (!ParseKeyValues(reply.body, &page) || !HeaderRevision(reply.body, &header_revision)) {
      *error = "etcd " + current_endpoint() + ": bad range answer: " + Excerpt(reply.text);
      return false;
    }
    // Later pages read at the first one's revision: one snapshot.
    if (*read_revision == 0) *read_revision = header_revision;
    const bool more = BoolField(reply.body, "more");
    if (!AppendPage(prefix, std::move(page), more, keep, &last_key, out)) {
      *error = "etcd " + current_endpoint() + ": range pages out of order or outside " + Excerpt(prefix) +
               ": " + Excerpt(reply.text);
      return false;
    }
    if (!more) return true;
    start = last_key + '\0';  // the smallest key after the last one
  }
}

bool EtcdClient::AppendPage(std::string_view prefix, std::vector<EtcdKeyValue> page, bool more,
                            const KeyValueFilter& keep, std::string* last_key, std::vector<EtcdKeyValue>* out) {
  // Every key inside the prefix and after the one before: the result is
  // one sorted list, and each page moves the read forward (a server that
  // says "more" forever still has to name new keys).
  if (more && page.empty()) return false;
  for (EtcdKeyValue& kv : page) {
    if (!kv.key.starts_with(prefix) || (!last_key->empty() && kv.key <= *last_key)) return false;
    *last_key = kv.key;
    if (!keep || keep(kv)) out->push_back(std::move(kv));
  }
  return true;
}

bool EtcdClient::Delete(std::string_view key, std::string* error) {
  Reply reply;
  return Call("/v3/kv/deleterange", RangeRequest(key).dump(), /*idempotent=*/true, &reply, error);
}

bool EtcdClient::DeletePrefix(std::string_view prefix, int64_t* deleted, std::string* error) {
  Reply reply;
  if (!Call("/v3/kv/deleterange", PrefixRequest(prefix).dump(), /*idempotent=*/true, &reply, error)) {
    return false;
  }
  if (!Int64Field(reply.body, "deleted", deleted)) {
    *error = "etcd " + current_endpoint() + ": bad deleterange answer: " + Excerpt(reply.text);
    return false;
  }
  return true;
}

bool EtcdClient::GrantLease(int64_t ttl_s, int64_t* lease_id, std::string* error) {
  Reply reply;
  const json request{{"TTL", std::to_string(ttl_s)}};
  if (!Call("/v3/lease/grant", request.dump(), /*idempotent=*/false, &reply, error)) return false;
  int grpc_code = 0;
  auto etcd_error = reply.body.find("error");  // LeaseGrantResponse has an error field of its own
  if (etcd_error != reply.body.end() && etcd_error->is_string() && !etcd_error->get<std::string>().empty()) {
    *error = "etcd " + current_endpoint() + ": granting a lease: " + GatewayErrorMessage(reply.body, &grpc_code);
    return false;
  }
  if (!Int64Field(reply.body, "ID", lease_id) || *lease_id == 0) {
    *error = "etcd " + current_endpoint() + ": bad lease grant answer: " + Excerpt(reply.text);
    return false;
  }
  return true;
}

bool EtcdClient::KeepAliveOnce(int64_t lease_id, int64_t* ttl_s, std::string* error) {
  // A streaming RPC on the gateway: the answer is one {"result": ...}
  // object (or {"error": ...}), then the stream ends.
  Reply reply;
  const json request{{"ID", std::to_string(lease_id)}};
  if (!Call("/v3/lease/keepalive", request.dump(), /*idempotent=*/true, &reply, error)) {
    if (reply.grpc_code == kGrpcNotFound) {  // not seen on 3.4, which answers TTL 0; be lenient
      *ttl_s = 0;
      return true;
    }
    return false;
  }
  int grpc_code = 0;
  const json* result = ObjectField(reply.body, "result");
  if (result == nullptr) {
    const std::string message = GatewayErrorMessage(reply.body, &grpc_code);
    if (grpc_code == kGrpcNotFound) {
      *ttl_s = 0;
      return true;
    }
    *error = "etcd " + current_endpoint() + ": lease keepalive failed: " +
             (message.empty() ? Excerpt(reply.text) : message);
    return false;
  }
  if (!Int64Field(*result, "TTL", ttl_s)) {
    *error = "etcd " + current_endpoint() + ": bad keepalive answer: " + Excerpt(reply.text);
    return false;
  }
  if (*ttl_s < 0) *ttl_s = 0;
  return true;
}

bool EtcdClient::RevokeLease(int64_t lease_id, std::string* error) {
  Reply reply;
  const json request{{"ID", std::to_string(lease_id)}};
  // Not repeated after a lost answer: the repeat would say "not found".
  if (!Call("/v3/lease/revoke", request.dump(), /*idempotent=*/false, &reply, error)) {
    if (reply.grpc_code == kGrpcNotFound) *error = LeaseNotFound(lease_id);
    return false;
  }
  return true;
}

bool EtcdClient::PutMany(const std::vector<std::pair<std::string, std::string>>& kvs, int64_t lease,
                         size_t* stored, std::string* error) {
  *stored = 0;
  while (*stored < kvs.size()) {
    json puts = json::array();
    size_t bytes = 0;
    for (size_t i = *stored; i < kvs.size() && puts.size() < kMaxTxnOps; ++i) {
      const size_t size = kvs[i].first.size() + kvs[i].second.size();
      if (!puts.empty() && bytes + size > kMaxTxnPayloadBytes) break;
      bytes += size;
      puts.push_back(json{{"request_put", PutRequest(kvs[i].first, kvs[i].second, lease)}});
    }
    const size_t count = puts.size();
    // No compare: the success branch always runs.
    const json request{{"success", std::move(puts)}};
    Reply reply;
    if (!Call("/v3/kv/txn", request.dump(), /*idempotent=*/false, &reply, error)) {
      if (reply.grpc_code == kGrpcNotFound && lease != 0) *error = LeaseNotFound(lease);
      return false;
    }
    if (!BoolField(reply.body, "succeeded")) {
      *error = "etcd " + current_endpoint() + ": a transaction without compares failed: " +
               Excerpt(reply.text);
      return false;
    }
    *stored += count;
  }
  return true;
}

bool EtcdClient::PutIfAbsent(std::string_view key, std::string_view value, int64_t lease, bool* created,
                             EtcdKeyValue* current, std::string* error) {
  const json put = PutRequest(key, value, lease);
  const json request{
      {"compare", json::array({json{{"target", "CREATE"},
                                    {"result", "EQUAL"},
                                    {"key", Base64(key)},
                                    {"create_revision", "0"}}})},
      {"success", json::array({json{{"request_put", put}}})},
      {"failure", json::array({json{{"request_range", RangeRequest(key)}}})}};
  Reply reply;
  if (!Call("/v3/kv/txn", request.dump(), /*idempotent=*/false, &reply, error)) {
    if (reply.grpc_code == kGrpcNotFound && lease != 0) *error = LeaseNotFound(lease);
    return false;
  }
  const std::string bad = "etcd " + current_endpoint() + ": bad txn answer: " + Excerpt(reply.text);
  int64_t revision = 0;
  if (!HeaderRevision(reply.body, &revision)) {
    *error = bad;
    return false;
  }
  *created = BoolField(reply.body, "succeeded");
  if (*created) {
    // A put answers with its revision only; the key is what we wrote.
    *current = EtcdKeyValue{std::string(key), std::string(value), revision, revision, 1, lease};
    return true;
  }
  const json* responses = nullptr;
  std::vector<EtcdKeyValue> kvs;
  if (!ArrayField(reply.body, "responses", &responses) || responses->size() != 1 ||
      ObjectField((*responses)[0], "response_range") == nullptr ||
      !ParseKeyValues(*ObjectField((*responses)[0], "response_range"), &kvs) || kvs.empty()) {
    *error = bad;
    return false;
  }
  *current = std::move(kvs.front());
  return true;
}

bool EtcdClient::DeleteIfValue(std::string_view key, std::string_view expected, bool* deleted,
                               std::string* error) {
  const json request{
      {"compare", json::array({json{
                      {"target", "VALUE"}, {"result", "EQUAL"}, {"key", Base64(key)}, {"value", Base64(expected)}}})},
      {"success", json::array({json{{"request_delete_range", RangeRequest(key)}}})}};
  Reply reply;
  if (!Call("/v3/kv/txn", request.dump(), /*idempotent=*/false, &reply, error)) return false;
  *deleted = false;
  if (!BoolField(reply.body, "succeeded")) return true;  // another value, or no key
  const json* responses = nullptr;
  const json* response = nullptr;
  int64_t count = 0;
  if (!ArrayField(reply.body, "responses", &responses) || responses->size() != 1 ||
      (response = ObjectField((*responses)[0], "response_delete_range")) == nullptr ||
      !Int64Field(*response, "deleted", &count)) {
    *error = "etcd " + current_endpoint() + ": bad txn answer: " + Excerpt(reply.text);
    return false;
  }
  *deleted = count > 0;
  return true;
}

}  // namespace chronolink
