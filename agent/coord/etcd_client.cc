#include "agent/coord/etcd_client.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sodium.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <nlohmann/json.hpp>

namespace chronolink {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kGrpcNotFound = 5;
constexpr int kHttpUnavailable = 503;
constexpr int64_t kInitialBackoffMs = 100;
constexpr int64_t kMaxBackoffMs = 2000;
constexpr size_t kMaxAnswerBytes = 256u << 20;  // far above etcd's own request limits

int64_t ElapsedMs(Clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count();
}

// ---- base64 and JSON field helpers ----------------------------------------

std::string Base64(std::string_view bytes) {
  const size_t size = sodium_base64_ENCODED_LEN(bytes.size(), sodium_base64_VARIANT_ORIGINAL);
  std::string out(size, '\0');
  sodium_bin2base64(out.data(), size, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
                    sodium_base64_VARIANT_ORIGINAL);
  out.resize(size - 1);  // the terminating NUL
  return out;
}

bool FromBase64(std::string_view text, std::string* out) {
  std::string bytes(text.size() / 4 * 3 + 3, '\0');
  size_t length = 0;
  const char* end = nullptr;
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(bytes.data()), bytes.size(), text.data(), text.size(),
                        nullptr, &length, &end, sodium_base64_VARIANT_ORIGINAL) != 0 ||
      end != text.data() + text.size()) {
    return false;
  }
  bytes.resize(length);
  *out = std::move(bytes);
  return true;
}

// The gateway writes int64s as strings; numbers are accepted too. An absent
// field is its default, 0.
bool Int64Field(const json& object, const char* name, int64_t* out) {
  *out = 0;
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return true;
  if (it->is_number_integer()) {
    *out = it->get<int64_t>();
    return true;
  }
  if (!it->is_string()) return false;
  const std::string& text = it->get_ref<const std::string&>();
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

bool BoolField(const json& object, const char* name) {
  auto it = object.find(name);
  return it != object.end() && it->is_boolean() && it->get<bool>();
}

bool BytesField(const json& object, const char* name, std::string* out) {
  out->clear();
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return true;
  return it->is_string() && FromBase64(it->get_ref<const std::string&>(), out);
}

// An object member, or nullptr when absent or not an object.
const json* ObjectField(const json& object, const char* name) {
  auto it = object.find(name);
  return it != object.end() && it->is_object() ? &*it : nullptr;
}

// An array member; an absent one is empty (the gateway omits empty lists).
bool ArrayField(const json& object, const char* name, const json** out) {
  static const json kEmpty = json::array();
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) {
    *out = &kEmpty;
    return true;
  }
  *out = &*it;
  return it->is_array();
}

bool ParseKeyValue(const json& j, EtcdKeyValue* kv) {
  return j.is_object() && BytesField(j, "key", &kv->key) && BytesField(j, "value", &kv->value) &&
         Int64Field(j, "create_revision", &kv->create_revision) &&
         Int64Field(j, "mod_revision", &kv->mod_revision) && Int64Field(j, "version", &kv->version) &&
         Int64Field(j, "lease", &kv->lease);
}

bool ParseKeyValues(const json& range_response, std::vector<EtcdKeyValue>* out) {
  const json* kvs = nullptr;
  if (!ArrayField(range_response, "kvs", &kvs)) return false;
  out->clear();
  out->reserve(kvs->size());
  for (const json& item : *kvs) {
    EtcdKeyValue kv;
    if (!ParseKeyValue(item, &kv)) return false;
    out->push_back(std::move(kv));
  }
  return true;
}

bool HeaderRevision(const json& response, int64_t* revision) {
  const json* header = ObjectField(response, "header");
  if (header == nullptr) {
    *revision = 0;
    return true;
  }
  return Int64Field(*header, "revision", revision);
}

