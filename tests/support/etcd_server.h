// A real etcd server for tests (header-only): /usr/bin/etcd, or
// $CHRONOLINK_ETCD_BIN, as a one-member cluster with its own temporary
// directory (data in data/, output in etcd.log) on free ports.
//
// For integration tests in network namespaces: `wrapper` prefixes the
// command line (e.g. {"ip", "netns", "exec", "ns1"}) and `host` is the
// address etcd listens on there. The health check runs from the test's own
// process: in the namespace named by `netns` when set (on a thread that
// enters it: network namespaces are per thread), else in the test's own,
// so the address must be reachable from there; free ports are picked on
// `host`, or on 127.0.0.1 when the host's address does not exist in the
// test's namespace (a fresh namespace has every port free).
//
// Stop() sends SIGTERM to etcd's process group (a wrapper that forks is
// stopped with it), SIGKILL after stop_timeout_ms, and reaps it. Restart()
// keeps the data and the ports. The destructor stops etcd and removes the
// directory. If the test process dies, etcd is killed with it
// (PR_SET_PDEATHSIG).
//
// With `tls`, the client URLs are https (etcd_tls_pki.h makes certificates
// for it) and the health check presents the given client certificate.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <sched.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace chronolink::testing {

// Client URLs over https (peer URLs stay http: a one-member cluster).
struct EtcdServerTls {
  std::string ca_file;                 // --trusted-ca-file; the health check verifies the server with it
  std::string cert_file, key_file;     // the server's certificate (SANs 127.0.0.1, localhost) and key
  bool client_cert_auth = true;        // --client-cert-auth
  std::string client_cert_file, client_key_file;  // what the health check presents
};

struct EtcdServerOptions {
  std::string binary;  // empty: EtcdServerProcess::DefaultBinary()
  std::optional<EtcdServerTls> tls;    // https client URLs
  std::string host = "127.0.0.1";
  std::vector<std::string> wrapper;     // argv prefix, run inside it
  std::string netns;                    // named network namespace of `host` for the health check
  std::vector<std::string> extra_args;  // appended to etcd's flags
  int client_port = 0, peer_port = 0;   // 0: pick free ones
  int64_t start_timeout_ms = 10000;     // until /health says true
  int64_t stop_timeout_ms = 5000;       // SIGTERM, then SIGKILL
};

namespace etcd_server_detail {

inline bool IsIpv6(const std::string& host) { return host.find(':') != std::string::npos; }

inline std::string UrlHost(const std::string& host) { return IsIpv6(host) ? "[" + host + "]" : host; }

// A socket bound to host:0, left open so that a second pick differs;
// -1 when the address is not ours.
inline int BindAnyPort(const std::string& host, int* port) {
  sockaddr_storage storage{};
  socklen_t length = 0;
  const int family = IsIpv6(host) ? AF_INET6 : AF_INET;
  if (family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&storage);
    a->sin6_family = AF_INET6;
    if (inet_pton(AF_INET6, host.c_str(), &a->sin6_addr) != 1) return -1;
    length = sizeof(*a);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&storage);
    a->sin_family = AF_INET;
    if (inet_pton(AF_INET, host.c_str(), &a->sin_addr) != 1) return -1;
    length = sizeof(*a);
  }
  const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&storage), length) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &length) != 0) {
    close(fd);
    return -1;
  }
  *port = ntohs(family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port
                                   : reinterpret_cast<sockaddr_in*>(&storage)->sin_port);
  return fd;
}

// Two distinct free ports (racy like every port pick, but etcd binds them
// within a second).
inline bool PickTwoPorts(const std::string& host, int* first, int* second) {
  for (const std::string& where : {host, std::string("127.0.0.1")}) {
    const int a = BindAnyPort(where, first);
    if (a < 0) continue;
    const int b = BindAnyPort(where, second);
    close(a);
    if (b < 0) continue;
    close(b);
    return true;
  }
  return false;
}

