// Tests of the agent's metrics HTTP server against hostile clients: a real
// MetricsHttpServer on 127.0.0.1, spoken to over raw TCP sockets so that
// the test controls every header byte. Memory is measured as this process's
// resident set (the server runs in it), sampled while the client pushes.
#include "agent/export/metrics_http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "agent/export/agent_metrics.h"

namespace chronolink {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;
// What a hostile client tries to push, and the loose bounds it must meet:
// the server reads a few KiB; the rest can only sit in the two sockets'
// kernel buffers (a few MiB on loopback) before the server closes.
constexpr uint64_t kPushBytes = 64 * kMiB;
constexpr uint64_t kMaxBytesTakenBeforeClose = 32 * kMiB;
constexpr int64_t kMaxRssGrowth = 32 * static_cast<int64_t>(kMiB);

// Resident set of this process, in bytes (/proc/self/status VmRSS).
int64_t VmRssBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}

// A blocking client socket with generous send/receive limits: they only
// stop a broken server from hanging the test, they assert nothing.
int Connect(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  timeval tv{15, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

struct Reply {
  int status = 0;  // 0: no status line came back
  std::string head;
  std::string body;
};

// Reads until the server closes (it closes after every response).
Reply ReadReply(int fd) {
  std::string all;
  char buf[16384];
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    all.append(buf, static_cast<size_t>(n));
  }
  Reply r;
  const size_t end = all.find("\r\n\r\n");
  r.head = all.substr(0, end);
  if (end != std::string::npos) r.body = all.substr(end + 4);
  if (all.rfind("HTTP/1.1 ", 0) == 0 && all.size() >= 12) r.status = std::atoi(all.c_str() + 9);
  return r;
}

Reply Exchange(uint16_t port, const std::string& request) {
  const int fd = Connect(port);
  if (fd < 0) return {};
  SendAll(fd, request);
  Reply r = ReadReply(fd);
  close(fd);
  return r;
}

Reply Call(uint16_t port, const std::string& method, const std::string& target,
           const std::string& extra_headers = "") {
  return Exchange(port, method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra_headers + "\r\n");
}

struct Push {
  uint64_t sent = 0;         // bytes the kernel took from us before the server closed
  int64_t rss_growth = 0;    // largest VmRSS rise seen while pushing
  Reply reply;
};

// Sends `head`, then up to `budget` bytes from `next_piece` until a send
// fails (the server closed), sampling VmRSS every MiB; then reads the reply.
// The figures go to the XML report under `label`.
Push PushHostile(const std::string& label, uint16_t port, const std::string& head,
                 const std::function<std::string()>& next_piece, uint64_t budget = kPushBytes) {
  Push p;
  const int fd = Connect(port);
  if (fd < 0) return p;
  const int64_t rss_before = VmRssBytes();
  uint64_t next_sample = kMiB;
  bool open = SendAll(fd, head);
  while (open && p.sent < budget) {
    const std::string piece = next_piece();
    size_t off = 0;
    while (off < piece.size()) {
      const ssize_t n = send(fd, piece.data() + off, piece.size() - off, MSG_NOSIGNAL);
      if (n <= 0) {
        open = false;
        break;
      }
      off += static_cast<size_t>(n);
      p.sent += static_cast<uint64_t>(n);
    }
    if (p.sent >= next_sample) {
      p.rss_growth = std::max(p.rss_growth, VmRssBytes() - rss_before);
      next_sample += kMiB;
    }
  }
  p.rss_growth = std::max(p.rss_growth, VmRssBytes() - rss_before);
  p.reply = ReadReply(fd);
  close(fd);
  ::testing::Test::RecordProperty(label + "_sent_bytes", std::to_string(p.sent));
  ::testing::Test::RecordProperty(label + "_rss_growth_bytes", std::to_string(p.rss_growth));
  return p;
}

std::string Filler(size_t n, char c) { return std::string(n, c); }

class MetricsHttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    ASSERT_TRUE(server_.Start("127.0.0.1", 0, &error)) << error;
    ASSERT_NE(server_.port(), 0);
    server_.Update(kText);
  }

  // The scrape every hostile request must leave working.
  void ExpectScrapeWorks() {
    const Reply r = Call(server_.port(), "GET", "/metrics");
    EXPECT_EQ(r.status, 200) << r.head;
    EXPECT_EQ(r.body, kText);
  }

  uint64_t Refused(MetricsRefusal reason) const {
    return server_.refused()[static_cast<size_t>(reason)];
  }

  static constexpr char kText[] = "# TYPE chronolink_up gauge\nchronolink_up{node=\"1\"} 1\n";
  MetricsHttpServer server_;
};