bool ParseEvent(const json& j, EtcdEvent* event) {
  if (!j.is_object()) return false;
  auto type = j.find("type");
  if (type == j.end() || (type->is_string() && *type == "PUT")) {
    event->type = EtcdEvent::Type::kPut;
  } else if (type->is_string() && *type == "DELETE") {
    event->type = EtcdEvent::Type::kDelete;
  } else {
    return false;
  }
  const json* kv = ObjectField(j, "kv");
  return kv != nullptr && ParseKeyValue(*kv, &event->kv);
}

// The message of a gateway error object: {"error": "...", "message": "...",
// "code": N} for unary calls, {"error": {"message": ..., "grpc_code": N}} in
// streams.
std::string GatewayErrorMessage(const json& j, int* grpc_code) {
  *grpc_code = 0;
  if (!j.is_object()) return "";
  const json* source = &j;
  if (const json* nested = ObjectField(j, "error")) source = nested;
  int64_t code = 0;
  if ((Int64Field(*source, "code", &code) && code != 0) || Int64Field(*source, "grpc_code", &code)) {
    *grpc_code = static_cast<int>(code);
  }
  for (const char* field : {"message", "error"}) {
    auto it = source->find(field);
    if (it != source->end() && it->is_string() && !it->get_ref<const std::string&>().empty()) {
      return it->get<std::string>();
    }
  }
  return "";
}

// A short printable excerpt of what the server sent, for error messages.
std::string Excerpt(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 120)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (text.size() > 120) out += "...";
  return out;
}

std::string LeaseNotFound(int64_t lease_id) { return "etcd: lease " + std::to_string(lease_id) + " not found"; }

// The range a prefix operation covers: etcd rejects an empty key, so the
// empty prefix is the range ["\0", "\0"), every key.
std::string PrefixStartKey(std::string_view prefix) {
  return prefix.empty() ? std::string(1, '\0') : std::string(prefix);
}

json RangeRequest(std::string_view key) { return json{{"key", Base64(key)}}; }

json PrefixRequest(std::string_view prefix) {
  return json{{"key", Base64(PrefixStartKey(prefix))}, {"range_end", Base64(PrefixRangeEnd(prefix))}};
}

// ---- HTTP ------------------------------------------------------------------

std::string HostHeader(const std::string& host, int port) {
  const bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

void SetTimeouts(httplib::Client* client, int64_t connect_ms, int64_t read_ms, int64_t write_ms) {
  client->set_connection_timeout(connect_ms / 1000, (connect_ms % 1000) * 1000);
  client->set_read_timeout(read_ms / 1000, (read_ms % 1000) * 1000);
  client->set_write_timeout(write_ms / 1000, (write_ms % 1000) * 1000);
}

std::unique_ptr<httplib::Client> MakeHttpClient(const std::string& host, int port) {
  auto client = std::make_unique<httplib::Client>(host, port);
  // httplib writes "host:port", which an IPv6 literal makes ambiguous.
  client->set_default_headers({{"Host", HostHeader(host, port)}});
  client->set_keep_alive(false);  // one connection per request: nothing stale after a server restart
  return client;
}

bool HostIsNumeric(const std::string& host) {
  in6_addr addr6;
  in_addr addr4;
  return inet_pton(AF_INET, host.c_str(), &addr4) == 1 || inet_pton(AF_INET6, host.c_str(), &addr6) == 1;
}

bool HostResolves(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &result) != 0) return false;
  freeaddrinfo(result);
  return true;
}

// What a failed exchange means, in words. httplib reports kinds, not errno.
std::string DescribeTransportError(httplib::Error error, const std::string& host, int64_t elapsed_ms,
                                   const EtcdClientOptions& options) {
  switch (error) {
    case httplib::Error::Connection:
      if (!HostIsNumeric(host) && !HostResolves(host)) return "cannot resolve host " + host;
      return "connection refused";
    case httplib::Error::ConnectionTimeout:
      return "connect timed out after " + std::to_string(options.connect_timeout_ms) + " ms";
    case httplib::Error::Read:
      if (elapsed_ms + 50 >= options.request_timeout_ms) {
        return "no answer within " + std::to_string(options.request_timeout_ms) + " ms";
      }
      return "connection closed before the answer was complete";
    case httplib::Error::Write:
      return "sending the request failed";
    default:
      return "request failed (" + httplib::to_string(error) + ")";
  }
}

