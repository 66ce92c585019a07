#include "agent/export/metrics_http_server.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <vector>

// What cpp-httplib 0.11.4 (Debian's libcpp-httplib0.11) does by itself,
// and why this file does not rely on it:
// - it reads a request line or a header line whole, into a growing
//   string, before it checks the length (8192, compiled into the library),
//   and it takes any number of header lines: a head that never ends grows
//   without bound. Here every read goes through GuardedStream, which stops
//   at kMaxRequestHeadBytes per connection.
// - set_payload_max_length covers Content-Length only; a chunked body, or
//   one without a length, is read whole into memory. Here no body is ever
//   read: the pre-routing handler refuses any request that has one before
//   httplib reads past the headers.
// - its thread pool queues accepted connections without limit. Here
//   BoundedTaskQueue has kWorkers workers and kMaxWaitingConnections places;
//   a connection beyond them is answered 503 at once, without a read.
// - its timeouts apply to each read, so a client sending a byte a second
//   holds a worker forever. Here a connection also has a lifetime.
namespace chronolink {
namespace {

constexpr int64_t kNsPerSecond = 1'000'000'000;
// How often a wait looks at the stop flag, so that Stop() is prompt.
constexpr int64_t kStopCheckNs = 100'000'000;

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class GuardedStream;

// The connection the current thread is serving: httplib's handlers get
// the request, not the socket, so the per-connection state travels here.
struct ConnectionContext {
  int64_t accepted_ns = 0;
  bool answer_busy = false;  // no worker free: answer 503 without reading
  GuardedStream* stream = nullptr;
};
thread_local ConnectionContext t_connection;

// The socket as httplib reads and writes it, with the limits httplib lacks:
// at most kMaxRequestHeadBytes read per connection (then end of stream, so
// httplib answers what it has), each wait at most the read or write
// timeout and never past the connection's deadline.
class GuardedStream final : public httplib::Stream {
 public:
  GuardedStream(int fd, int64_t deadline_ns, const std::atomic<bool>* stopping)
      : fd_(fd), deadline_ns_(deadline_ns), stopping_(stopping) {}

  bool is_readable() const override {
    return pos_ < len_ || Wait(POLLIN, MetricsHttpServer::kReadTimeoutSeconds);
  }
  bool is_writable() const override { return Wait(POLLOUT, MetricsHttpServer::kWriteTimeoutSeconds); }

  ssize_t read(char* ptr, size_t size) override {
    if (pos_ == len_) {
      if (taken_ >= MetricsHttpServer::kMaxRequestHeadBytes) {
        head_too_large_ = true;
        return 0;
      }
      const ssize_t n = Receive(MetricsHttpServer::kMaxRequestHeadBytes - taken_);
      if (n <= 0) return n;
      taken_ += static_cast<size_t>(n);
      pos_ = 0;
      len_ = static_cast<size_t>(n);
    }
    const size_t k = std::min(size, len_ - pos_);
    std::memcpy(ptr, buf_ + pos_, k);
    pos_ += k;
    return static_cast<ssize_t>(k);
  }

