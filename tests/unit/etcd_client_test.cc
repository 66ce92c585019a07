// EtcdClient and EtcdWatcher against a real etcd (tests/support/etcd_server.h)
// and, for what a real etcd never does (garbage, silence), against small
// fake servers. Without etcd the real-server tests skip, except under CI
// (CI set), where that is a failure.
#include "agent/coord/etcd/etcd_client.h"
#include "agent/coord/etcd/etcd_watcher.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/etcd_server.h"
#include "tests/support/require_etcd.h"
#include "tests/support/wait_until.h"

namespace chronolink {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using testing::EtcdServerProcess;
using testing::RequireEtcd;
using testing::WaitUntil;

int64_t MsSince(Clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
}

// A port nothing listens on (connection refused).
int DeadPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(addr);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length);
  close(fd);
  return ntohs(addr.sin_port);
}

// A server that accepts connections (the kernel does) and never answers,
// like a hung etcd.
class Blackhole {
 public:
  Blackhole() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(addr);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(fd_, 16);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &length);
    port_ = ntohs(addr.sin_port);
  }
  ~Blackhole() { close(fd_); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// An HTTP server that answers what a test tells it to.
class FakeGateway {
 public:
  FakeGateway() {
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~FakeGateway() {
    server_.stop();
    thread_.join();
  }
  httplib::Server& server() { return server_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

// What a watcher delivered, for the test thread to wait on.
class WatchLog {
 public:
  EtcdWatcher::EventsHandler Events() {
    return [this](const std::vector<EtcdEvent>& events, int64_t revision) {
      std::lock_guard<std::mutex> lock(mutex_);
      events_.insert(events_.end(), events.begin(), events.end());
      batch_revisions_.push_back(revision);
    };
  }
  EtcdWatcher::ResyncHandler Resync() {
    return [this](int64_t compact_revision) {
      std::lock_guard<std::mutex> lock(mutex_);
      resyncs_.push_back(compact_revision);
    };
  }
  EtcdWatcher::StateHandler State() {
    return [this](bool connected, const std::string& error) {
      std::lock_guard<std::mutex> lock(mutex_);
      states_.push_back(connected);
      if (!connected) errors_.push_back(error);
    };
  }
  bool WaitEvents(size_t count, int64_t timeout_ms = 10000) {
    return WaitUntil([&] { return events().size() >= count; }, timeout_ms);
  }
  bool WaitState(bool connected, size_t occurrence = 1, int64_t timeout_ms = 10000) {
    return WaitUntil(
        [&] {
          std::lock_guard<std::mutex> lock(mutex_);
          return static_cast<size_t>(std::count(states_.begin(), states_.end(), connected)) >= occurrence;
        },
        timeout_ms);
  }
  std::vector<EtcdEvent> events() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return events_;
  }
  std::vector<int64_t> resyncs() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return resyncs_;
  }
  std::vector<std::string> errors() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return errors_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<EtcdEvent> events_;
  std::vector<int64_t> batch_revisions_, resyncs_;
  std::vector<bool> states_;
  std::vector<std::string> errors_;
};

// What a hostile or broken server may send: JSON nested `depth` deep
// (about 400 KB of brackets overflowed a recursive dump()) inside an object.
std::string DeeplyNested(size_t depth) {
  return "{\"kvs\":" + std::string(depth, '[') + std::string(depth, ']') + "}";
}

// One event of the gateway's watch stream, as etcd writes it.
std::string EventJson(const std::string& key, const std::string& value, int64_t revision) {
  const std::string r = "\"" + std::to_string(revision) + "\"";
  return "{\"kv\":{\"key\":\"" + etcd_gateway::Base64(key) + "\",\"create_revision\":" + r +
         ",\"mod_revision\":" + r + ",\"version\":\"1\",\"value\":\"" + etcd_gateway::Base64(value) + "\"}}";
}

std::string WatchCreated(int64_t revision) {
  return "{\"result\":{\"header\":{\"revision\":\"" + std::to_string(revision) + "\"},\"created\":true}}\n";
}

// A watch stream that sends `body` and then stays open (as etcd does) until
// the client goes or the fake stops.
void ServeWatchStream(httplib::Response& res, std::string body) {
  res.set_chunked_content_provider("application/json",
                                   [body = std::move(body), sent = false](size_t, httplib::DataSink& sink) mutable {
                                     if (!sent) {
                                       sent = true;
                                       return sink.write(body.data(), body.size());
                                     }
                                     std::this_thread::sleep_for(milliseconds(20));
                                     return sink.is_writable();
                                   });
}

// ---- without a server ----------------------------------------------------------

TEST(EtcdEndpointTest, ParsesHttpUrls) {
  std::string host, error;
  int port = 0;
  ASSERT_TRUE(ParseEtcdEndpoint("http://127.0.0.1:2379", &host, &port, &error)) << error;
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 2379);
  ASSERT_TRUE(ParseEtcdEndpoint("http://etcd-0.example.com:32379/", &host, &port, &error)) << error;
  EXPECT_EQ(host, "etcd-0.example.com");
  EXPECT_EQ(port, 32379);
  ASSERT_TRUE(ParseEtcdEndpoint("http://[::1]:2379", &host, &port, &error)) << error;
  EXPECT_EQ(host, "::1");
  bool https = true;
  ASSERT_TRUE(ParseEtcdEndpoint("http://127.0.0.1:2379", &host, &port, &error, &https)) << error;
  EXPECT_FALSE(https);
  ASSERT_TRUE(ParseEtcdEndpoint("https://etcd-0.example.com:2379/", &host, &port, &error, &https)) << error;
  EXPECT_TRUE(https);
  EXPECT_EQ(host, "etcd-0.example.com");
  EXPECT_EQ(port, 2379);
  ASSERT_TRUE(ParseEtcdEndpoint("https://[::1]:2379", &host, &port, &error, &https)) << error;
  EXPECT_EQ(host, "::1");
}

TEST(EtcdEndpointTest, RejectsGarbage) {
  std::string host, error;
  int port = 0;
  for (const char* url : {"", "127.0.0.1:2379", "http://", "http://host", "http://host:", "http://:2379",
                          "https://", "https://host", "httpss://host:1", "https://user@host:2379",
                          "http://host:0", "http://host:65536", "http://host:12ab", "http://host:-1",
                          "http://a b:1", "http://host:2379/v3", "http://user@host:2379", "http://host:2379?x",
                          "http://[::1:2379", "http://[zz]:2379", "ftp://host:1", "http://h\xff:1"}) {
    error.clear();
    EXPECT_FALSE(ParseEtcdEndpoint(url, &host, &port, &error)) << url;
    EXPECT_FALSE(error.empty()) << url;
  }
  ParseEtcdEndpoint("http://host", &host, &port, &error);
  EXPECT_NE(error.find("port"), std::string::npos) << error;
  // A NUL ended the address for inet_pton, and the message quoted the raw
  // bytes (found by etcd_gateway_fuzz): refused, quoted printable.
  const std::string nul("http://[::1\0\x01junk]:2379", 23);
  EXPECT_FALSE(ParseEtcdEndpoint(nul, &host, &port, &error));
  EXPECT_EQ(error, "bad IPv6 address '::1\\x00\\x01junk'");
}

TEST(EtcdEndpointTest, PrefixRangeEndFollowsEtcd) {
  EXPECT_EQ(PrefixRangeEnd("abc"), "abd");
  EXPECT_EQ(PrefixRangeEnd("/p/"), "/p0");
  EXPECT_EQ(PrefixRangeEnd(std::string("a\xff", 2)), "b");
  EXPECT_EQ(PrefixRangeEnd(std::string("\xff\xff", 2)), std::string(1, '\0'));
  EXPECT_EQ(PrefixRangeEnd(""), std::string(1, '\0'));
}

TEST(JsonObjectStreamTest, SplitsJoinedAndSplitObjects) {
  JsonObjectStream stream;
  std::vector<std::string> objects;
  std::string error;
  const std::string text = "{\"a\":\"}{\\\"\"}\n{\"b\":[1,{\"c\":2}]}{\"d\":1}\n";
  for (char c : text) ASSERT_TRUE(stream.Feed(std::string_view(&c, 1), &objects, &error)) << error;
  ASSERT_EQ(objects.size(), 3u);
  EXPECT_EQ(objects[0], "{\"a\":\"}{\\\"\"}");
  EXPECT_EQ(objects[1], "{\"b\":[1,{\"c\":2}]}");
  EXPECT_FALSE(stream.InsideObject());
  objects.clear();
  ASSERT_TRUE(stream.Feed(text, &objects, &error));
  EXPECT_EQ(objects.size(), 3u);
}

TEST(JsonObjectStreamTest, RejectsGarbageAndHugeObjects) {
  std::vector<std::string> objects;
  std::string error;
  JsonObjectStream stream;
  EXPECT_FALSE(stream.Feed("<html>", &objects, &error));
  EXPECT_FALSE(error.empty());
  JsonObjectStream small(16);
  EXPECT_FALSE(small.Feed("{\"key\":\"0123456789abcdef\"}", &objects, &error));
  EXPECT_TRUE(objects.empty());
}

// Each bracket closes its own kind: "{...]" ended an object early, and an
// unclosed '[' inside swallowed the objects after it (found by
// etcd_gateway_fuzz).
TEST(JsonObjectStreamTest, RejectsMismatchedBrackets) {
  for (const char* text : {"{\"result\":{\"TTL\":\"9\"}]", "{\"a\":[}{\"b\":1}", "{\"a\":{]}"}) {
    SCOPED_TRACE(text);
    JsonObjectStream stream;
    std::vector<std::string> objects;
    std::string error;
    EXPECT_FALSE(stream.Feed(text, &objects, &error));
    EXPECT_TRUE(objects.empty());
    EXPECT_NE(error.find("mismatched bracket"), std::string::npos) << error;
  }
  JsonObjectStream stream;
  std::vector<std::string> objects;
  std::string error;
  ASSERT_TRUE(stream.Feed("{\"a\":[\"]}\",{}]}", &objects, &error)) << error;  // brackets in strings do not count
  EXPECT_EQ(objects, std::vector<std::string>{"{\"a\":[\"]}\",{}]}"});
}

TEST(EtcdClientOfflineTest, RefusedEndpointFailsFastAndClearly) {
  const std::string url = "http://127.0.0.1:" + std::to_string(DeadPort());
  EtcdClient client(EtcdClientOptions{{url}, 1000, 2000});
  std::string error;
  const auto start = Clock::now();
  EXPECT_FALSE(client.Put("k", "v", 0, &error));
  std::optional<EtcdKeyValue> kv;
  EXPECT_FALSE(client.Get("k", &kv, &error));
  EXPECT_LT(MsSince(start), 5000);
  EXPECT_EQ(error, "etcd " + url + ": connection refused");
}

TEST(EtcdClientOfflineTest, SilentServerTimesOut) {
  Blackhole hole;
  EtcdClient client(EtcdClientOptions{{hole.url()}, 500, 300});
  std::string error;
  int64_t lease = 0;
  const auto start = Clock::now();
  EXPECT_FALSE(client.GrantLease(5, &lease, &error));
  EXPECT_LT(MsSince(start), 5000);
  EXPECT_EQ(error, "etcd " + hole.url() + ": no answer within 300 ms");
}

TEST(EtcdClientOfflineTest, BadEndpointIsReportedByEveryCall) {
  EtcdClient client(EtcdClientOptions{{"https://etcd:2379"}});
  std::string error;
  EXPECT_FALSE(client.Delete("k", &error));
  EXPECT_NE(error.find("https"), std::string::npos) << error;
  EtcdClient none(EtcdClientOptions{});
  EXPECT_FALSE(none.Delete("k", &error));
  EXPECT_EQ(error, "etcd: no endpoints configured");
}

TEST(EtcdClientOfflineTest, BadAnswersAreErrorsNotCrashes) {
  FakeGateway fake;
  fake.server().Post("/v3/kv/range", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("this is not json", "text/plain");
  });
  fake.server().Post("/v3/kv/put", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"header":{"revision":{"x":1}}})", "application/json");
  });
  fake.server().Post("/v3/kv/txn", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"header":{"revision":"3"},"responses":[{"response_range":{"kvs":[{"key":"%%%"}]}}]})",
                    "application/json");
  });
  fake.server().Post("/v3/lease/grant", [](const httplib::Request&, httplib::Response& res) {
    res.status = 500;
    res.set_content("<html>oops</html>", "text/html");
  });
  fake.server().Post("/v3/lease/keepalive", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("[1,2,3]", "application/json");
  });
  EtcdClient client(EtcdClientOptions{{fake.url()}});
  std::string error;
  std::optional<EtcdKeyValue> kv;
  EXPECT_FALSE(client.Get("k", &kv, &error));
  EXPECT_NE(error.find("bad answer to /v3/kv/range: bad JSON"), std::string::npos) << error;
  EXPECT_FALSE(client.Put("k", "v", 0, &error));
  EXPECT_NE(error.find("bad header"), std::string::npos) << error;
  bool created = false;
  EtcdKeyValue current;
  EXPECT_FALSE(client.PutIfAbsent("k", "v", 0, &created, &current, &error));
  EXPECT_NE(error.find("bad txn answer"), std::string::npos) << error;
  int64_t lease = 0;
  EXPECT_FALSE(client.GrantLease(5, &lease, &error));
  EXPECT_NE(error.find("HTTP 500: '<html>oops</html>'"), std::string::npos) << error;
  int64_t ttl = 0;
  EXPECT_FALSE(client.KeepAliveOnce(7, &ttl, &error));
  EXPECT_FALSE(error.empty());
  EXPECT_FALSE(client.Delete("k", &error));  // 404 from the fake
  EXPECT_NE(error.find("HTTP 404"), std::string::npos) << error;
}