// TCP keepalives notice a server that vanished without closing the
// connection (a partition, a power cut) on a quiet watch: about 11 s.
void EnableKeepalive(int socket) {
  int on = 1, idle_s = 5, interval_s = 2, count = 3;
  setsockopt(socket, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  setsockopt(socket, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof(idle_s));
  setsockopt(socket, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof(interval_s));
  setsockopt(socket, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

bool ValidHostChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
         c == '_';
}

bool ParsePort(std::string_view text, int* port) {
  if (text.empty() || text.size() > 5) return false;
  int value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || value < 1 || value > 65535) return false;
  *port = value;
  return true;
}

}  // namespace

// ---- free functions ----------------------------------------------------------

bool ParseEtcdEndpoint(const std::string& url, std::string* host, int* port, std::string* error) {
  const std::string_view kScheme = "http://";
  std::string_view rest = url;
  if (rest.starts_with("https://")) {
    *error = "https is not supported (plain http only: give etcd an http:// client URL)";
    return false;
  }
  if (!rest.starts_with(kScheme)) {
    *error = "expected http://HOST:PORT";
    return false;
  }
  rest.remove_prefix(kScheme.size());
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find_first_of("/?#@") != std::string_view::npos) {
    *error = "expected http://HOST:PORT, without user, path or query";
    return false;
  }
  std::string_view host_part, port_part;
  if (rest.starts_with("[")) {  // [IPv6]:port
    const size_t close = rest.find(']');
    if (close == std::string_view::npos || close + 1 >= rest.size() || rest[close + 1] != ':') {
      *error = "expected http://[IPV6]:PORT";
      return false;
    }
    host_part = rest.substr(1, close - 1);
    port_part = rest.substr(close + 2);
    in6_addr addr;
    if (inet_pton(AF_INET6, std::string(host_part).c_str(), &addr) != 1) {
      *error = "bad IPv6 address " + std::string(host_part);
      return false;
    }
  } else {
    const size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos) {
      *error = "missing port (expected http://HOST:PORT)";
      return false;
    }
    host_part = rest.substr(0, colon);
    port_part = rest.substr(colon + 1);
    if (host_part.empty() || !std::all_of(host_part.begin(), host_part.end(), ValidHostChar)) {
      *error = "bad host \"" + Excerpt(host_part) + "\"";
      return false;
    }
  }
  if (!ParsePort(port_part, port)) {
    *error = "bad port \"" + Excerpt(port_part) + "\" (1..65535)";
    return false;
  }
  *host = std::string(host_part);
  return true;
}

std::string PrefixRangeEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    unsigned char& last = reinterpret_cast<unsigned char&>(end.back());
    if (last < 0xff) {
      ++last;
      return end;
    }
    end.pop_back();  // 0xff cannot be incremented: carry into the byte before
  }
  return std::string(1, '\0');
}

// ---- JsonObjectStream ----------------------------------------------------------

void JsonObjectStream::Reset() {
  current_.clear();
  depth_ = 0;
  in_string_ = escaped_ = false;
}

bool JsonObjectStream::Feed(std::string_view bytes, std::vector<std::string>* objects, std::string* error) {
  for (char c : bytes) {
    if (depth_ == 0) {
      if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;  // between objects
      if (c != '{') {
        *error = "expected a JSON object, got \"" + Excerpt(std::string_view(&c, 1)) + "\"";
        return false;
      }
    }
    current_ += c;
    if (current_.size() > max_object_bytes_) {
      *error = "JSON object larger than " + std::to_string(max_object_bytes_) + " bytes";
      return false;
    }
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
      continue;
    }
    if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if ((c == '}' || c == ']') && --depth_ == 0) {
      objects->push_back(std::move(current_));
      current_.clear();
    }
  }
  return true;
}

// ---- EtcdClient ----------------------------------------------------------------