  ssize_t write(const char* ptr, size_t size) override {
    for (;;) {
      if (!Wait(POLLOUT, MetricsHttpServer::kWriteTimeoutSeconds)) return -1;
      const ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return n;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    Name(&getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    Name(&getsockname, ip, port);
  }
  ::socket_t socket() const override { return fd_; }

  bool head_too_large() const { return head_too_large_; }
  bool timed_out() const { return timed_out_; }
  bool answered() const { return answered_; }
  void set_answered() { answered_ = true; }

 private:
  ssize_t Receive(size_t at_most) {
    for (;;) {
      if (!Wait(POLLIN, MetricsHttpServer::kReadTimeoutSeconds)) {
        timed_out_ = !stopping_->load();
        return -1;
      }
      const ssize_t n = ::recv(fd_, buf_, std::min(sizeof(buf_), at_most), MSG_DONTWAIT);
      if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return n;
    }
  }

  // True when the socket is ready (or has an error or hang-up for the next
  // call to report) within timeout_seconds and before the deadline.
  bool Wait(short events, int timeout_seconds) const {
    const int64_t until = std::min(SteadyNs() + timeout_seconds * kNsPerSecond, deadline_ns_);
    for (;;) {
      if (stopping_->load()) return false;
      const int64_t left = until - SteadyNs();
      if (left <= 0) return false;
      pollfd p{fd_, events, 0};
      const int ms = static_cast<int>(std::min(left, kStopCheckNs) / 1'000'000) + 1;
      const int n = ::poll(&p, 1, ms);
      if (n > 0) return true;
      if (n < 0 && errno != EINTR) return false;
    }
  }

  void Name(int (*get)(int, sockaddr*, socklen_t*), std::string& ip, int& port) const {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    ip.clear();
    port = 0;
    if (get(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return;
    char text[INET6_ADDRSTRLEN] = {};
    if (ss.ss_family == AF_INET) {
      const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
      if (inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text)) != nullptr) ip = text;
      port = ntohs(a->sin_port);
    } else if (ss.ss_family == AF_INET6) {
      const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
      if (inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof(text)) != nullptr) ip = text;
      port = ntohs(a->sin6_port);
    }
  }

  const int fd_;
  const int64_t deadline_ns_;
  const std::atomic<bool>* stopping_;
  char buf_[4096];
  size_t pos_ = 0;
  size_t len_ = 0;
  size_t taken_ = 0;  // bytes received from the socket so far
  bool head_too_large_ = false;
  bool timed_out_ = false;
  bool answered_ = false;
};

// httplib's TaskQueue with a fixed number of workers and a bounded waiting
// room. httplib's accept loop hands over each accepted socket as a closure
// that serves and closes it; with no room left that closure runs here, in
// the accept thread, flagged to answer 503 with one non-blocking send, so
// the accept loop never waits and no socket piles up.
class BoundedTaskQueue final : public httplib::TaskQueue {
 public:
  BoundedTaskQueue(int workers, size_t max_waiting) : max_waiting_(max_waiting) {
    for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { Work(); });
  }

  void enqueue(std::function<void()> fn) override {
    const int64_t now = SteadyNs();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (waiting_.size() < max_waiting_) {
        waiting_.push_back({std::move(fn), now});
        ready_.notify_one();
        return;
      }
    }
    t_connection = {now, true, nullptr};
    fn();
    t_connection = {};
  }

  // Workers finish what is waiting (each closes its socket) and exit.
  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      shutdown_ = true;
    }
    ready_.notify_all();
    for (std::thread& t : workers_) t.join();
  }

 private:
  struct Job {
    std::function<void()> serve;
    int64_t accepted_ns;
  };

  void Work() {
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        ready_.wait(lock, [this] { return !waiting_.empty() || shutdown_; });
        if (waiting_.empty()) return;
        job = std::move(waiting_.front());
        waiting_.pop_front();
      }
      t_connection = {job.accepted_ns, false, nullptr};
      job.serve();
      t_connection = {};
    }
  }

  const size_t max_waiting_;
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<Job> waiting_;
  bool shutdown_ = false;
  std::vector<std::thread> workers_;
};

// A request the server does not take: status, headers and a one-line body.
// A body is refused first, whatever the method: that is what must never be
// read. Returns false for GET or HEAD of /metrics without a body.
bool RefuseRequest(const httplib::Request& req, httplib::Response& res) {
  const size_t lengths = req.get_header_value_count("Content-Length");
  const bool has_body = req.has_header("Transfer-Encoding") || lengths > 1 ||
                        (lengths == 1 && req.get_header_value("Content-Length") != "0");
  if (has_body) {
    res.status = 413;
    res.set_content("request bodies are not accepted here\n", "text/plain");
  } else if (req.method != "GET" && req.method != "HEAD") {
    res.status = 405;
    res.set_header("Allow", "GET, HEAD");
    res.set_content("only GET /metrics is served here\n", "text/plain");
  } else if (req.path != "/metrics") {
    res.status = 404;
    res.set_content("only /metrics is served here\n", "text/plain");
  } else {
    return false;
  }
  return true;
}

constexpr char kBusyResponse[] =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n"
    "Retry-After: 1\r\nConnection: close\r\n\r\nbusy\n";

}  // namespace

std::string_view MetricsRefusalName(MetricsRefusal reason) {
  switch (reason) {
    case MetricsRefusal::kPayload: return "payload";
    case MetricsRefusal::kMethod: return "method";
    case MetricsRefusal::kPath: return "path";
    case MetricsRefusal::kHeaderSize: return "header_size";
    case MetricsRefusal::kMalformed: return "malformed";
    case MetricsRefusal::kTimeout: return "timeout";
    case MetricsRefusal::kBusy: return "busy";
  }
  return "unknown";
}