// Issue 14, finding 3: a dump() of a deeply nested answer overflowed the
// stack. Every call refuses it with a clear error, and the client works on.
TEST(EtcdClientOfflineTest, DeeplyNestedAnswersAreRefusedNotCrashes) {
  FakeGateway fake;
  std::atomic<bool> hostile{true};
  const std::string nested = DeeplyNested(400'000);
  fake.server().Post("/v3/kv/range", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(hostile ? nested : R"({"header":{"revision":"9"}})", "application/json");
  });
  fake.server().Post("/v3/kv/txn", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"header":{"revision":"3"},"responses":)" + std::string(400'000, '[') +
                        std::string(400'000, ']') + "}",
                    "application/json");
  });
  fake.server().Post("/v3/lease/grant", [&](const httplib::Request&, httplib::Response& res) {
    res.status = 500;
    res.set_content(nested, "application/json");
  });
  fake.server().Post("/v3/lease/keepalive", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(400'000, '['), "application/json");  // never closed
  });
  EtcdClient client(EtcdClientOptions{{fake.url()}});
  std::string error;
  std::optional<EtcdKeyValue> kv;
  EXPECT_FALSE(client.Get("k", &kv, &error));
  EXPECT_NE(error.find("nested deeper than 32 levels"), std::string::npos) << error;
  EXPECT_LT(error.size(), 1000u);  // an excerpt, not the answer
  std::vector<EtcdKeyValue> kvs;
  EXPECT_FALSE(client.GetPrefix("p", &kvs, &error));
  EXPECT_NE(error.find("nested deeper"), std::string::npos) << error;
  bool created = false;
  EtcdKeyValue current;
  EXPECT_FALSE(client.PutIfAbsent("k", "v", 0, &created, &current, &error));
  EXPECT_NE(error.find("nested deeper"), std::string::npos) << error;
  int64_t lease = 0;
  EXPECT_FALSE(client.GrantLease(5, &lease, &error));
  EXPECT_NE(error.find("HTTP 500: '{\"kvs\":[[[["), std::string::npos) << error;
  EXPECT_LT(error.size(), 1000u);
  int64_t ttl = 0;
  EXPECT_FALSE(client.KeepAliveOnce(1, &ttl, &error));
  EXPECT_NE(error.find("nested deeper"), std::string::npos) << error;
  std::string raw;
  EXPECT_FALSE(client.RawCall("/v3/kv/range", "{}", &raw, &error));

  hostile = false;
  int64_t revision = 0;
  ASSERT_TRUE(client.Get("k", &kv, &error, &revision)) << error;
  EXPECT_FALSE(kv.has_value());
  EXPECT_EQ(revision, 9);
}

