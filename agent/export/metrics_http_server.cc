#include "agent/export/metrics_http_server.h"

#include <httplib.h>

namespace chronolink {

MetricsHttpServer::MetricsHttpServer() = default;

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

bool MetricsHttpServer::Start(const std::string& address, uint16_t port, std::string* error) {
  server_ = std::make_unique<httplib::Server>();
  // Bounded waits: a slow or stuck scraper cannot hold a worker forever.
  server_->set_read_timeout(2, 0);
  server_->set_write_timeout(2, 0);
  server_->set_keep_alive_max_count(4);
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    std::string body;
    {
      std::lock_guard<std::mutex> lock(mu_);
      body = text_;
    }
    res.set_content(body, "text/plain; version=0.0.4; charset=utf-8");
  });
  const int bound = port == 0 ? server_->bind_to_any_port(address)
                              : (server_->bind_to_port(address, port) ? port : -1);
  if (bound <= 0) {
    *error = "metrics: cannot listen on " + address + ":" + std::to_string(port) +
             " (port in use or address not local?)";
    server_.reset();
    return false;
  }
  port_ = static_cast<uint16_t>(bound);
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  return true;
}

void MetricsHttpServer::Update(std::string text) {
  std::lock_guard<std::mutex> lock(mu_);
  text_ = std::move(text);
}

void MetricsHttpServer::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
  server_.reset();
}

}  // namespace chronolink
