// EtcdClient and EtcdWatcher against a real etcd (tests/support/etcd_server.h)
// and, for what a real etcd never does (garbage, silence), against small
// fake servers. Without etcd the real-server tests skip, except under CI
// (CI set), where that is a failure.
#include "agent/coord/etcd_client.h"
#include "agent/coord/etcd_watcher.h"

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
#include <memory>
#include <mutex>
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
}

TEST(EtcdEndpointTest, RejectsHttpsAndGarbage) {
  std::string host, error;
  int port = 0;
  EXPECT_FALSE(ParseEtcdEndpoint("https://127.0.0.1:2379", &host, &port, &error));
  EXPECT_NE(error.find("https"), std::string::npos) << error;
  for (const char* url : {"", "127.0.0.1:2379", "http://", "http://host", "http://host:", "http://:2379",
                          "http://host:0", "http://host:65536", "http://host:12ab", "http://host:-1",
                          "http://a b:1", "http://host:2379/v3", "http://user@host:2379", "http://host:2379?x",
                          "http://[::1:2379", "http://[zz]:2379", "ftp://host:1", "http://h\xff:1"}) {
    error.clear();
    EXPECT_FALSE(ParseEtcdEndpoint(url, &host, &port, &error)) << url;
    EXPECT_FALSE(error.empty()) << url;
  }
  ParseEtcdEndpoint("http://host", &host, &port, &error);
  EXPECT_NE(error.find("port"), std::string::npos) << error;
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
  EXPECT_NE(error.find("not a JSON object"), std::string::npos) << error;
  EXPECT_FALSE(client.Put("k", "v", 0, &error));
  EXPECT_NE(error.find("bad header"), std::string::npos) << error;
  bool created = false;
  EtcdKeyValue current;
  EXPECT_FALSE(client.PutIfAbsent("k", "v", 0, &created, &current, &error));
  EXPECT_NE(error.find("bad txn answer"), std::string::npos) << error;
  int64_t lease = 0;
  EXPECT_FALSE(client.GrantLease(5, &lease, &error));
  EXPECT_NE(error.find("HTTP 500: <html>oops</html>"), std::string::npos) << error;
  int64_t ttl = 0;
  EXPECT_FALSE(client.KeepAliveOnce(7, &ttl, &error));
  EXPECT_FALSE(error.empty());
  EXPECT_FALSE(client.Delete("k", &error));  // 404 from the fake
  EXPECT_NE(error.find("HTTP 404"), std::string::npos) << error;
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