// Answers are read up to max_answer_bytes (8 MiB by default), not 256 MiB.
TEST(EtcdClientOfflineTest, OverLargeAnswersAreRefused) {
  FakeGateway fake;
  std::atomic<bool> hostile{true};
  const std::string big = R"({"header":{"revision":"5"},"kvs":[{"key":"aw==","value":")" +
                          std::string(9u << 20, 'A') + "\"}]}";
  fake.server().Post("/v3/kv/range", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(hostile ? big : R"({"header":{"revision":"5"}})", "application/json");
  });
  EtcdClient client(EtcdClientOptions{{fake.url()}});
  EXPECT_EQ(EtcdClientOptions{}.max_answer_bytes, 8u << 20);
  std::string error;
  std::optional<EtcdKeyValue> kv;
  EXPECT_FALSE(client.Get("k", &kv, &error));
  EXPECT_NE(error.find("larger than 8388608 bytes"), std::string::npos) << error.substr(0, 1000);
  EXPECT_LT(error.size(), 1000u);
  // A prefix read halves its page down to one key, then gives up clearly.
  std::vector<EtcdKeyValue> kvs;
  EXPECT_FALSE(client.GetPrefix("k", &kvs, &error));
  EXPECT_NE(error.find("larger than 8388608 bytes"), std::string::npos) << error.substr(0, 1000);
  EXPECT_TRUE(kvs.empty());

  hostile = false;
  ASSERT_TRUE(client.Get("k", &kv, &error)) << error;
  EXPECT_FALSE(kv.has_value());
}

// The pages of a prefix read as the gateway sees them: a limit, the next
// key after the last one, and the first page's revision on every later
// page; a compaction between pages starts the read over.
TEST(EtcdClientOfflineTest, PrefixPagesReadOneRevisionAndRestartAfterCompaction) {
  FakeGateway fake;
  std::mutex mutex;
  std::vector<nlohmann::json> requests;
  fake.server().Post("/v3/kv/range", [&](const httplib::Request& req, httplib::Response& res) {
    const nlohmann::json request = nlohmann::json::parse(req.body);
    std::lock_guard<std::mutex> lock(mutex);
    requests.push_back(request);
    const bool first_page = !request.contains("revision");
    const size_t n = requests.size();
    if (n == 2) {  // the second page of the first attempt: its revision is gone
      res.status = 400;
      res.set_content(R"({"error":"etcdserver: mvcc: required revision has been compacted","code":11})",
                      "application/json");
      return;
    }
    const std::string revision = n <= 2 ? "10" : "12";
    const std::string kv_a = R"({"key":")" + etcd_gateway::Base64("p/a") + R"(","value":")" +
                             etcd_gateway::Base64("1") + R"(","mod_revision":"4"})";
    const std::string kv_b = R"({"key":")" + etcd_gateway::Base64("p/b") + R"(","value":")" +
                             etcd_gateway::Base64("2") + R"(","mod_revision":"11"})";
    res.set_content(first_page ? R"({"header":{"revision":")" + revision + R"("},"kvs":[)" + kv_a + R"(],"more":true})"
                               : R"({"header":{"revision":"13"},"kvs":[)" + kv_b + "]}",
                    "application/json");
  });
  EtcdClientOptions options{{fake.url()}};
  options.range_page_keys = 1;
  EtcdClient client(options);
  std::vector<EtcdKeyValue> kvs;
  std::string error;
  int64_t revision = 0;
  ASSERT_TRUE(client.GetPrefix("p/", &kvs, &error, &revision)) << error;
  ASSERT_EQ(kvs.size(), 2u);
  EXPECT_EQ(kvs[0].key, "p/a");
  EXPECT_EQ(kvs[1].key, "p/b");
  EXPECT_EQ(revision, 12);  // the restarted read's first page, not the last page's header
  ASSERT_EQ(requests.size(), 4u);
  for (const nlohmann::json& r : requests) EXPECT_EQ(r.value("limit", ""), "1") << r.dump();
  EXPECT_FALSE(requests[0].contains("revision"));
  EXPECT_EQ(requests[1].value("revision", ""), "10");
  EXPECT_EQ(requests[1].value("key", ""), etcd_gateway::Base64(std::string("p/a") + '\0'));
  EXPECT_FALSE(requests[2].contains("revision"));
  EXPECT_EQ(requests[3].value("revision", ""), "12");
  for (const nlohmann::json& r : requests) EXPECT_EQ(r.value("range_end", ""), etcd_gateway::Base64("p0"));
}

// A server that says "more" without moving on, or answers keys out of
// order or outside the prefix, gets an error, not an endless read.
TEST(EtcdClientOfflineTest, PrefixPagesThatDoNotMoveOnAreRefused) {
  FakeGateway fake;
  std::atomic<int> variant{0};
  fake.server().Post("/v3/kv/range", [&](const httplib::Request&, httplib::Response& res) {
    const std::string same = R"({"key":")" + etcd_gateway::Base64("p/a") + R"("})";
    const std::string outside = R"({"key":")" + etcd_gateway::Base64("q/a") + R"("})";
    const char* bodies[] = {R"({"header":{"revision":"3"},"more":true})",
                            R"({"header":{"revision":"3"},"more":true,"kvs":[)"};
    if (variant == 0) {
      res.set_content(bodies[0], "application/json");
    } else {
      res.set_content(bodies[1] + (variant == 1 ? same : outside) + "]}", "application/json");
    }
  });
  EtcdClientOptions options{{fake.url()}};
  options.range_page_keys = 1;
  EtcdClient client(options);
  for (int v : {0, 1, 2}) {
    variant = v;
    std::vector<EtcdKeyValue> kvs;
    std::string error;
    EXPECT_FALSE(client.GetPrefix("p/", &kvs, &error)) << "variant " << v;
    EXPECT_NE(error.find("range pages out of order"), std::string::npos) << error;
    EXPECT_TRUE(kvs.empty());
  }
}

TEST(EtcdWatcherOfflineTest, GarbageStreamIsCountedAndRetried) {
  FakeGateway fake;
  fake.server().Post("/v3/watch", [](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("application/json", [](size_t, httplib::DataSink& sink) {
      const std::string body = "{\"result\":{\"created\":true}}\n{\"result\":{\"events\":[{\"kv\":{\"key\":\"@@\"}}]}}\n";
      sink.write(body.data(), body.size());
      sink.done();
      return true;
    });
  });
  WatchLog log;
  EtcdWatcher::Options options;
  options.client.endpoints = {fake.url()};
  options.key = "k";
  EtcdWatcher watcher(options, log.Events(), log.Resync(), log.State());
  watcher.Start();
  ASSERT_TRUE(WaitUntil([&] { return watcher.stats().bad_responses >= 2; }, 10000));
  watcher.Stop();
  EXPECT_TRUE(log.events().empty());
  ASSERT_FALSE(log.errors().empty());
  EXPECT_NE(log.errors()[0].find("bad event"), std::string::npos) << log.errors()[0];
}

