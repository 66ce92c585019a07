#include "agent/coord/etcd/etcd_gateway.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sodium.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "agent/coord/etcd/etcd_auth.h"
#include "agent/coord/etcd/etcd_tls.h"
#include "common/quoted_text.h"

namespace chronolink {
namespace etcd_gateway {

using nlohmann::json;

namespace {

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

bool BytesField(const json& object, const char* name, std::string* out) {
  out->clear();
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return true;
  return it->is_string() && FromBase64(it->get_ref<const std::string&>(), out);
}

bool ParseKeyValue(const json& j, EtcdKeyValue* kv) {
  return j.is_object() && BytesField(j, "key", &kv->key) && BytesField(j, "value", &kv->value) &&
         Int64Field(j, "create_revision", &kv->create_revision) &&
         Int64Field(j, "mod_revision", &kv->mod_revision) && Int64Field(j, "version", &kv->version) &&
         Int64Field(j, "lease", &kv->lease);
}

// The range a prefix operation covers: etcd rejects an empty key, so the
// empty prefix is the range ["\0", "\0"), every key.
std::string PrefixStartKey(std::string_view prefix) {
  return prefix.empty() ? std::string(1, '\0') : std::string(prefix);
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

// Walks JSON without building anything and stops at the first value nested
// deeper than the limit: the DOM parser and everything after it then see
// only shallow JSON.
class DepthCheck final : public nlohmann::json_sax<json> {
 public:
  explicit DepthCheck(int max_depth) : max_depth_(max_depth) {}
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool key(string_t&) override { return true; }
  bool start_object(std::size_t) override { return Enter(); }
  bool end_object() override { return Leave(); }
  bool start_array(std::size_t) override { return Enter(); }
  bool end_array() override { return Leave(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    error_ = e.what();
    return false;
  }
  const std::string& error() const { return error_; }

 private:
  bool Enter() {
    if (++depth_ <= max_depth_) return true;
    error_ = "nested deeper than " + std::to_string(max_depth_) + " levels";
    return false;
  }
  bool Leave() {
    --depth_;
    return true;
  }

  const int max_depth_;
  int depth_ = 0;
  std::string error_;
};

std::string HostHeader(const std::string& host, int port) {
  const bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace

int64_t ElapsedMs(Clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count();
}

std::string Base64(std::string_view bytes) {
  const size_t size = sodium_base64_ENCODED_LEN(bytes.size(), sodium_base64_VARIANT_ORIGINAL);
  std::string out(size, '\0');
  sodium_bin2base64(out.data(), size, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
                    sodium_base64_VARIANT_ORIGINAL);
  out.resize(size - 1);  // the terminating NUL
  return out;
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
      return Excerpt(it->get_ref<const std::string&>());
    }
  }
  return "";
}

bool ParseJsonAnswer(std::string_view text, json* out, std::string* error) {
  DepthCheck check(kMaxJsonDepth);
  if (!json::sax_parse(text.begin(), text.end(), &check)) {
    *error = "bad JSON (" + Excerpt(check.error()) + ") in " + Excerpt(text) + "";
    return false;
  }
  *out = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  return true;
}

std::string Excerpt(std::string_view text) {
  std::string out = QuotedText(text, kExcerptBytes);
  if (text.size() > kExcerptBytes) out += " (" + std::to_string(text.size()) + " bytes)";
  return out;
}

json RangeRequest(std::string_view key) { return json{{"key", Base64(key)}}; }

json PrefixRequest(std::string_view prefix) {
  return json{{"key", Base64(PrefixStartKey(prefix))}, {"range_end", Base64(PrefixRangeEnd(prefix))}};
}

json PrefixPageRequest(std::string_view prefix, std::string_view start_key, int64_t limit, int64_t revision) {
  json request = PrefixRequest(prefix);
  if (!start_key.empty()) request["key"] = Base64(start_key);
  request["limit"] = std::to_string(limit);
  if (revision > 0) request["revision"] = std::to_string(revision);
  return request;
}

void SetTimeouts(httplib::ClientImpl* client, int64_t connect_ms, int64_t read_ms, int64_t write_ms) {
  client->set_connection_timeout(connect_ms / 1000, (connect_ms % 1000) * 1000);
  client->set_read_timeout(read_ms / 1000, (read_ms % 1000) * 1000);
  client->set_write_timeout(write_ms / 1000, (write_ms % 1000) * 1000);
}

std::unique_ptr<httplib::ClientImpl> MakeHttpClient(const std::string& host, int port, bool https,
                                                    const EtcdClientOptions& options) {
  std::unique_ptr<httplib::ClientImpl> client;
  if (https) {
    client = std::make_unique<EtcdTlsClient>(host, port, options.tls);
  } else {
    client = std::make_unique<httplib::ClientImpl>(host, port);
  }
  // httplib writes "host:port", which an IPv6 literal makes ambiguous.
  client->set_default_headers({{"Host", HostHeader(host, port)}});
  client->set_keep_alive(false);  // one connection per request: nothing stale after a server restart
  return client;
}

void AddAuthHeader(const EtcdAuth* auth, httplib::Request* request) {
  if (auth == nullptr) return;
  const std::optional<std::string> token = auth->token();
  // The gateway hands "Authorization" to etcd as the token itself, no scheme.
  if (token && !token->empty()) request->headers.emplace("Authorization", *token);
}

std::string TlsFailure(const httplib::ClientImpl* client) {
  const auto* tls = dynamic_cast<const EtcdTlsClient*>(client);
  return tls != nullptr ? tls->failure() : "";
}

void ClearTlsFailure(httplib::ClientImpl* client) {
  if (auto* tls = dynamic_cast<EtcdTlsClient*>(client)) tls->ClearFailure();
}

// What a failed exchange means, in words. httplib reports kinds, not errno.
bool TlsClosedAfterHandshake(httplib::Error error, int64_t elapsed_ms, const EtcdClientOptions& options,
                             const httplib::ClientImpl* client) {
  if (dynamic_cast<const EtcdTlsClient*>(client) == nullptr) return false;
  return error == httplib::Error::Write ||
         (error == httplib::Error::Read && elapsed_ms + 50 < options.request_timeout_ms);
}

std::string DescribeTransportError(httplib::Error error, const std::string& host, int64_t elapsed_ms,
                                   const EtcdClientOptions& options, const httplib::ClientImpl* client) {
  if (const std::string tls = TlsFailure(client); !tls.empty()) return "TLS: " + tls;
  if (TlsClosedAfterHandshake(error, elapsed_ms, options, client)) {
    return "etcd closed the TLS connection before answering: most likely it did not accept this agent's client "
           "certificate (--etcd-cert: is it signed by a CA in etcd's --trusted-ca-file, and still valid?)";
  }
  switch (error) {
    case httplib::Error::SSLConnection:
      return "TLS handshake failed (is the endpoint https, and does it speak TLS 1.2 or later?)";
    case httplib::Error::SSLLoadingCerts:
    case httplib::Error::SSLServerVerification:
      return "TLS: the server's certificate was refused";
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

json PutRequest(std::string_view key, std::string_view value, int64_t lease) {
  json request{{"key", Base64(key)}, {"value", Base64(value)}};
  if (lease != 0) request["lease"] = std::to_string(lease);
  return request;
}

}  // namespace etcd_gateway

bool ParseEtcdEndpoint(const std::string& url, std::string* host, int* port, std::string* error, bool* https) {
  std::string_view rest = url;
  const bool tls = rest.starts_with("https://");
  if (!tls && !rest.starts_with("http://")) {
    *error = "expected http://HOST:PORT or https://HOST:PORT";
    return false;
  }
  if (https != nullptr) *https = tls;
  rest.remove_prefix(tls ? 8 : 7);
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
    // inet_pton reads up to a NUL: "::1\0junk" would pass as ::1.
    if (host_part.find('\0') != std::string_view::npos ||
        inet_pton(AF_INET6, std::string(host_part).c_str(), &addr) != 1) {
      *error = "bad IPv6 address " + etcd_gateway::Excerpt(host_part) + "";
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
    if (host_part.empty() || !std::all_of(host_part.begin(), host_part.end(), etcd_gateway::ValidHostChar)) {
      *error = "bad host " + etcd_gateway::Excerpt(host_part) + "";
      return false;
    }
  }
  if (!etcd_gateway::ParsePort(port_part, port)) {
    *error = "bad port " + etcd_gateway::Excerpt(port_part) + " (1..65535)";
    return false;
  }
  *host = std::string(host_part);
  return true;
}

std::string CheckEtcdEndpoints(const EtcdClientOptions& options) {
  if (options.endpoints.empty()) return "etcd: no endpoints configured";
  size_t https_count = 0;
  for (const std::string& url : options.endpoints) {
    std::string host, error;
    int port = 0;
    bool https = false;
    if (!ParseEtcdEndpoint(url, &host, &port, &error, &https)) return "etcd endpoint \"" + url + "\": " + error;
    if (https) ++https_count;
  }
  if (https_count != 0 && https_count != options.endpoints.size()) {
    return "etcd endpoints mix http:// and https://: give all of one scheme (one cluster speaks one)";
  }
  if (https_count != 0 && !options.tls) return "etcd: https endpoints need TLS settings (--etcd-cacert)";
  return "";
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

void JsonObjectStream::Reset() {
  current_.clear();
  closers_.clear();
  in_string_ = escaped_ = false;
}

bool JsonObjectStream::Feed(std::string_view bytes, std::vector<std::string>* objects, std::string* error) {
  for (char c : bytes) {
    if (closers_.empty()) {
      if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;  // between objects
      if (c != '{') {
        *error = "expected a JSON object, got " + etcd_gateway::Excerpt(std::string_view(&c, 1)) + "";
        return false;
      }
    }
    current_ += c;
    if (current_.size() > max_object_bytes_) {
      *error = "JSON object larger than " + std::to_string(max_object_bytes_) + " bytes: " +
               etcd_gateway::Excerpt(current_);
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
      closers_ += c == '{' ? '}' : ']';
      if (closers_.size() > static_cast<size_t>(max_depth_)) {
        *error = "JSON nested deeper than " + std::to_string(max_depth_) + " levels: " +
                 etcd_gateway::Excerpt(current_);
        return false;
      }
    } else if (c == '}' || c == ']') {
      // A '{' closed by ']' would end the object early, or swallow the
      // objects after it until the size limit.
      if (closers_.back() != c) {
        *error = "mismatched bracket in JSON: " + etcd_gateway::Excerpt(current_) + "";
        return false;
      }
      closers_.pop_back();
      if (closers_.empty()) {
        objects->push_back(std::move(current_));
        current_.clear();
      }
    }
  }
  return true;
}


}  // namespace chronolink