struct EtcdClient::Endpoint {
  std::string url, host;
  int port = 0;
  std::unique_ptr<httplib::Client> http;  // created on first use
};

struct EtcdClient::Reply {
  json body;
  int http_status = 0;
  int grpc_code = 0;
};

EtcdClient::EtcdClient(EtcdClientOptions options) : options_(std::move(options)) {
  for (const std::string& url : options_.endpoints) {
    auto endpoint = std::make_unique<Endpoint>();
    endpoint->url = url;
    std::string error;
    if (!ParseEtcdEndpoint(url, &endpoint->host, &endpoint->port, &error) && config_error_.empty()) {
      config_error_ = "etcd endpoint \"" + url + "\": " + error;
    }
    endpoints_.push_back(std::move(endpoint));
  }
  if (endpoints_.empty()) config_error_ = "etcd: no endpoints configured";
}

EtcdClient::~EtcdClient() = default;

const std::string& EtcdClient::current_endpoint() const {
  static const std::string kNone;
  return endpoints_.empty() ? kNone : endpoints_[current_]->url;
}

bool EtcdClient::CallOne(Endpoint& endpoint, const std::string& path, const std::string& body, Reply* reply,
                         bool* may_retry, std::string* error) {
  if (!endpoint.http) endpoint.http = MakeHttpClient(endpoint.host, endpoint.port);
  SetTimeouts(endpoint.http.get(), options_.connect_timeout_ms, options_.request_timeout_ms,
              options_.request_timeout_ms);
  const Clock::time_point start = Clock::now();
  // The read timeout bounds each wait; the deadline bounds a server that
  // dribbles its answer.
  std::string answer;
  bool too_slow = false, too_large = false;
  httplib::Request request;
  request.method = "POST";
  request.path = path;
  request.headers = {{"Content-Type", "application/json"}};
  request.body = body;
  request.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    answer.append(data, size);
    too_large = answer.size() > kMaxAnswerBytes;
    too_slow = ElapsedMs(start) > options_.connect_timeout_ms + options_.request_timeout_ms;
    return !too_large && !too_slow;
  };
  int status = 0;
  request.response_handler = [&](const httplib::Response& response) {
    status = response.status;
    return true;
  };
  httplib::Response response;
  httplib::Error http_error = httplib::Error::Success;
  const std::string where = "etcd " + endpoint.url + ": ";
  const bool sent = endpoint.http->send(request, response, http_error);
  reply->body = json::parse(answer, nullptr, /*allow_exceptions=*/false);
  // etcd ends its error answers with an HTTP trailer, which cpp-httplib
  // 0.11 takes for a broken chunked body after delivering the body whole.
  const bool trailer_only = !sent && http_error == httplib::Error::Read && status != 0 && !too_slow &&
                            !too_large && reply->body.is_object();
  if (!sent && !trailer_only) {
    *may_retry = http_error == httplib::Error::Connection || http_error == httplib::Error::ConnectionTimeout;
    if (too_large) {
      *error = where + "answer larger than " + std::to_string(kMaxAnswerBytes) + " bytes";
    } else if (too_slow) {
      *error = where + "no complete answer within " + std::to_string(options_.request_timeout_ms) + " ms";
    } else {
      *error = where + DescribeTransportError(http_error, endpoint.host, ElapsedMs(start), options_);
    }
    return false;
  }
  *may_retry = false;
  reply->http_status = status;
  if (status != 200) {
    const std::string message = GatewayErrorMessage(reply->body, &reply->grpc_code);
    *error = where + "HTTP " + std::to_string(status) + ": " +
             (message.empty() ? Excerpt(answer) : message);
    return false;
  }
  if (reply->body.is_discarded() || !reply->body.is_object()) {
    *error = where + "answer to " + path + " is not a JSON object: \"" + Excerpt(answer) + "\"";
    return false;
  }
  return true;
}