// The watch stream's messages are bounded in depth and size too. Each bad
// one is counted, the stream reopened, and the next good event delivered.
TEST(EtcdWatcherOfflineTest, NestedOrOversizedMessagesAreRefusedAndTheWatchGoesOn) {
  FakeGateway fake;
  std::atomic<int> streams{0};
  const std::string nested = "{\"result\":{\"events\":" + std::string(400'000, '[') + std::string(400'000, ']') + "}}\n";
  const std::string big = "{\"result\":{\"events\":[" + EventJson("k", std::string(9u << 20, 'x'), 5) + "]}}\n";
  fake.server().Post("/v3/watch", [&](const httplib::Request&, httplib::Response& res) {
    const int n = ++streams;
    std::string body = WatchCreated(4);
    if (n == 1) body += nested;
    if (n == 2) body += big;
    if (n >= 3) body += "{\"result\":{\"events\":[" + EventJson("k", "small", 6) + "]}}\n";
    ServeWatchStream(res, std::move(body));
  });
  WatchLog log;
  EtcdWatcher::Options options;
  options.client.endpoints = {fake.url()};
  options.key = "k";
  EtcdWatcher watcher(options, log.Events(), log.Resync(), log.State());
  watcher.Start();
  ASSERT_TRUE(log.WaitEvents(1, 15000)) << "streams " << streams.load();
  watcher.Stop();
  const std::vector<EtcdEvent> events = log.events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kv.value, "small");
  EXPECT_EQ(watcher.stats().bad_responses, 2u);
  EXPECT_GE(streams.load(), 3);
}

// etcd may split one revision's events across two messages ("fragment").
// A stream that breaks between them must resume at that revision, not
// after it: the revision is delivered whole, once.
TEST(EtcdWatcherOfflineTest, ARevisionSplitAcrossFragmentsIsDeliveredWhole) {
  FakeGateway fake;
  std::mutex mutex;
  std::vector<std::string> start_revisions;
  std::vector<bool> fragment_asked;
  std::atomic<int> streams{0};
  fake.server().Post("/v3/watch", [&](const httplib::Request& req, httplib::Response& res) {
    const nlohmann::json create = nlohmann::json::parse(req.body)["create_request"];
    {
      std::lock_guard<std::mutex> lock(mutex);
      start_revisions.push_back(create.value("start_revision", ""));
      fragment_asked.push_back(create.value("fragment", false));
    }
    std::string body = WatchCreated(4);
    if (++streams == 1) {
      // Revision 5 whole, then the first part of revision 6; the stream ends.
      body += "{\"result\":{\"events\":[" + EventJson("a", "1", 5) + "," + EventJson("b", "2", 6) +
              "],\"fragment\":true}}\n";
      res.set_content(body, "application/json");
      return;
    }
    // Resumed where the client says, as etcd would.
    body += "{\"result\":{\"events\":[" + EventJson("b", "2", 6) + "," + EventJson("c", "3", 6) + "]}}\n";
    ServeWatchStream(res, std::move(body));
  });
  WatchLog log;
  EtcdWatcher::Options options;
  options.client.endpoints = {fake.url()};
  options.key = "";
  options.prefix = true;
  options.start_revision = 5;
  EtcdWatcher watcher(options, log.Events(), log.Resync(), log.State());
  watcher.Start();
  ASSERT_TRUE(log.WaitEvents(3));
  std::this_thread::sleep_for(milliseconds(200));  // nothing more may come
  watcher.Stop();
  const std::vector<EtcdEvent> events = log.events();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].kv.key, "a");
  EXPECT_EQ(events[1].kv.key, "b");
  EXPECT_EQ(events[2].kv.key, "c");
  EXPECT_EQ(watcher.last_revision(), 6);
  std::lock_guard<std::mutex> lock(mutex);
  ASSERT_GE(start_revisions.size(), 2u);
  EXPECT_EQ(start_revisions[0], "5");
  EXPECT_EQ(start_revisions[1], "6");  // revision 6 again: only part of it had come
  EXPECT_TRUE(fragment_asked[0]);
}

// A server that never ends its fragments of one revision is cut off at the
// message limit, not buffered without end.
TEST(EtcdWatcherOfflineTest, EndlessFragmentsOfOneRevisionAreRefused) {
  FakeGateway fake;
  fake.server().Post("/v3/watch", [&](const httplib::Request&, httplib::Response& res) {
    std::string body = WatchCreated(4);
    for (int i = 0; i < 8; ++i) {
      body += "{\"result\":{\"events\":[" + EventJson("k" + std::to_string(i), std::string(1024, 'x'), 5) +
              "],\"fragment\":true}}\n";
    }
    ServeWatchStream(res, std::move(body));
  });
  WatchLog log;
  EtcdWatcher::Options options;
  options.client.endpoints = {fake.url()};
  options.client.max_answer_bytes = 4096;
  options.key = "k";
  options.prefix = true;
  EtcdWatcher watcher(options, log.Events(), log.Resync(), log.State());
  watcher.Start();
  // The counter rises when the message is refused; the state handler hears
  // of it only when the stream has ended, which under qemu can be later.
  ASSERT_TRUE(WaitUntil([&] { return watcher.stats().bad_responses >= 1 && !log.errors().empty(); }, 20000));
  watcher.Stop();
  EXPECT_TRUE(log.events().empty());  // never a part of revision 5
  ASSERT_FALSE(log.errors().empty());
  EXPECT_NE(log.errors()[0].find("watch fragments of revision 5 exceed 4096 bytes"), std::string::npos)
      << log.errors()[0];
}

TEST(EtcdWatcherOfflineTest, StopIsPromptWhenNothingAnswers) {
  Blackhole hole;
  EtcdWatcher::Options options;
  options.client.endpoints = {hole.url()};
  options.key = "k";
  EtcdWatcher watcher(options, [](const std::vector<EtcdEvent>&, int64_t) {});
  watcher.Start();
  std::this_thread::sleep_for(milliseconds(300));  // connected, waiting for the created response
  const auto start = Clock::now();
  watcher.Stop();
  EXPECT_LT(MsSince(start), 2000);
  watcher.Stop();  // again: harmless
}

// ---- against a real etcd --------------------------------------------------------

class EtcdClientTest : public ::testing::Test {
 protected:
  static void TearDownTestSuite() { shared_.reset(); }

  void SetUp() override {
    RequireEtcd();
    if (IsSkipped() || HasFatalFailure()) return;
    if (!shared_) {
      auto server = std::make_unique<EtcdServerProcess>();
      std::string error;
      ASSERT_TRUE(server->Start(&error)) << error;
      shared_ = std::move(server);
    }
    prefix_ = std::string("/chronolink-test/") + ::testing::UnitTest::GetInstance()->current_test_info()->name() + "/";
  }

  static EtcdClientOptions Options(const std::string& url) { return EtcdClientOptions{{url}, 1000, 2000}; }
  EtcdClientOptions Options() const { return Options(shared_->client_url()); }

  EtcdWatcher::Options WatchOptions(const std::string& key, bool prefix, int64_t start_revision = 0) const {
    EtcdWatcher::Options options;
    options.client = Options();
    options.key = key;
    options.prefix = prefix;
    options.start_revision = start_revision;
    return options;
  }

  static std::unique_ptr<EtcdServerProcess> shared_;
  std::string prefix_;
};

std::unique_ptr<EtcdServerProcess> EtcdClientTest::shared_;

