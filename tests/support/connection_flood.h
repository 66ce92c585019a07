// An attacker for the coordination channel's tests: it holds as many
// unauthenticated TCP connections to a listener as it can, from chosen
// local source addresses (any of 127.0.0.0/8 on loopback), and never sends
// a byte. A connection the listener closes is opened again: at once when it
// had lived a while (a slot came free: take it back), after a short pause
// when it was closed at once (the listener refuses it: try again soon), as
// an attacker who wants to keep every slot filled would.
//
// Threading: the flood runs on its own thread from construction to
// destruction; the counters may be read from any thread.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace chronolink::testing {

class ConnectionFlood {
 public:
  // `per_source` connections from each address of `sources` to
  // target_ip:port (IPv4 literals).
  ConnectionFlood(std::string target_ip, uint16_t port, std::vector<std::string> sources, size_t per_source)
      : target_ip_(std::move(target_ip)), port_(port) {
    for (const std::string& source : sources) {
      for (size_t i = 0; i < per_source; ++i) slots_.push_back(Slot{source});
    }
    thread_ = std::thread([this] { Run(); });
  }
  ~ConnectionFlood() {
    stop_ = true;
    thread_.join();
    for (Slot& s : slots_) {
      if (s.fd >= 0) ::close(s.fd);
    }
  }
  ConnectionFlood(const ConnectionFlood&) = delete;
  ConnectionFlood& operator=(const ConnectionFlood&) = delete;

  uint64_t opened() const { return opened_.load(); }   // connects started
  uint64_t closed() const { return closed_.load(); }   // ... that the listener closed or reset
  uint64_t failed() const { return failed_.load(); }   // sockets that could not even be set up

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr auto kSweep = std::chrono::milliseconds(10);
  static constexpr auto kLivedLong = std::chrono::milliseconds(500);
  static constexpr auto kRefusedPause = std::chrono::milliseconds(250);

  struct Slot {
    std::string source;
    int fd = -1;
    Clock::time_point opened_at{}, reopen_at{};
  };

  void Run() {
    while (!stop_) {
      const Clock::time_point now = Clock::now();
      for (Slot& s : slots_) {
        if (s.fd < 0 && now >= s.reopen_at) Open(s, now);
      }
      Reap(now);
      std::this_thread::sleep_for(kSweep);
    }
  }

  void Open(Slot& s, Clock::time_point now) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in from{}, to{};
    from.sin_family = to.sin_family = AF_INET;
    to.sin_port = htons(port_);
    if (fd < 0 || ::inet_pton(AF_INET, s.source.c_str(), &from.sin_addr) != 1 ||
        ::inet_pton(AF_INET, target_ip_.c_str(), &to.sin_addr) != 1 ||
        ::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
        (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0 && errno != EINPROGRESS)) {
      if (fd >= 0) ::close(fd);
      ++failed_;
      s.reopen_at = now + kRefusedPause;
      return;
    }
    ++opened_;
    s.fd = fd;
    s.opened_at = now;
  }

  // Closes what the listener closed (reading and dropping its hello).
  void Reap(Clock::time_point now) {
    std::vector<pollfd> fds;
    std::vector<Slot*> owners;
    for (Slot& s : slots_) {
      if (s.fd < 0) continue;
      fds.push_back({s.fd, POLLIN, 0});
      owners.push_back(&s);
    }
    if (fds.empty() || ::poll(fds.data(), fds.size(), 0) <= 0) return;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Slot& s = *owners[i];
      char buf[512];
      ssize_t n = 0;
      while ((n = ::recv(s.fd, buf, sizeof(buf), 0)) > 0) {
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;  // data only, still open
      ::close(s.fd);
      s.fd = -1;
      ++closed_;
      s.reopen_at = now - s.opened_at >= kLivedLong ? now : now + kRefusedPause;
    }
  }

  const std::string target_ip_;
  const uint16_t port_;
  std::vector<Slot> slots_;  // the flood thread's
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> opened_{0}, closed_{0}, failed_{0};
  std::thread thread_;
};

}  // namespace chronolink::testing