bool EtcdClient::Call(const std::string& path, const std::string& body, bool idempotent, Reply* reply,
                      std::string* error) {
  if (!config_error_.empty()) {
    *error = config_error_;
    return false;
  }
  std::string errors;
  const size_t first = current_;
  for (size_t attempt = 0; attempt < endpoints_.size(); ++attempt) {
    const size_t index = (first + attempt) % endpoints_.size();
    bool may_retry = false;
    std::string one_error;
    if (CallOne(*endpoints_[index], path, body, reply, &may_retry, &one_error)) {
      current_ = index;
      return true;
    }
    errors += (errors.empty() ? "" : "; ") + one_error;
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
  *json_answer = reply.body.dump();
  return true;
}

bool EtcdClient::Put(std::string_view key, std::string_view value, int64_t lease, std::string* error,
                     int64_t* revision) {
  json request{{"key", Base64(key)}, {"value", Base64(value)}};
  if (lease != 0) request["lease"] = std::to_string(lease);
  Reply reply;
  if (!Call("/v3/kv/put", request.dump(), /*idempotent=*/false, &reply, error)) {
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
    *error = "etcd " + current_endpoint() + ": bad range answer: " + Excerpt(reply.body.dump());
    return false;
  }
  out->reset();
  if (!kvs.empty()) *out = std::move(kvs.front());
  if (revision != nullptr) *revision = header_revision;
  return true;
}

bool EtcdClient::GetPrefix(std::string_view prefix, std::vector<EtcdKeyValue>* out, std::string* error,
                           int64_t* revision) {
  Reply reply;
  if (!Call("/v3/kv/range", PrefixRequest(prefix).dump(), /*idempotent=*/true, &reply, error)) return false;
  int64_t header_revision = 0;
  if (!ParseKeyValues(reply.body, out) || !HeaderRevision(reply.body, &header_revision)) {
    *error = "etcd " + current_endpoint() + ": bad range answer: " + Excerpt(reply.body.dump());
    return false;
  }
  if (revision != nullptr) *revision = header_revision;
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
    *error = "etcd " + current_endpoint() + ": bad deleterange answer: " + Excerpt(reply.body.dump());
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
    *error = "etcd " + current_endpoint() + ": bad lease grant answer: " + Excerpt(reply.body.dump());
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
             (message.empty() ? Excerpt(reply.body.dump()) : message);
    return false;
  }
  if (!Int64Field(*result, "TTL", ttl_s)) {
    *error = "etcd " + current_endpoint() + ": bad keepalive answer: " + Excerpt(reply.body.dump());
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

bool EtcdClient::PutIfAbsent(std::string_view key, std::string_view value, int64_t lease, bool* created,
                             EtcdKeyValue* current, std::string* error) {
  json put{{"key", Base64(key)}, {"value", Base64(value)}};
  if (lease != 0) put["lease"] = std::to_string(lease);
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
  const std::string bad = "etcd " + current_endpoint() + ": bad txn answer: " + Excerpt(reply.body.dump());
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
    *error = "etcd " + current_endpoint() + ": bad txn answer: " + Excerpt(reply.body.dump());
    return false;
  }
  *deleted = count > 0;
  return true;
}

// ---- EtcdWatcher ----------------------------------------------------------------

struct EtcdWatcher::StreamState {
  JsonObjectStream splitter;
  std::vector<std::string> objects;
  int http_status = 0;
  std::string error_body;  // a non-200 answer, kept for its message
  bool established = false;
  bool failed = false;  // a bad or canceling object: the stream is aborted
  int64_t resync_revision = 0;  // etcd cannot resume where we are: resync, then watch from here
  std::string error;
};

EtcdWatcher::EtcdWatcher(Options options, EventsHandler on_events, ResyncHandler on_resync, StateHandler on_state)
    : options_(std::move(options)),
      on_events_(std::move(on_events)),
      on_resync_(std::move(on_resync)),
      on_state_(std::move(on_state)) {
  if (options_.start_revision > 0) {
    last_revision_ = options_.start_revision - 1;
    position_known_ = true;
  }
}

EtcdWatcher::~EtcdWatcher() { Stop(); }

void EtcdWatcher::Start() {
  if (thread_.joinable()) return;
  stopping_ = false;
  running_ = true;
  thread_ = std::thread([this] {
    Run();
    running_ = false;
  });
}

void EtcdWatcher::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (!thread_.joinable()) return;
  if (std::this_thread::get_id() == thread_.get_id()) return;  // from a callback: the loop ends after it
  std::lock_guard<std::mutex> stopping(stop_mutex_);              // one joiner
  if (!thread_.joinable()) return;
  // Repeated: a stop() just before the thread's next request starts would
  // find nothing to interrupt.
  while (running_) {
    std::shared_ptr<httplib::Client> client;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      client = active_client_;
    }
    if (client) client->stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  thread_.join();
}