TEST_F(EtcdClientTest, PutGetPrefixDeleteRoundTrip) {
  EtcdClient client(Options());
  std::string error;
  const std::string binary("\x00\x01\xff\xfe\n\"\\{", 9);
  const std::string unicode = "h\xc3\xa9llo \xe2\x8f\xb1 \xf0\x9f\x95\x92";  // héllo ⏱ 🕒
  int64_t r1 = 0, r2 = 0, r3 = 0;
  ASSERT_TRUE(client.Put(prefix_ + "a", "1", 0, &error, &r1)) << error;
  ASSERT_TRUE(client.Put(prefix_ + binary, binary, 0, &error, &r2)) << error;
  ASSERT_TRUE(client.Put(prefix_ + unicode, unicode, 0, &error, &r3)) << error;
  EXPECT_LT(r1, r2);
  EXPECT_LT(r2, r3);

  std::optional<EtcdKeyValue> kv;
  int64_t revision = 0;
  ASSERT_TRUE(client.Get(prefix_ + binary, &kv, &error, &revision)) << error;
  ASSERT_TRUE(kv.has_value());
  EXPECT_EQ(kv->key, prefix_ + binary);
  EXPECT_EQ(kv->value, binary);
  EXPECT_EQ(kv->create_revision, r2);
  EXPECT_EQ(kv->mod_revision, r2);
  EXPECT_EQ(kv->version, 1);
  EXPECT_EQ(kv->lease, 0);
  EXPECT_GE(revision, r3);
  ASSERT_TRUE(client.Put(prefix_ + "a", "", 0, &error)) << error;  // an empty value is a value
  ASSERT_TRUE(client.Get(prefix_ + "a", &kv, &error)) << error;
  ASSERT_TRUE(kv.has_value());
  EXPECT_EQ(kv->value, "");
  EXPECT_EQ(kv->version, 2);

  ASSERT_TRUE(client.Get(prefix_ + "absent", &kv, &error, &revision)) << error;
  EXPECT_FALSE(kv.has_value());
  EXPECT_GT(revision, 0);

  std::vector<EtcdKeyValue> kvs;
  ASSERT_TRUE(client.GetPrefix(prefix_, &kvs, &error, &revision)) << error;
  ASSERT_EQ(kvs.size(), 3u);
  EXPECT_EQ(kvs[0].key, prefix_ + binary);  // sorted by bytes
  EXPECT_EQ(kvs[1].key, prefix_ + "a");
  EXPECT_EQ(kvs[2].value, unicode);
  ASSERT_TRUE(client.GetPrefix("", &kvs, &error)) << error;  // every key
  EXPECT_GE(kvs.size(), 3u);

  ASSERT_TRUE(client.Delete(prefix_ + "a", &error)) << error;
  ASSERT_TRUE(client.Delete(prefix_ + "a", &error)) << error;  // absent: fine
  ASSERT_TRUE(client.Get(prefix_ + "a", &kv, &error)) << error;
  EXPECT_FALSE(kv.has_value());
  int64_t deleted = 0;
  ASSERT_TRUE(client.DeletePrefix(prefix_, &deleted, &error)) << error;
  EXPECT_EQ(deleted, 2);
  ASSERT_TRUE(client.DeletePrefix(prefix_, &deleted, &error)) << error;
  EXPECT_EQ(deleted, 0);
  ASSERT_TRUE(client.GetPrefix(prefix_, &kvs, &error)) << error;
  EXPECT_TRUE(kvs.empty());
}

// A prefix larger than one answer may be (8 MiB): 12 values of 1 MiB come
// back whole, the page halved until it fits.
TEST_F(EtcdClientTest, GetPrefixPagesAPrefixLargerThanOneAnswer) {
  EtcdClient client(Options());
  std::string error;
  std::vector<std::string> values;
  for (int i = 0; i < 12; ++i) {
    values.push_back(std::string(1u << 20, static_cast<char>('a' + i)));
    char key[16];
    std::snprintf(key, sizeof(key), "%02d", i);
    ASSERT_TRUE(client.Put(prefix_ + key, values.back(), 0, &error)) << error;
  }
  std::vector<EtcdKeyValue> kvs;
  int64_t revision = 0, now = 0;
  ASSERT_TRUE(client.GetPrefix(prefix_, &kvs, &error, &revision)) << error;
  std::optional<EtcdKeyValue> kv;
  ASSERT_TRUE(client.Get(prefix_ + "00", &kv, &error, &now)) << error;
  EXPECT_EQ(revision, now);
  ASSERT_EQ(kvs.size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(kvs[i].value, values[i]) << i;
    EXPECT_EQ(kvs[i].key.substr(prefix_.size()), (i < 10 ? "0" : "") + std::to_string(i));
  }
}

// With a filter, only what it keeps is stored, page by page, and the pages
// still move on past the keys it drops (a writer's junk fills no memory).
TEST_F(EtcdClientTest, GetPrefixKeepsOnlyWhatTheFilterAccepts) {
  EtcdClientOptions o = Options();
  o.range_page_keys = 7;
  EtcdClient client(o);
  std::string error;
  std::vector<std::pair<std::string, std::string>> kvs;
  for (int i = 0; i < 100; ++i) {
    char key[16];
    std::snprintf(key, sizeof(key), "%03d", i);
    kvs.emplace_back(prefix_ + key, i % 10 == 3 ? "keep" : std::string(1000, 'x'));
  }
  size_t stored = 0;
  ASSERT_TRUE(client.PutMany(kvs, 0, &stored, &error)) << error;
  std::vector<EtcdKeyValue> got;
  int seen = 0;
  ASSERT_TRUE(client.GetPrefix(prefix_, &got, &error, nullptr, [&](const EtcdKeyValue& kv) {
    ++seen;
    return kv.value == "keep";
  })) << error;
  EXPECT_EQ(seen, 100);
  ASSERT_EQ(got.size(), 10u);
  for (size_t i = 0; i < got.size(); ++i) {
    char key[16];
    std::snprintf(key, sizeof(key), "%03zu", 10 * i + 3);
    EXPECT_EQ(got[i].key, prefix_ + key);
  }
}

// Small pages while another client writes: the pages are one snapshot, the
// store as it was at the returned revision, whole and sorted.
TEST_F(EtcdClientTest, GetPrefixPagesAreOneSnapshotUnderConcurrentWrites) {
  EtcdClient setup(Options());
  std::string error;
  // What the writer did: key -> [(revision, value)], in order.
  std::map<std::string, std::vector<std::pair<int64_t, std::string>>> history;
  std::mutex mutex;
  for (int i = 0; i < 40; ++i) {
    const std::string key = prefix_ + "k" + std::to_string(100 + i);
    int64_t r = 0;
    ASSERT_TRUE(setup.Put(key, "v0", 0, &error, &r)) << error;
    history[key].emplace_back(r, "v0");
  }
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    EtcdClient client(Options());
    std::string werror;
    for (int n = 1; !stop; ++n) {
      const std::string key = prefix_ + "k" + std::to_string(100 + (n * 7) % 60);  // updates and new keys
      const std::string value = "v" + std::to_string(n);
      int64_t r = 0;
      if (!client.Put(key, value, 0, &werror, &r)) break;
      std::lock_guard<std::mutex> lock(mutex);
      history[key].emplace_back(r, value);
    }
  });
  EtcdClientOptions options = Options();
  options.range_page_keys = 3;
  EtcdClient reader(options);
  std::vector<EtcdKeyValue> kvs;
  int64_t revision = 0;
  std::this_thread::sleep_for(milliseconds(50));
  const bool ok = reader.GetPrefix(prefix_, &kvs, &error, &revision);
  std::this_thread::sleep_for(milliseconds(50));
  stop = true;
  writer.join();
  ASSERT_TRUE(ok) << error;
  std::map<std::string, std::string> expected;  // the store at `revision`
  for (const auto& [key, puts] : history) {
    for (const auto& [r, value] : puts) {
      if (r <= revision) expected[key] = value;
    }
  }
  ASSERT_EQ(kvs.size(), expected.size()) << "revision " << revision;
  size_t i = 0;
  for (const auto& [key, value] : expected) {
    EXPECT_EQ(kvs[i].key, key);
    EXPECT_EQ(kvs[i].value, value) << key;
    EXPECT_LE(kvs[i].mod_revision, revision) << key;
    ++i;
  }
  // The writer really wrote during the read (else this proves little).
  std::lock_guard<std::mutex> lock(mutex);
  int64_t last = 0;
  for (const auto& [key, puts] : history) last = std::max(last, puts.back().first);
  EXPECT_GT(last, revision);
}