TEST_F(MetricsHttpServerTest, HugeContentLengthIsRefusedWithoutReadingTheBody) {
  const std::string head =
      "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
      "Content-Length: 209715200\r\n\r\n";
  const std::string piece = Filler(64 * 1024, 'x');
  const Push p = PushHostile("content_length", server_.port(), head, [&] { return piece; });
  EXPECT_TRUE(p.reply.status == 413 || p.reply.status == 405) << p.reply.head;
  EXPECT_LT(p.sent, kMaxBytesTakenBeforeClose) << "the server kept reading the body";
  EXPECT_LT(p.rss_growth, kMaxRssGrowth) << "the body was buffered in memory";
  EXPECT_EQ(Refused(MetricsRefusal::kPayload), 1u);
  ExpectScrapeWorks();
}

TEST_F(MetricsHttpServerTest, ChunkedBodyIsRefusedWithoutReadingIt) {
  const std::string head = "POST /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string chunk = "10000\r\n" + Filler(0x10000, 'y') + "\r\n";
  const Push p = PushHostile("chunked", server_.port(), head, [&] { return chunk; });
  EXPECT_TRUE(p.reply.status == 413 || p.reply.status == 405) << p.reply.head;
  EXPECT_LT(p.sent, kMaxBytesTakenBeforeClose) << "the server kept reading the chunks";
  EXPECT_LT(p.rss_growth, kMaxRssGrowth) << "the chunks were buffered in memory";
  ExpectScrapeWorks();
}

TEST_F(MetricsHttpServerTest, ExpectContinueGetsTheRefusalNotAContinue) {
  const Reply r = Call(server_.port(), "POST", "/metrics",
                       "Content-Length: 209715200\r\nExpect: 100-continue\r\n");
  EXPECT_EQ(r.status, 413) << r.head;
  EXPECT_EQ(r.head.find("100 Continue"), std::string::npos) << r.head;
  ExpectScrapeWorks();
}

TEST_F(MetricsHttpServerTest, OnlyGetAndHeadOfMetricsAreServed) {
  const Reply get = Call(server_.port(), "GET", "/metrics");
  EXPECT_EQ(get.status, 200) << get.head;
  EXPECT_EQ(get.body, kText);
  EXPECT_NE(get.head.find("text/plain; version=0.0.4"), std::string::npos) << get.head;
  const Reply head = Call(server_.port(), "HEAD", "/metrics");
  EXPECT_EQ(head.status, 200) << head.head;
  EXPECT_EQ(head.body, "");

  for (const char* method : {"POST", "PUT", "DELETE", "PATCH", "OPTIONS"}) {
    const Reply r = Call(server_.port(), method, "/metrics", "Content-Length: 0\r\n");
    EXPECT_EQ(r.status, 405) << method << ": " << r.head;
    EXPECT_NE(r.head.find("Allow: GET"), std::string::npos) << method << ": " << r.head;
  }
  EXPECT_EQ(Refused(MetricsRefusal::kMethod), 5u);

  for (const char* path : {"/", "/metric", "/metrics/", "/metrics/x", "/favicon.ico"}) {
    const Reply r = Call(server_.port(), "GET", path);
    EXPECT_EQ(r.status, 404) << path << ": " << r.head;
  }
  EXPECT_EQ(Refused(MetricsRefusal::kPath), 5u);
  // A body on a GET is refused as a payload: nothing here takes one.
  EXPECT_EQ(Call(server_.port(), "GET", "/metrics", "Content-Length: 5\r\n").status, 413);
  ExpectScrapeWorks();

  server_.Update("second\n");
  EXPECT_EQ(Call(server_.port(), "GET", "/metrics").body, "second\n");
}

TEST_F(MetricsHttpServerTest, OverlongHeadIsRefusedAndTheServerKeepsServing) {
  // One header line over httplib's 8 KiB line limit.
  const Reply one = Call(server_.port(), "GET", "/metrics", "X-Big: " + Filler(16 * 1024, 'h') + "\r\n");
  EXPECT_TRUE(one.status == 431 || one.status == 400) << one.head;
  ExpectScrapeWorks();

  // Endless short header lines: httplib 0.11.4 has no header count limit.
  const std::string header_line = "X-Pad: " + Filler(90, 'p') + "\r\n";
  const Push flood = PushHostile("header_flood", server_.port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n",
                                 [&] { return header_line; });
  EXPECT_TRUE(flood.reply.status == 431 || flood.reply.status == 400) << flood.reply.head;
  EXPECT_LT(flood.sent, kMaxBytesTakenBeforeClose) << "the server kept reading headers";
  EXPECT_LT(flood.rss_growth, kMaxRssGrowth) << "the headers were kept in memory";
  ExpectScrapeWorks();

  // A request line that never ends: httplib 0.11.4 reads a line whole
  // before it checks its length.
  const std::string piece = Filler(64 * 1024, 'a');
  const Push line = PushHostile("request_line", server_.port(), "GET /", [&] { return piece; });
  EXPECT_LT(line.sent, kMaxBytesTakenBeforeClose) << "the server kept reading the request line";
  EXPECT_LT(line.rss_growth, kMaxRssGrowth) << "the request line was kept in memory";
  ExpectScrapeWorks();
  EXPECT_GE(Refused(MetricsRefusal::kHeaderSize), 3u);
}