inline bool Healthy(const std::string& host, int port, const std::optional<EtcdServerTls>& tls) {
  std::unique_ptr<httplib::ClientImpl> tls_client;
  if (tls) {
    auto ssl = std::make_unique<httplib::SSLClient>(host, port, tls->client_cert_file, tls->client_key_file);
    ssl->set_ca_cert_path(tls->ca_file);
    ssl->enable_server_certificate_verification(true);
    tls_client = std::move(ssl);
  }
  httplib::ClientImpl plain(host, port);
  httplib::ClientImpl& client = tls_client ? *tls_client : plain;
  client.set_connection_timeout(0, 300000);
  client.set_read_timeout(1, 0);
  auto result = client.Get("/health");
  if (!result || result->status != 200) return false;
  const auto body = nlohmann::json::parse(result->body, nullptr, false);
  return body.is_object() && body.value("health", "") == "true";
}

// Healthy(), from inside the named network namespace (empty: this one).
inline bool HealthyIn(const std::string& netns, const std::string& host, int port,
                      const std::optional<EtcdServerTls>& tls) {
  if (netns.empty()) return Healthy(host, port, tls);
  bool healthy = false;
  std::thread t([&] {
    const std::string path = "/var/run/netns/" + netns;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    const bool entered = ::setns(fd, CLONE_NEWNET) == 0;
    ::close(fd);
    if (entered) healthy = Healthy(host, port, tls);
  });
  t.join();
  return healthy;
}

}  // namespace etcd_server_detail

class EtcdServerProcess {
 public:
  static std::string DefaultBinary() {
    const char* env = std::getenv("CHRONOLINK_ETCD_BIN");
    return env != nullptr && *env != '\0' ? env : "/usr/bin/etcd";
  }

  // Whether etcd can be run here; *why says what is missing.
  static bool Available(std::string* why) {
    const std::string binary = DefaultBinary();
    if (access(binary.c_str(), X_OK) != 0) {
      *why = "no etcd executable at " + binary + " (" + std::strerror(errno) +
             "; install etcd-server or set CHRONOLINK_ETCD_BIN)";
      return false;
    }
    return true;
  }

  explicit EtcdServerProcess(EtcdServerOptions options = {}) : options_(std::move(options)) {
    if (options_.binary.empty()) options_.binary = DefaultBinary();
  }
  ~EtcdServerProcess() {
    Stop();
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }
  EtcdServerProcess(const EtcdServerProcess&) = delete;
  EtcdServerProcess& operator=(const EtcdServerProcess&) = delete;

  // Starts etcd and waits until it is healthy; on failure *error ends with
  // the tail of etcd's log.
  bool Start(std::string* error) {
    if (pid_ > 0) return true;
    if (dir_.empty() && !MakeDir(error)) return false;
    if ((options_.client_port == 0 || options_.peer_port == 0) &&
        !etcd_server_detail::PickTwoPorts(options_.host, &options_.client_port, &options_.peer_port)) {
      *error = "no free ports on " + options_.host;
      return false;
    }
    if (!Spawn(error)) return false;
    return WaitHealthy(error);
  }

  // True when etcd is gone (or was never started); *error when it needed
  // SIGKILL.
  bool Stop(std::string* error = nullptr) {
    if (pid_ <= 0) return true;
    kill(-pid_, SIGCONT);  // a paused etcd cannot handle SIGTERM
    kill(-pid_, SIGTERM);
    const bool exited = WaitExit(options_.stop_timeout_ms);
    if (!exited) {
      kill(-pid_, SIGKILL);
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      if (error != nullptr) *error = "etcd ignored SIGTERM for " + std::to_string(options_.stop_timeout_ms) + " ms";
    }
    pid_ = 0;
    return exited;
  }

  // Stops and starts again with the same data and ports.
  bool Restart(std::string* error) {
    last_stop_error_.clear();
    Stop(&last_stop_error_);
    return Start(error);
  }