// etcd splits a watch answer above its request limit when asked to: a watch
// catching up over ~3 MiB of events works with a 3 MiB message limit and
// delivers every event once, in order.
TEST_F(EtcdClientTest, WatcherCatchesUpThroughFragments) {
  EtcdClient client(Options());
  std::string error;
  int64_t first = 0;
  std::vector<std::string> keys;
  for (int t = 0; t < 3; ++t) {  // three transactions of 64 x 16 KiB
    std::vector<std::pair<std::string, std::string>> kvs;
    for (int i = 0; i < 64; ++i) {
      char key[32];
      std::snprintf(key, sizeof(key), "%d/%02d", t, i);
      kvs.emplace_back(prefix_ + key, std::string(16u << 10, static_cast<char>('a' + t)));
      keys.push_back(kvs.back().first);
    }
    size_t stored = 0;
    ASSERT_TRUE(client.PutMany(kvs, 0, &stored, &error)) << error;
    if (t == 0) {
      std::optional<EtcdKeyValue> kv;
      ASSERT_TRUE(client.Get(keys.front(), &kv, &error)) << error;
      ASSERT_TRUE(kv.has_value());
      first = kv->mod_revision;
    }
  }
  WatchLog log;
  EtcdWatcher::Options options = WatchOptions(prefix_, true, first);
  options.client.max_answer_bytes = 3u << 20;
  EtcdWatcher watcher(options, log.Events(), log.Resync(), log.State());
  watcher.Start();
  // 3 MiB of base64 in fragments: 2-3 s here natively, 10-16 s under
  // qemu-user. A wait, not a speed bound: a minute.
  ASSERT_TRUE(log.WaitEvents(keys.size(), 60000)) << log.events().size() << " events; bad responses "
                                           << watcher.stats().bad_responses;
  std::this_thread::sleep_for(milliseconds(200));  // nothing more may come
  watcher.Stop();
  const std::vector<EtcdEvent> events = log.events();
  ASSERT_EQ(events.size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(events[i].kv.key, keys[i]) << i;
  EXPECT_EQ(watcher.stats().bad_responses, 0u);
}

TEST_F(EtcdClientTest, RevokedLeaseTakesItsKeys) {
  EtcdClient client(Options());
  std::string error;
  int64_t lease = 0;
  ASSERT_TRUE(client.GrantLease(30, &lease, &error)) << error;
  ASSERT_TRUE(client.Put(prefix_ + "member", "x", lease, &error)) << error;
  std::optional<EtcdKeyValue> kv;
  ASSERT_TRUE(client.Get(prefix_ + "member", &kv, &error)) << error;
  ASSERT_TRUE(kv.has_value());
  EXPECT_EQ(kv->lease, lease);
  int64_t ttl = 0;
  ASSERT_TRUE(client.KeepAliveOnce(lease, &ttl, &error)) << error;
  EXPECT_GT(ttl, 0);
  EXPECT_LE(ttl, 30);

  ASSERT_TRUE(client.RevokeLease(lease, &error)) << error;
  ASSERT_TRUE(client.Get(prefix_ + "member", &kv, &error)) << error;
  EXPECT_FALSE(kv.has_value());
  ttl = 99;
  ASSERT_TRUE(client.KeepAliveOnce(lease, &ttl, &error)) << error;
  EXPECT_EQ(ttl, 0);
  EXPECT_FALSE(client.RevokeLease(lease, &error));
  EXPECT_EQ(error, "etcd: lease " + std::to_string(lease) + " not found");
  EXPECT_FALSE(client.Put(prefix_ + "member", "x", lease, &error));
  EXPECT_EQ(error, "etcd: lease " + std::to_string(lease) + " not found");
}

TEST_F(EtcdClientTest, ExpiredLeaseTakesItsKeys) {
  EtcdClient client(Options());
  std::string error;
  int64_t lease = 0;
  ASSERT_TRUE(client.GrantLease(1, &lease, &error)) << error;  // etcd rounds up to its minimum (2 s)
  ASSERT_TRUE(client.Put(prefix_ + "member", "x", lease, &error)) << error;
  EXPECT_TRUE(WaitUntil(
      [&] {
        std::optional<EtcdKeyValue> kv;
        return client.Get(prefix_ + "member", &kv, &error) && !kv.has_value();
      },
      10000));
  int64_t ttl = 99;
  ASSERT_TRUE(client.KeepAliveOnce(lease, &ttl, &error)) << error;
  EXPECT_EQ(ttl, 0);
}

TEST_F(EtcdClientTest, PutManyStoresBacklogsInWholeTransactions) {
  EtcdClient client(Options());
  std::string error;
  int64_t lease = 0;
  ASSERT_TRUE(client.GrantLease(30, &lease, &error)) << error;
  // 300 puts: more than one transaction may hold (etcd's limit is 128 ops).
  std::vector<std::pair<std::string, std::string>> kvs;
  for (int i = 0; i < 300; ++i) {
    char key[16];
    std::snprintf(key, sizeof(key), "%04d", i);
    kvs.emplace_back(prefix_ + key, "value " + std::to_string(i));
  }
  size_t stored = 0;
  ASSERT_TRUE(client.PutMany(kvs, lease, &stored, &error)) << error;
  EXPECT_EQ(stored, kvs.size());
  std::vector<EtcdKeyValue> read;
  ASSERT_TRUE(client.GetPrefix(prefix_, &read, &error)) << error;
  ASSERT_EQ(read.size(), kvs.size());
  for (size_t i = 0; i < kvs.size(); ++i) {
    EXPECT_EQ(read[i].key, kvs[i].first);
    EXPECT_EQ(read[i].value, kvs[i].second);
    EXPECT_EQ(read[i].lease, lease);
  }
  ASSERT_TRUE(client.PutMany({}, 0, &stored, &error)) << error;  // nothing to do
  EXPECT_EQ(stored, 0u);

  // A value etcd refuses (over its 1.5 MiB request limit) after small ones:
  // the small ones land, and stored says exactly how many.
  std::vector<std::pair<std::string, std::string>> mixed = {
      {prefix_ + "m1", "a"}, {prefix_ + "m2", "b"}, {prefix_ + "m3", std::string(2u << 20, 'x')}, {prefix_ + "m4", "d"}};
  EXPECT_FALSE(client.PutMany(mixed, 0, &stored, &error));
  EXPECT_EQ(stored, 2u);
  EXPECT_FALSE(error.empty());
  std::optional<EtcdKeyValue> kv;
  ASSERT_TRUE(client.Get(prefix_ + "m2", &kv, &error)) << error;
  EXPECT_TRUE(kv.has_value());
  ASSERT_TRUE(client.Get(prefix_ + "m4", &kv, &error)) << error;
  EXPECT_FALSE(kv.has_value());

  // Revoking the lease takes every batched key; a put on it is then refused.
  ASSERT_TRUE(client.RevokeLease(lease, &error)) << error;
  ASSERT_TRUE(client.GetPrefix(prefix_ + "0", &read, &error)) << error;
  EXPECT_TRUE(read.empty());
  EXPECT_FALSE(client.PutMany(kvs, lease, &stored, &error));
  EXPECT_EQ(stored, 0u);
  EXPECT_EQ(error, "etcd: lease " + std::to_string(lease) + " not found");
}

TEST_F(EtcdClientTest, PutIfAbsentElectsOneLeader) {
  EtcdClient alice(Options()), bob(Options());
  std::string error;
  int64_t alice_lease = 0, bob_lease = 0;
  ASSERT_TRUE(alice.GrantLease(30, &alice_lease, &error)) << error;
  ASSERT_TRUE(bob.GrantLease(30, &bob_lease, &error)) << error;
  const std::string key = prefix_ + "leader";

  bool created = false;
  EtcdKeyValue current;
  ASSERT_TRUE(alice.PutIfAbsent(key, "alice", alice_lease, &created, &current, &error)) << error;
  EXPECT_TRUE(created);
  EXPECT_EQ(current.value, "alice");
  EXPECT_EQ(current.lease, alice_lease);
  const int64_t alice_revision = current.create_revision;
  ASSERT_TRUE(bob.PutIfAbsent(key, "bob", bob_lease, &created, &current, &error)) << error;
  EXPECT_FALSE(created);
  EXPECT_EQ(current.key, key);
  EXPECT_EQ(current.value, "alice");
  EXPECT_EQ(current.lease, alice_lease);
  EXPECT_EQ(current.create_revision, alice_revision);

  ASSERT_TRUE(alice.RevokeLease(alice_lease, &error)) << error;  // alice dies
  ASSERT_TRUE(bob.PutIfAbsent(key, "bob", bob_lease, &created, &current, &error)) << error;
  EXPECT_TRUE(created);
  EXPECT_EQ(current.value, "bob");
  std::optional<EtcdKeyValue> kv;
  ASSERT_TRUE(alice.Get(key, &kv, &error)) << error;
  ASSERT_TRUE(kv.has_value());
  EXPECT_EQ(kv->value, "bob");
  EXPECT_EQ(kv->lease, bob_lease);
  EXPECT_EQ(kv->create_revision, current.create_revision);
  ASSERT_TRUE(bob.RevokeLease(bob_lease, &error)) << error;
}

TEST_F(EtcdClientTest, DeleteIfValueResignsOnlyItsOwnKey) {
  EtcdClient client(Options());
  std::string error;
  const std::string key = prefix_ + "leader";
  bool deleted = true;
  ASSERT_TRUE(client.DeleteIfValue(key, "me", &deleted, &error)) << error;  // absent
  EXPECT_FALSE(deleted);
  ASSERT_TRUE(client.Put(key, "other", 0, &error)) << error;
  ASSERT_TRUE(client.DeleteIfValue(key, "me", &deleted, &error)) << error;
  EXPECT_FALSE(deleted);
  std::optional<EtcdKeyValue> kv;
  ASSERT_TRUE(client.Get(key, &kv, &error)) << error;
  EXPECT_TRUE(kv.has_value());
  ASSERT_TRUE(client.Put(key, "me", 0, &error)) << error;
  ASSERT_TRUE(client.DeleteIfValue(key, "me", &deleted, &error)) << error;
  EXPECT_TRUE(deleted);
  ASSERT_TRUE(client.Get(key, &kv, &error)) << error;
  EXPECT_FALSE(kv.has_value());
}

TEST_F(EtcdClientTest, FailsOverFromADeadEndpoint) {
  const std::string dead = "http://127.0.0.1:" + std::to_string(DeadPort());
  EtcdClient client(EtcdClientOptions{{dead, shared_->client_url()}, 1000, 2000});
  EXPECT_EQ(client.current_endpoint(), dead);
  std::string error;
  const auto start = Clock::now();
  ASSERT_TRUE(client.Put(prefix_ + "k", "v", 0, &error)) << error;
  EXPECT_EQ(client.current_endpoint(), shared_->client_url());  // sticky from now on
  std::optional<EtcdKeyValue> kv;
  ASSERT_TRUE(client.Get(prefix_ + "k", &kv, &error)) << error;
  ASSERT_TRUE(kv.has_value());
  EXPECT_LT(MsSince(start), 5000);

  WatchLog log;
  EtcdWatcher::Options options = WatchOptions(prefix_, true);
  options.client.endpoints = {dead, shared_->client_url()};
  EtcdWatcher watcher(options, log.Events(), log.Resync(), log.State());
  watcher.Start();
  ASSERT_TRUE(log.WaitState(true));
  ASSERT_TRUE(client.Put(prefix_ + "k", "w", 0, &error)) << error;
  ASSERT_TRUE(log.WaitEvents(1));
  EXPECT_EQ(log.events()[0].kv.value, "w");
}

TEST_F(EtcdClientTest, WatcherDeliversPutsAndDeletesInOrder) {
  EtcdClient client(Options());
  std::string error;
  WatchLog prefix_log, key_log;
  EtcdWatcher prefix_watch(WatchOptions(prefix_, true), prefix_log.Events(), prefix_log.Resync(),
                           prefix_log.State());
  EtcdWatcher key_watch(WatchOptions(prefix_ + "a", false), key_log.Events());
  prefix_watch.Start();
  key_watch.Start();
  ASSERT_TRUE(prefix_log.WaitState(true));
  ASSERT_TRUE(WaitUntil([&] { return key_watch.stats().streams_opened > 0; }, 10000));

  int64_t ra = 0, rb = 0, rc = 0;
  ASSERT_TRUE(client.Put(prefix_ + "a", "1", 0, &error, &ra)) << error;
  ASSERT_TRUE(client.Put(prefix_ + "ab", "2", 0, &error, &rb)) << error;
  ASSERT_TRUE(client.Delete(prefix_ + "a", &error)) << error;
  ASSERT_TRUE(client.Put(prefix_ + "c", "3", 0, &error, &rc)) << error;
  ASSERT_TRUE(client.Put("/elsewhere/" + prefix_, "x", 0, &error)) << error;

  ASSERT_TRUE(prefix_log.WaitEvents(4));
  ASSERT_TRUE(key_log.WaitEvents(2));
  std::this_thread::sleep_for(milliseconds(200));  // nothing more may come
  const std::vector<EtcdEvent> events = prefix_log.events();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].type, EtcdEvent::Type::kPut);
  EXPECT_EQ(events[0].kv.key, prefix_ + "a");
  EXPECT_EQ(events[0].kv.value, "1");
  EXPECT_EQ(events[0].kv.mod_revision, ra);
  EXPECT_EQ(events[1].kv.key, prefix_ + "ab");
  EXPECT_EQ(events[1].kv.mod_revision, rb);
  EXPECT_EQ(events[2].type, EtcdEvent::Type::kDelete);
  EXPECT_EQ(events[2].kv.key, prefix_ + "a");
  EXPECT_EQ(events[3].kv.value, "3");
  EXPECT_EQ(prefix_watch.last_revision(), rc);
  const std::vector<EtcdEvent> key_events = key_log.events();
  ASSERT_EQ(key_events.size(), 2u);  // "a" only, not "ab"
  EXPECT_EQ(key_events[0].type, EtcdEvent::Type::kPut);
  EXPECT_EQ(key_events[1].type, EtcdEvent::Type::kDelete);
  EXPECT_TRUE(prefix_log.resyncs().empty());
}