EtcdWatcher::Stats EtcdWatcher::stats() const {
  return Stats{streams_opened_.load(), failures_.load(), bad_responses_.load(), events_.load(), resyncs_.load()};
}

void EtcdWatcher::SetActiveClient(std::shared_ptr<httplib::Client> client) {
  std::lock_guard<std::mutex> lock(mutex_);
  active_client_ = std::move(client);
}

void EtcdWatcher::SleepUnlessStopped(int64_t ms) {
  std::unique_lock<std::mutex> lock(mutex_);
  wake_.wait_for(lock, std::chrono::milliseconds(ms), [this] { return stopping_.load(); });
}

void EtcdWatcher::Guarded(const char* what, const std::function<void()>& callback) {
  // An exception escaping into httplib's thread would end the process; a
  // handler's bug is logged instead, and the watch goes on.
  try {
    callback();
  } catch (const std::exception& e) {
    spdlog::error("etcd watch {}: the {} threw: {}", options_.key, what, e.what());
  } catch (...) {
    spdlog::error("etcd watch {}: the {} threw", options_.key, what);
  }
}

void EtcdWatcher::ReportState(bool connected, const std::string& error) {
  if (reported_connected_ == connected) return;  // transitions only
  reported_connected_ = connected;
  if (on_state_) Guarded("state handler", [&] { on_state_(connected, error); });
}

std::string EtcdWatcher::CreateRequestBody() const {
  json create;
  if (options_.prefix) {
    create = PrefixRequest(options_.key);
  } else {
    create = RangeRequest(options_.key);
  }
  // Resume after what was delivered; a watch from now on that never got
  // going starts from now again.
  if (position_known_) create["start_revision"] = std::to_string(last_revision_.load() + 1);
  return json{{"create_request", create}}.dump();
}

void EtcdWatcher::Run() {
  int64_t backoff_ms = kInitialBackoffMs;
  while (!stopping_) {
    std::string url, error;
    int64_t resync_revision = 0;
    StreamEnd end = StreamEnd::kFailed;
    if (options_.client.endpoints.empty()) {
      error = "etcd: no endpoints configured";
    } else {
      url = options_.client.endpoints[endpoint_index_ % options_.client.endpoints.size()];
      end = RunStream(url, &resync_revision, &error);
    }
    if (end == StreamEnd::kStopped || stopping_) break;
    if (end == StreamEnd::kResync) {
      Resync(resync_revision, error);
      backoff_ms = kInitialBackoffMs;
      continue;  // not an error: reopen at once
    }
    if (end == StreamEnd::kClosed) {
      // It was established: a fresh backoff, same endpoint first.
      spdlog::debug("etcd watch {}: stream ended ({}); reopening", options_.key, error);
      backoff_ms = kInitialBackoffMs;
    } else {
      ++failures_;
      spdlog::debug("etcd watch {}: {}", options_.key, error);
      ReportState(false, error);
      ++endpoint_index_;  // the next attempt tries the next endpoint
    }
    SleepUnlessStopped(backoff_ms);
    if (end == StreamEnd::kFailed) backoff_ms = std::min(backoff_ms * 2, kMaxBackoffMs);
  }
}