  // SIGSTOP/SIGCONT: etcd keeps its sockets but answers nothing (a hung
  // server: connections are accepted by the kernel, then silence).
  void Pause() {
    if (pid_ > 0) kill(-pid_, SIGSTOP);
  }
  void Resume() {
    if (pid_ > 0) kill(-pid_, SIGCONT);
  }

  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  std::string client_url() const { return Url(options_.tls ? "https" : "http", options_.client_port); }
  std::string peer_url() const { return Url("http", options_.peer_port); }
  const std::string& host() const { return options_.host; }
  int client_port() const { return options_.client_port; }
  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path log_path() const { return dir_ / "etcd.log"; }
  const std::string& last_stop_error() const { return last_stop_error_; }

  std::string LogTail(size_t bytes = 3000) const {
    std::ifstream in(log_path(), std::ios::binary);
    std::stringstream all;
    all << in.rdbuf();
    const std::string text = all.str();
    return text.size() > bytes ? "..." + text.substr(text.size() - bytes) : text;
  }

 private:
  std::string Url(const std::string& scheme, int port) const {
    return scheme + "://" + etcd_server_detail::UrlHost(options_.host) + ":" + std::to_string(port);
  }

  bool MakeDir(std::string* error) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/chronolink-etcd-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      *error = "mkdtemp " + pattern + ": " + std::strerror(errno);
      return false;
    }
    dir_ = pattern;
    return true;
  }

  std::vector<std::string> Argv() const {
    std::vector<std::string> argv = options_.wrapper;
    const std::string client = client_url(), peer = peer_url();
    const std::vector<std::string> etcd = {
        options_.binary,
        "--name=default",
        "--data-dir=" + (dir_ / "data").string(),
        "--listen-client-urls=" + client,
        "--advertise-client-urls=" + client,
        "--listen-peer-urls=" + peer,
        "--initial-advertise-peer-urls=" + peer,
        "--initial-cluster=default=" + peer,
        "--logger=zap",
        "--log-outputs=stderr",
    };
    argv.insert(argv.end(), etcd.begin(), etcd.end());
    if (options_.tls) {
      argv.push_back("--cert-file=" + options_.tls->cert_file);
      argv.push_back("--key-file=" + options_.tls->key_file);
      argv.push_back("--trusted-ca-file=" + options_.tls->ca_file);
      if (options_.tls->client_cert_auth) argv.push_back("--client-cert-auth");
    }
    argv.insert(argv.end(), options_.extra_args.begin(), options_.extra_args.end());
    return argv;
  }

  bool Spawn(std::string* error) {
    const std::vector<std::string> args = Argv();
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const int log_fd = open(log_path().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (log_fd < 0 || null_fd < 0) {
      *error = "opening " + log_path().string() + ": " + std::strerror(errno);
      if (log_fd >= 0) close(log_fd);
      if (null_fd >= 0) close(null_fd);
      return false;
    }
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid == 0) {
      // Only async-signal-safe calls between fork and exec.
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(126);
      dup2(null_fd, 0);
      dup2(log_fd, 1);
      dup2(log_fd, 2);
      execvp(argv[0], argv.data());
      const char message[] = "exec of etcd failed\n";
      [[maybe_unused]] ssize_t n = write(2, message, sizeof(message) - 1);
      _exit(127);
    }
    close(log_fd);
    close(null_fd);
    if (pid < 0) {
      *error = std::string("fork: ") + std::strerror(errno);
      return false;
    }
    setpgid(pid, pid);  // also here: no race with the first kill(-pid)
    pid_ = pid;
    return true;
  }

  bool WaitHealthy(std::string* error) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.start_timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        *error = "etcd exited (status " + std::to_string(status) + ") before it was healthy; log:\n" + LogTail();
        return false;
      }
      if (etcd_server_detail::HealthyIn(options_.netns, options_.host, options_.client_port, options_.tls)) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    *error = "etcd at " + client_url() + " not healthy after " + std::to_string(options_.start_timeout_ms) +
             " ms; log:\n" + LogTail();
    Stop();
    return false;
  }

  bool WaitExit(int64_t timeout_ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  EtcdServerOptions options_;
  std::filesystem::path dir_;
  pid_t pid_ = 0;
  std::string last_stop_error_;  // why the last Restart needed SIGKILL
};

}  // namespace chronolink::testing