TEST_F(EtcdClientTest, WatcherReplaysFromStartRevision) {
  EtcdClient client(Options());
  std::string error;
  int64_t first = 0;
  ASSERT_TRUE(client.Put(prefix_ + "1", "a", 0, &error, &first)) << error;
  ASSERT_TRUE(client.Put(prefix_ + "2", "b", 0, &error)) << error;
  ASSERT_TRUE(client.Put(prefix_ + "1", "c", 0, &error)) << error;
  WatchLog log;
  EtcdWatcher watcher(WatchOptions(prefix_, true, first), log.Events());
  watcher.Start();
  ASSERT_TRUE(log.WaitEvents(3));
  const std::vector<EtcdEvent> events = log.events();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].kv.mod_revision, first);
  EXPECT_EQ(events[2].kv.value, "c");
  EXPECT_EQ(events[2].kv.version, 2);
}

TEST_F(EtcdClientTest, WatcherResyncsAfterCompaction) {
  EtcdClient client(Options());
  std::string error;
  int64_t first = 0, compact = 0, after = 0;
  ASSERT_TRUE(client.Put(prefix_ + "k", "1", 0, &error, &first)) << error;
  ASSERT_TRUE(client.Put(prefix_ + "k", "2", 0, &error)) << error;
  ASSERT_TRUE(client.Put(prefix_ + "k", "3", 0, &error, &compact)) << error;
  std::string answer;
  ASSERT_TRUE(client.RawCall("/v3/kv/compaction", "{\"revision\":\"" + std::to_string(compact) + "\"}", &answer,
                             &error))
      << error;

  WatchLog log;
  EtcdWatcher watcher(WatchOptions(prefix_, true, first), log.Events(), log.Resync(), log.State());
  watcher.Start();
  ASSERT_TRUE(WaitUntil([&] { return !log.resyncs().empty(); }, 10000));
  EXPECT_EQ(log.resyncs()[0], compact);
  // The owner re-reads; the watch goes on from the compaction on.
  std::optional<EtcdKeyValue> kv;
  ASSERT_TRUE(client.Get(prefix_ + "k", &kv, &error)) << error;
  ASSERT_TRUE(kv.has_value());
  EXPECT_EQ(kv->value, "3");
  ASSERT_TRUE(client.Put(prefix_ + "k", "4", 0, &error, &after)) << error;
  ASSERT_TRUE(WaitUntil([&] { return watcher.last_revision() == after; }, 10000));
  for (const EtcdEvent& event : log.events()) EXPECT_GE(event.kv.mod_revision, compact);
  EXPECT_EQ(log.events().back().kv.value, "4");
  EXPECT_EQ(log.resyncs().size(), 1u);
  EXPECT_EQ(watcher.stats().resyncs, 1u);
}