// httplib's Server, serving each connection through GuardedStream: one
// request, then close. process_and_close_socket is the hook httplib's
// accept loop calls for every connection (a virtual of 0.11.4's Server).
class MetricsServerCore final : public httplib::Server {
 public:
  explicit MetricsServerCore(MetricsHttpServer* owner) : owner_(owner) {}

 private:
  bool process_and_close_socket(::socket_t sock) override {
    ConnectionContext& conn = t_connection;
    bool ok = false;
    if (owner_->stopping_.load()) {
      // Shutting down: close what is still waiting, unread.
    } else if (conn.answer_busy) {
      ::send(sock, kBusyResponse, sizeof(kBusyResponse) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      owner_->Count(MetricsRefusal::kBusy);
    } else {
      GuardedStream stream(sock, conn.accepted_ns + MetricsHttpServer::kConnectionLifetimeSeconds * kNsPerSecond,
                           &owner_->stopping_);
      conn.stream = &stream;
      bool client_asked_to_close = false;
      ok = process_request(stream, /*close_connection=*/true, client_asked_to_close, nullptr);
      // A request line that never came in time gets no response to count.
      if (!stream.answered() && stream.timed_out()) owner_->Count(MetricsRefusal::kTimeout);
      conn.stream = nullptr;
    }
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return ok;
  }

  MetricsHttpServer* owner_;
};

MetricsHttpServer::MetricsHttpServer() = default;

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

bool MetricsHttpServer::Start(const std::string& address, uint16_t port, std::string* error) {
  stopping_ = false;
  server_ = std::make_unique<MetricsServerCore>(this);
  server_->new_task_queue = [] { return new BoundedTaskQueue(kWorkers, kMaxWaitingConnections); };
  // httplib's own limits, behind the ones above: they are what a code path
  // missed here would meet.
  server_->set_read_timeout(kReadTimeoutSeconds, 0);
  server_->set_write_timeout(kWriteTimeoutSeconds, 0);
  server_->set_keep_alive_max_count(1);
  server_->set_payload_max_length(0);
  // Runs after the headers, before httplib reads any body.
  server_->set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    return RefuseRequest(req, res) ? httplib::Server::HandlerResponse::Handled
                                   : httplib::Server::HandlerResponse::Unhandled;
  });
  // "Expect: 100-continue" is answered before routing: refuse there too,
  // rather than invite the body.
  server_->set_expect_100_continue_handler([](const httplib::Request& req, httplib::Response& res) {
    return RefuseRequest(req, res) ? res.status : 100;
  });
  // Every response of 400 and up passes here, httplib's own (400, 414) and
  // the refusals above: the one place they are counted.
  server_->set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request&,
                                                                         httplib::Response& res) {
    GuardedStream* stream = t_connection.stream;
    MetricsRefusal reason = MetricsRefusal::kMalformed;
    if (res.status == 413) {
      reason = MetricsRefusal::kPayload;
    } else if (res.status == 405) {
      reason = MetricsRefusal::kMethod;
    } else if (res.status == 404) {
      reason = MetricsRefusal::kPath;
    } else if (res.status == 414 || res.status == 431 || (stream && stream->head_too_large())) {
      reason = MetricsRefusal::kHeaderSize;
      res.status = 431;
    } else if (stream && stream->timed_out()) {
      reason = MetricsRefusal::kTimeout;
      res.status = 408;
    }
    if (res.body.empty()) res.set_content(std::string(MetricsRefusalName(reason)) + "\n", "text/plain");
    if (stream) stream->set_answered();
    Count(reason);
    return httplib::Server::HandlerResponse::Handled;
  }));
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(Text(), "text/plain; version=0.0.4; charset=utf-8");
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
  // httplib's stop() does nothing until the loop runs: wait for it, so that
  // a Stop() right after Start() cannot leave the thread listening.
  for (int i = 0; i < 2000 && !server_->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

void MetricsHttpServer::Update(std::string text) {
  std::lock_guard<std::mutex> lock(mu_);
  text_ = std::move(text);
}

std::string MetricsHttpServer::Text() {
  std::lock_guard<std::mutex> lock(mu_);
  return text_;
}

void MetricsHttpServer::Count(MetricsRefusal reason) {
  refused_[static_cast<size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
}

MetricsRefusalCounts MetricsHttpServer::refused() const {
  MetricsRefusalCounts out{};
  for (size_t i = 0; i < kNumMetricsRefusals; ++i) out[i] = refused_[i].load(std::memory_order_relaxed);
  return out;
}

void MetricsHttpServer::Stop() {
  stopping_ = true;
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
  server_.reset();
}

}  // namespace chronolink
