// Serves the agent's Prometheus text metrics at http://ADDR:PORT/metrics
// (cpp-httplib, in a thread of its own). The agent loop renders the text
// and hands it over with Update(); the server only copies it out, so
// scraping never touches the probe path's state.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace httplib {
class Server;
}

namespace chronolink {

class MetricsHttpServer {
 public:
  MetricsHttpServer();
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Binds and starts serving; a clear message on failure (port in use...).
  bool Start(const std::string& address, uint16_t port, std::string* error);
  void Update(std::string text);
  void Stop();
  uint16_t port() const { return port_; }

 private:
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::mutex mu_;
  std::string text_ = "# no metrics yet\n";
  uint16_t port_ = 0;
};

}  // namespace chronolink