void EtcdWatcher::Resync(int64_t resume_revision, const std::string& why) {
  ++resyncs_;
  // Events before resume_revision cannot be replayed: the owner re-reads,
  // and the watch goes on from there.
  last_revision_ = resume_revision - 1;
  position_known_ = true;
  spdlog::info("etcd watch {}: {}; resyncing, then watching from revision {}", options_.key, why,
               resume_revision);
  if (on_resync_) {
    Guarded("resync handler", [&] { on_resync_(resume_revision); });
  } else {
    spdlog::warn("etcd watch {}: events before revision {} may be lost (no resync handler)", options_.key,
                 resume_revision);
  }
}

EtcdWatcher::StreamEnd EtcdWatcher::RunStream(const std::string& url, int64_t* resync_revision,
                                              std::string* error) {
  std::string host;
  int port = 0;
  if (!ParseEtcdEndpoint(url, &host, &port, error)) {
    *error = "etcd endpoint \"" + url + "\": " + *error;
    return StreamEnd::kFailed;
  }
  std::shared_ptr<httplib::Client> client = MakeHttpClient(host, port);
  SetTimeouts(client.get(), options_.client.connect_timeout_ms, options_.idle_timeout_ms,
              options_.client.request_timeout_ms);
  client->set_socket_options(EnableKeepalive);
  SetActiveClient(client);
  if (stopping_) {
    SetActiveClient(nullptr);
    return StreamEnd::kStopped;
  }

  StreamState state;
  httplib::Request request;
  request.method = "POST";
  request.path = "/v3/watch";
  request.headers = {{"Content-Type", "application/json"}};
  request.body = CreateRequestBody();
  request.response_handler = [&](const httplib::Response& response) {
    state.http_status = response.status;
    return true;
  };
  request.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    return OnStreamBytes(std::string_view(data, size), &state);
  };
  httplib::Response response;
  httplib::Error http_error = httplib::Error::Success;
  const Clock::time_point start = Clock::now();
  const bool completed = client->send(request, response, http_error);
  SetActiveClient(nullptr);
  return ClassifyStreamEnd(url, host, completed, http_error, ElapsedMs(start), state, resync_revision, error);
}

bool EtcdWatcher::OnStreamBytes(std::string_view bytes, StreamState* state) {
  if (stopping_) return false;
  if (state->http_status != 200 && state->http_status != 0) {
    if (state->error_body.size() < 4096) state->error_body.append(bytes);
    return true;
  }
  state->objects.clear();
  if (!state->splitter.Feed(bytes, &state->objects, &state->error)) {
    ++bad_responses_;
    state->failed = true;
    state->error = "bad watch stream: " + state->error;
    return false;
  }
  for (const std::string& object : state->objects) {
    if (!HandleObject(object, state)) {
      state->failed = true;
      return false;
    }
    if (stopping_) return false;  // a callback stopped us
  }
  return true;
}

EtcdWatcher::StreamEnd EtcdWatcher::ClassifyStreamEnd(const std::string& url, const std::string& host,
                                                      bool completed, httplib::Error http_error,
                                                      int64_t elapsed_ms,
                                                      const StreamState& state, int64_t* resync_revision,
                                                      std::string* error) {
  const std::string where = "etcd " + url + ": ";
  if (stopping_) return StreamEnd::kStopped;
  if (state.resync_revision > 0) {
    *resync_revision = state.resync_revision;
    *error = state.error;
    return StreamEnd::kResync;
  }
  if (state.failed) {
    *error = where + state.error;
    return StreamEnd::kFailed;
  }
  if (state.http_status != 0 && state.http_status != 200) {
    int grpc_code = 0;
    const std::string message =
        GatewayErrorMessage(json::parse(state.error_body, nullptr, false), &grpc_code);
    *error = where + "watch: HTTP " + std::to_string(state.http_status) + ": " +
             (message.empty() ? Excerpt(state.error_body) : message);
    return StreamEnd::kFailed;
  }
  if (!state.established) {
    if (completed) {
      *error = where + "watch stream ended before etcd created the watch";
    } else {
      EtcdClientOptions timing = options_.client;
      timing.request_timeout_ms = options_.idle_timeout_ms;
      *error = where + "watch: " +
               DescribeTransportError(http_error, host, elapsed_ms, timing);
    }
    return StreamEnd::kFailed;
  }
  *error = completed ? "etcd closed the stream" : "stream broke (" + httplib::to_string(http_error) + ")";
  return StreamEnd::kClosed;
}