TEST_F(EtcdClientTest, WatcherSurvivesEtcdRestart) {
  EtcdServerProcess own;
  std::string error;
  ASSERT_TRUE(own.Start(&error)) << error;
  EtcdClient client(Options(own.client_url()));
  WatchLog log;
  EtcdWatcher::Options options = WatchOptions(prefix_, true);
  options.client = Options(own.client_url());
  EtcdWatcher watcher(options, log.Events(), log.Resync(), log.State());
  watcher.Start();
  ASSERT_TRUE(log.WaitState(true));
  ASSERT_TRUE(client.Put(prefix_ + "a", "1", 0, &error)) << error;
  ASSERT_TRUE(client.Put(prefix_ + "b", "2", 0, &error)) << error;
  ASSERT_TRUE(log.WaitEvents(2));

  ASSERT_TRUE(own.Stop(&error)) << error;
  ASSERT_TRUE(log.WaitState(false));
  std::optional<EtcdKeyValue> kv;
  const auto start = Clock::now();
  EXPECT_FALSE(client.Get(prefix_ + "a", &kv, &error));  // down: a clear error, quickly
  EXPECT_LT(MsSince(start), 5000);
  EXPECT_EQ(error, "etcd " + own.client_url() + ": connection refused");

  ASSERT_TRUE(own.Restart(&error)) << error;
  ASSERT_TRUE(client.Put(prefix_ + "c", "3", 0, &error)) << error;
  ASSERT_TRUE(client.Delete(prefix_ + "a", &error)) << error;
  ASSERT_TRUE(log.WaitEvents(4));
  ASSERT_TRUE(log.WaitState(true, 2));
  std::this_thread::sleep_for(milliseconds(200));  // nothing more may come
  const std::vector<EtcdEvent> events = log.events();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].kv.key, prefix_ + "a");
  EXPECT_EQ(events[1].kv.key, prefix_ + "b");
  EXPECT_EQ(events[2].kv.key, prefix_ + "c");
  EXPECT_EQ(events[3].type, EtcdEvent::Type::kDelete);
  for (size_t i = 1; i < events.size(); ++i) EXPECT_GT(events[i].kv.mod_revision, events[i - 1].kv.mod_revision);
  EXPECT_TRUE(log.resyncs().empty());
  EXPECT_GE(watcher.stats().streams_opened, 2u);
  watcher.Stop();
}

TEST_F(EtcdClientTest, WatcherResyncsWhenEtcdsHistoryGoesBack) {
  EtcdServerProcess own;
  std::string error;
  ASSERT_TRUE(own.Start(&error)) << error;
  EtcdClient client(Options(own.client_url()));
  WatchLog log;
  EtcdWatcher::Options options = WatchOptions(prefix_, true);
  options.client = Options(own.client_url());
  EtcdWatcher watcher(options, log.Events(), log.Resync(), log.State());
  watcher.Start();
  ASSERT_TRUE(log.WaitState(true));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(client.Put(prefix_ + "k", std::to_string(i), 0, &error)) << error;
  ASSERT_TRUE(log.WaitEvents(5));

  ASSERT_TRUE(own.Stop(&error)) << error;
  std::filesystem::remove_all(own.dir() / "data");  // a new cluster, its revision back at 1
  ASSERT_TRUE(own.Start(&error)) << error;
  ASSERT_TRUE(WaitUntil([&] { return !log.resyncs().empty(); }, 10000));
  EXPECT_EQ(log.resyncs()[0], 2);  // the new cluster's revision + 1
  int64_t revision = 0;
  ASSERT_TRUE(client.Put(prefix_ + "k", "new", 0, &error, &revision)) << error;
  ASSERT_TRUE(log.WaitEvents(6));
  EXPECT_EQ(log.events().back().kv.value, "new");
  EXPECT_EQ(watcher.last_revision(), revision);
}

TEST_F(EtcdClientTest, WatcherReopensIdleStreamsSilently) {
  EtcdClient client(Options());
  std::string error;
  WatchLog log;
  EtcdWatcher::Options options = WatchOptions(prefix_, true);
  options.idle_timeout_ms = 200;
  EtcdWatcher watcher(options, log.Events(), log.Resync(), log.State());
  watcher.Start();
  ASSERT_TRUE(WaitUntil([&] { return watcher.stats().streams_opened >= 3; }, 10000));
  int64_t revision = 0;
  ASSERT_TRUE(client.Put(prefix_ + "k", "v", 0, &error, &revision)) << error;
  ASSERT_TRUE(log.WaitEvents(1));
  ASSERT_TRUE(WaitUntil([&] { return watcher.stats().streams_opened >= 5; }, 10000));
  watcher.Stop();
  EXPECT_EQ(log.events().size(), 1u);  // once, although streams were reopened after it
  EXPECT_EQ(log.events()[0].kv.mod_revision, revision);
  EXPECT_TRUE(log.errors().empty());  // never reported down
  EXPECT_EQ(watcher.stats().failures, 0u);
}

TEST_F(EtcdClientTest, WatcherSurvivesAThrowingHandler) {
  EtcdClient client(Options());
  std::string error;
  std::atomic<int> calls{0};
  EtcdWatcher watcher(WatchOptions(prefix_, true), [&](const std::vector<EtcdEvent>&, int64_t) {
    ++calls;
    throw std::runtime_error("handler bug");
  });
  watcher.Start();
  ASSERT_TRUE(WaitUntil([&] { return watcher.stats().streams_opened > 0; }, 10000));
  ASSERT_TRUE(client.Put(prefix_ + "k", "1", 0, &error)) << error;
  ASSERT_TRUE(client.Put(prefix_ + "k", "2", 0, &error)) << error;
  EXPECT_TRUE(WaitUntil([&] { return calls.load() == 2; }, 10000));
}

TEST_F(EtcdClientTest, WatcherStopsPromptlyWhenQuiet) {
  WatchLog log;
  auto watcher = std::make_unique<EtcdWatcher>(WatchOptions(prefix_ + "quiet", false), log.Events(),
                                               log.Resync(), log.State());
  watcher->Start();
  ASSERT_TRUE(log.WaitState(true));
  const auto start = Clock::now();
  watcher->Stop();
  EXPECT_LT(MsSince(start), 2000);
  const auto destroy = Clock::now();
  watcher.reset();
  EXPECT_LT(MsSince(destroy), 2000);
}

TEST_F(EtcdClientTest, WatcherMayStopFromItsCallback) {
  EtcdClient client(Options());
  std::string error;
  std::unique_ptr<EtcdWatcher> watcher;
  std::atomic<int> calls{0};
  watcher = std::make_unique<EtcdWatcher>(WatchOptions(prefix_, true), [&](const std::vector<EtcdEvent>&, int64_t) {
    ++calls;
    watcher->Stop();
  });
  watcher->Start();
  ASSERT_TRUE(WaitUntil([&] { return watcher->stats().streams_opened > 0; }, 10000));
  ASSERT_TRUE(client.Put(prefix_ + "x", "1", 0, &error)) << error;
  ASSERT_TRUE(WaitUntil([&] { return calls.load() == 1; }, 10000));
  ASSERT_TRUE(client.Put(prefix_ + "x", "2", 0, &error)) << error;
  watcher->Stop();
  EXPECT_EQ(calls.load(), 1);
}

}  // namespace
}  // namespace chronolink