TEST_F(MetricsHttpServerTest, IdleConnectionsBeyondTheCapDoNotLockOutScrapes) {
  constexpr int kIdle = 16;  // well over the workers plus the waiting room
  std::vector<int> idle;
  for (int i = 0; i < kIdle; ++i) {
    const int fd = Connect(server_.port());
    ASSERT_GE(fd, 0);
    idle.push_back(fd);
  }
  // While they hold every worker, a new connection is answered at once
  // (503, busy) or served, never left hanging.
  const Reply crowded = Call(server_.port(), "GET", "/metrics");
  EXPECT_TRUE(crowded.status == 503 || crowded.status == 200) << crowded.head;
  EXPECT_GE(Refused(MetricsRefusal::kBusy), 1u);

  // Once they close, a scrape gets through (loose bound, no timing claim).
  for (const int fd : idle) close(fd);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  Reply r;
  do {
    r = Call(server_.port(), "GET", "/metrics");
    if (r.status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  } while (r.status != 200 && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(r.status, 200) << r.head;

  // Idle connections that are never closed time out on their own.
  idle.clear();
  for (int i = 0; i < kIdle; ++i) idle.push_back(Connect(server_.port()));
  const auto later = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  do {
    r = Call(server_.port(), "GET", "/metrics");
    if (r.status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  } while (r.status != 200 && std::chrono::steady_clock::now() < later);
  EXPECT_EQ(r.status, 200) << r.head;
  EXPECT_GE(Refused(MetricsRefusal::kTimeout), 1u);
  for (const int fd : idle) close(fd);
  ExpectScrapeWorks();
}

TEST_F(MetricsHttpServerTest, RefusalsHaveStableNames) {
  EXPECT_EQ(MetricsRefusalName(MetricsRefusal::kPayload), "payload");
  EXPECT_EQ(MetricsRefusalName(MetricsRefusal::kMethod), "method");
  EXPECT_EQ(MetricsRefusalName(MetricsRefusal::kPath), "path");
  EXPECT_EQ(MetricsRefusalName(MetricsRefusal::kHeaderSize), "header_size");
  EXPECT_EQ(MetricsRefusalName(MetricsRefusal::kMalformed), "malformed");
  EXPECT_EQ(MetricsRefusalName(MetricsRefusal::kTimeout), "timeout");
  EXPECT_EQ(MetricsRefusalName(MetricsRefusal::kBusy), "busy");
  const Reply garbage = Exchange(server_.port(), "NOT HTTP AT ALL\r\n\r\n");
  EXPECT_EQ(garbage.status, 400) << garbage.head;
  EXPECT_EQ(Refused(MetricsRefusal::kMalformed), 1u);
  ExpectScrapeWorks();
}

// The counts reach the agent's own metrics as one family, a sample per reason.
TEST_F(MetricsHttpServerTest, RefusalCountsRenderAsAnAgentFamily) {
  EXPECT_EQ(Call(server_.port(), "PUT", "/metrics", "Content-Length: 0\r\n").status, 405);
  const std::map<std::pair<uint32_t, SourceClass>, EdgeWindowRecord> no_windows;
  AgentMetricsSnapshot snap;
  snap.node_id = 3;
  snap.last_records = &no_windows;
  const MetricsRefusalCounts refused = server_.refused();
  for (size_t i = 0; i < kNumMetricsRefusals; ++i) {
    snap.metrics_requests_refused.emplace_back(MetricsRefusalName(static_cast<MetricsRefusal>(i)), refused[i]);
  }
  PrometheusText t;
  AppendAgentMetrics(snap, t);
  const std::string text = t.str();
  EXPECT_NE(text.find("# TYPE chronolink_metrics_requests_refused_total counter"), std::string::npos) << text;
  EXPECT_NE(text.find("chronolink_metrics_requests_refused_total{node=\"3\",reason=\"method\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("chronolink_metrics_requests_refused_total{node=\"3\",reason=\"payload\"} 0\n"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace chronolink