bool EtcdWatcher::HandleObject(const std::string& text, StreamState* state) {
  const json object = json::parse(text, nullptr, /*allow_exceptions=*/false);
  const json* result = object.is_object() ? ObjectField(object, "result") : nullptr;
  if (result == nullptr) {
    int grpc_code = 0;
    const std::string message = object.is_object() ? GatewayErrorMessage(object, &grpc_code) : "";
    if (message.empty()) {
      ++bad_responses_;
      state->error = "unexpected watch response: " + Excerpt(text);
      spdlog::warn("etcd watch {}: {}", options_.key, state->error);
    } else {
      state->error = "watch: " + message;
    }
    return false;
  }
  if (BoolField(*result, "canceled")) return HandleCanceled(*result, state);
  if (BoolField(*result, "created")) return HandleCreated(*result, state);
  return HandleEvents(*result, text, state);
}

bool EtcdWatcher::HandleCanceled(const json& result, StreamState* state) {
  int64_t compact_revision = 0;
  if (Int64Field(result, "compact_revision", &compact_revision) && compact_revision > 0) {
    state->resync_revision = compact_revision;
    state->error = "revisions before " + std::to_string(compact_revision) + " were compacted";
    return false;  // the stream stays open otherwise: close it and resync
  }
  auto reason = result.find("cancel_reason");
  state->error = "etcd canceled the watch";
  if (reason != result.end() && reason->is_string()) state->error += ": " + reason->get<std::string>();
  return false;
}

bool EtcdWatcher::HandleCreated(const json& result, StreamState* state) {
  int64_t revision = 0;
  if (!HeaderRevision(result, &revision)) {
    ++bad_responses_;
    state->error = "bad header in the watch's created response";
    return false;
  }
  if (!position_known_ && revision > 0) {
    // A watch from now on starts after the revision it was created at: that
    // is where a reconnect must resume.
    last_revision_ = revision;
    position_known_ = true;
  } else if (position_from_etcd_ && revision > 0 && revision < last_revision_.load()) {
    // etcd's history went backwards (a restored backup, a wiped cluster):
    // waiting for our resume revision would skip every event up to it.
    state->resync_revision = revision + 1;
    state->error = "etcd's revision went back from " + std::to_string(last_revision_.load()) + " to " +
                   std::to_string(revision);
    return false;
  }
  position_from_etcd_ = position_known_;
  state->established = true;
  ++streams_opened_;
  ReportState(true, "");
  return true;
}

bool EtcdWatcher::HandleEvents(const json& result, const std::string& text, StreamState* state) {
  const json* items = nullptr;
  if (!ArrayField(result, "events", &items)) {
    ++bad_responses_;
    state->error = "bad events in watch response: " + Excerpt(text);
    return false;
  }
  std::vector<EtcdEvent> events;
  events.reserve(items->size());
  const int64_t delivered = last_revision_.load();
  for (const json& item : *items) {
    EtcdEvent event;
    if (!ParseEvent(item, &event)) {
      ++bad_responses_;
      state->error = "bad event in watch response: " + Excerpt(text);
      return false;
    }
    // Guards "never repeated" should a server replay what we have.
    if (event.kv.mod_revision > delivered) events.push_back(std::move(event));
  }
  if (events.empty()) return true;  // e.g. a progress notification
  const int64_t revision = events.back().kv.mod_revision;
  last_revision_ = revision;
  position_known_ = position_from_etcd_ = true;
  events_ += events.size();
  if (on_events_) Guarded("events handler", [&] { on_events_(events, revision); });
  return true;
}

}  // namespace chronolink
