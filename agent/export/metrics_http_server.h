// Serves the agent's Prometheus text metrics at http://ADDR:PORT/metrics
// (cpp-httplib, in a thread of its own). The agent loop renders the text
// and hands it over with Update(); the server only copies it out, so
// scraping never touches the probe path's state.
//
// The port may be reachable by anyone on the node's networks, so the
// server takes nothing it does not need and holds nothing for long (httplib
// 0.11.4 bounds none of these by itself): GET and HEAD of /metrics only
// (405 with Allow, 404); no request body at all (413, refused before a byte
// of it is read); the request line and headers together at most
// kMaxRequestHeadBytes (431); one request per connection, which must arrive
// within the read timeout of each read and kConnectionLifetimeSeconds of
// the accept; kWorkers workers and kMaxWaitingConnections accepted
// connections waiting for one, any further connection answered 503 at once.
// Every refusal is counted by reason (refused()).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace chronolink {

class MetricsServerCore;

// Why a connection got no metrics: the reason label of
// chronolink_metrics_requests_refused_total.
enum class MetricsRefusal : uint8_t {
  kPayload,     // the request has a body (Content-Length > 0 or Transfer-Encoding)
  kMethod,      // not GET or HEAD
  kPath,        // not /metrics
  kHeaderSize,  // request line and headers over kMaxRequestHeadBytes, or a line over httplib's 8 KiB
  kMalformed,   // not a parsable HTTP request
  kTimeout,     // the request did not arrive within the read timeout or the connection lifetime
  kBusy,        // every worker busy and the waiting room full
};
inline constexpr size_t kNumMetricsRefusals = 7;
std::string_view MetricsRefusalName(MetricsRefusal reason);
using MetricsRefusalCounts = std::array<uint64_t, kNumMetricsRefusals>;

class MetricsHttpServer {
 public:
  static constexpr int kWorkers = 2;
  static constexpr size_t kMaxWaitingConnections = 4;
  // A Prometheus scrape's request is a few hundred bytes.
  static constexpr size_t kMaxRequestHeadBytes = 8 * 1024;
  static constexpr int kReadTimeoutSeconds = 2;
  static constexpr int kWriteTimeoutSeconds = 2;
  // Prometheus gives up on a scrape after 10 s by default.
  static constexpr int kConnectionLifetimeSeconds = 10;

  MetricsHttpServer();
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Binds and starts serving; a clear message on failure (port in use...).
  bool Start(const std::string& address, uint16_t port, std::string* error);
  void Update(std::string text);
  void Stop();
  uint16_t port() const { return port_; }
  // Connections refused so far, indexed by MetricsRefusal; safe from any thread.
  MetricsRefusalCounts refused() const;

 private:
  friend class MetricsServerCore;
  std::string Text();
  void Count(MetricsRefusal reason);

  std::unique_ptr<MetricsServerCore> server_;
  std::thread thread_;
  std::mutex mu_;
  std::string text_ = "# no metrics yet\n";
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::array<std::atomic<uint64_t>, kNumMetricsRefusals> refused_{};
};

}  // namespace chronolink
