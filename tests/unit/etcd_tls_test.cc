// EtcdClient and EtcdWatcher against a real etcd over https with client
// certificates (--client-cert-auth), and with etcd's user/password auth on,
// with certificates the test makes with the openssl CLI
// (tests/support/etcd_tls_pki.h). Without etcd (or etcdctl, for the auth
// setup) the tests skip, except under CI, where that is a failure.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/coord/etcd/etcd_auth.h"
#include "agent/coord/etcd/etcd_client.h"
#include "agent/coord/etcd/etcd_tls.h"
#include "agent/coord/etcd/etcd_watcher.h"
#include "tests/support/etcd_server.h"
#include "tests/support/etcd_tls_pki.h"
#include "tests/support/require_etcd.h"
#include "tests/support/wait_until.h"

namespace chronolink {
namespace {

namespace fs = std::filesystem;
using testing::EtcdServerOptions;
using testing::EtcdServerProcess;
using testing::EtcdTestPki;
using testing::RequireEtcd;
using testing::WaitUntil;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream all;
  all << in.rdbuf();
  return all.str();
}

std::shared_ptr<const EtcdTlsCredentials> Credentials(const std::string& ca, const std::string& cert,
                                                      const std::string& key) {
  std::string error;
  auto credentials = EtcdTlsCredentials::Parse(
      {ReadFile(ca), cert.empty() ? "" : ReadFile(cert), key.empty() ? "" : ReadFile(key)}, &error);
  EXPECT_NE(credentials, nullptr) << error;
  return credentials;
}

// The events a watcher delivered, and the errors it reported.
class Deliveries {
 public:
  EtcdWatcher::EventsHandler Events() {
    return [this](const std::vector<EtcdEvent>& events, int64_t) {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const EtcdEvent& e : events) values_.push_back(e.kv.value);
    };
  }
  EtcdWatcher::StateHandler State() {
    return [this](bool connected, const std::string& error) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (connected) ++connects_;
      if (!connected) errors_.push_back(error);
    };
  }
  std::vector<std::string> values() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return values_;
  }
  int connects() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return connects_;
  }
  std::string errors() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string all;
    for (const std::string& e : errors_) all += e + "\n";
    return all;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> values_;
  std::vector<std::string> errors_;
  int connects_ = 0;
};

// The PKI, made once for the whole file (every suite uses it) and removed
// when the test program ends.
class PkiTest : public ::testing::Test {
 protected:
  struct Dir {
    ~Dir() {
      std::error_code ignored;
      if (!path.empty()) fs::remove_all(path, ignored);
    }
    fs::path path;
  };
  void SetUp() override {
    if (!pki_.dir.empty()) return;
    std::string pattern = (fs::temp_directory_path() / "chronolink-etcd-pki-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    pki_dir_.path = pattern;
    std::string error;
    ASSERT_TRUE(testing::MakeEtcdTestPki(pki_dir_.path, &pki_, &error)) << error;
  }
  static inline Dir pki_dir_;
  static inline EtcdTestPki pki_;
};

// ---- without a server ----------------------------------------------------------

using EtcdTlsCredentialsTest = PkiTest;

TEST_F(EtcdTlsCredentialsTest, ParsesACaAndAMatchingClientCertificate) {
  std::string error;
  auto with_cert = EtcdTlsCredentials::Parse(
      {ReadFile(pki_.ca), ReadFile(pki_.client_cert), ReadFile(pki_.client_key)}, &error);
  ASSERT_NE(with_cert, nullptr) << error;
  EXPECT_NE(with_cert->cert(), nullptr);
  EXPECT_NE(with_cert->key(), nullptr);
  auto ca_only = EtcdTlsCredentials::Parse({ReadFile(pki_.ca), "", ""}, &error);
  ASSERT_NE(ca_only, nullptr) << error;
  EXPECT_EQ(ca_only->cert(), nullptr);
  // Two CAs in one file: both are trusted.
  EXPECT_NE(EtcdTlsCredentials::Parse({ReadFile(pki_.ca) + ReadFile(pki_.other_ca), "", ""}, &error), nullptr)
      << error;
}

TEST_F(EtcdTlsCredentialsTest, RefusesWhatCannotWork) {
  const std::string ca = ReadFile(pki_.ca), cert = ReadFile(pki_.client_cert), key = ReadFile(pki_.client_key);
  // {ca, cert, key, what the error says}
  const std::vector<std::vector<std::string>> cases = {
      {"", "", "", "no PEM certificate"},
      {"garbage", "", "", "no PEM certificate"},
      {ca, cert, "", "give both or neither"},
      {ca, "", key, "give both or neither"},
      {ca, "garbage", key, "client certificate"},
      {ca, cert, "garbage", "client key"},
      {ca, cert, ReadFile(pki_.other_client_key), "does not belong"},
  };
  for (const auto& c : cases) {
    std::string error;
    EXPECT_EQ(EtcdTlsCredentials::Parse({c[0], c[1], c[2]}, &error), nullptr) << c[3];
    EXPECT_NE(error.find(c[3]), std::string::npos) << error;
  }
}

TEST(EtcdEndpointsTest, MixedSchemesAndHttpsWithoutCaAreRefused) {
  EtcdClientOptions options;
  options.endpoints = {"http://127.0.0.1:2379", "https://127.0.0.1:2380"};
  EXPECT_NE(CheckEtcdEndpoints(options).find("mix http:// and https://"), std::string::npos);
  EtcdClient mixed(options);
  std::string error;
  EXPECT_FALSE(mixed.Put("k", "v", 0, &error));
  EXPECT_NE(error.find("mix http:// and https://"), std::string::npos) << error;

  options.endpoints = {"https://127.0.0.1:2380"};
  EXPECT_NE(CheckEtcdEndpoints(options).find("--etcd-cacert"), std::string::npos);
  options.endpoints = {"http://127.0.0.1:2379"};
  EXPECT_EQ(CheckEtcdEndpoints(options), "");
}

TEST(EtcdAuthTest, StaleTokenMessagesAreEtcds) {
  EXPECT_TRUE(IsStaleTokenMessage("etcdserver: invalid auth token"));
  EXPECT_TRUE(IsStaleTokenMessage("etcdserver: user name is empty"));
  EXPECT_TRUE(IsStaleTokenMessage("etcdserver: revision of auth store is old"));
  EXPECT_FALSE(IsStaleTokenMessage("etcdserver: permission denied"));
  EXPECT_FALSE(IsStaleTokenMessage("etcdserver: authentication failed, invalid user ID or password"));
  EtcdAuth auth("u", "p");
  EXPECT_FALSE(auth.token().has_value());
  auth.SetToken("t1");
  auth.Invalidate("t0");  // another thread's older token: kept
  EXPECT_EQ(auth.token(), std::optional<std::string>("t1"));
  auth.Invalidate("t1");
  EXPECT_FALSE(auth.token().has_value());
}

// ---- against a real etcd over https ------------------------------------------------

// Starts etcd over https with --client-cert-auth, plus `extra` flags.
std::unique_ptr<EtcdServerProcess> StartTlsEtcd(const EtcdTestPki& pki, std::vector<std::string> extra = {}) {
  EtcdServerOptions options;
  options.tls = pki.ServerTls();
  options.extra_args = std::move(extra);
  auto server = std::make_unique<EtcdServerProcess>(options);
  std::string error;
  EXPECT_TRUE(server->Start(&error)) << error;
  if (!server->running()) return nullptr;
  return server;
}

class EtcdTlsTest : public PkiTest {
 protected:
  static void TearDownTestSuite() { server_.reset(); }
  void SetUp() override {
    RequireEtcd();
    if (IsSkipped() || HasFatalFailure()) return;
    PkiTest::SetUp();
    if (HasFatalFailure()) return;
    if (!server_) server_ = StartTlsEtcd(pki_);
    ASSERT_NE(server_, nullptr);
  }

  EtcdClientOptions Options(const std::string& ca, const std::string& cert, const std::string& key,
                            const std::string& url = "") const {
    EtcdClientOptions options;
    options.endpoints = {url.empty() ? server_->client_url() : url};
    options.tls = Credentials(ca, cert, key);
    return options;
  }
  EtcdClientOptions GoodOptions() const { return Options(pki_.ca, pki_.client_cert, pki_.client_key); }

  static inline std::unique_ptr<EtcdServerProcess> server_;
};

TEST_F(EtcdTlsTest, PutGetWatchAndLeasesWork) {
  ASSERT_EQ(server_->client_url().rfind("https://", 0), 0u);
  Deliveries deliveries;
  EtcdWatcher::Options watch;
  watch.client = GoodOptions();
  watch.key = "/tls/watched/";
  watch.prefix = true;
  EtcdWatcher watcher(watch, deliveries.Events(), {}, deliveries.State());
  watcher.Start();
  ASSERT_TRUE(WaitUntil([&] { return deliveries.connects() > 0; }, 10000)) << deliveries.errors();

  EtcdClient client(GoodOptions());
  std::string error;
  int64_t lease = 0, ttl = 0;
  ASSERT_TRUE(client.GrantLease(5, &lease, &error)) << error;
  ASSERT_TRUE(client.Put("/tls/watched/a", "over tls", lease, &error)) << error;
  std::optional<EtcdKeyValue> kv;
  ASSERT_TRUE(client.Get("/tls/watched/a", &kv, &error)) << error;
  ASSERT_TRUE(kv.has_value());
  EXPECT_EQ(kv->value, "over tls");
  EXPECT_EQ(kv->lease, lease);
  ASSERT_TRUE(client.KeepAliveOnce(lease, &ttl, &error)) << error;
  EXPECT_GT(ttl, 0);
  ASSERT_TRUE(WaitUntil([&] { return deliveries.values().size() == 1; }, 10000)) << deliveries.errors();
  EXPECT_EQ(deliveries.values().front(), "over tls");
  ASSERT_TRUE(client.RevokeLease(lease, &error)) << error;
  ASSERT_TRUE(client.Get("/tls/watched/a", &kv, &error)) << error;
  EXPECT_FALSE(kv.has_value());
  watcher.Stop();

  // A DNS name in the certificate works as well as its IP address.
  EtcdClient by_name(Options(pki_.ca, pki_.client_cert, pki_.client_key,
                             "https://localhost:" + std::to_string(server_->client_port())));
  ASSERT_TRUE(by_name.Put("/tls/by-name", "1", 0, &error)) << error;
}

TEST_F(EtcdTlsTest, AClientCertificateFromAnotherCaIsRefused) {
  EtcdClient client(Options(pki_.ca, pki_.other_client_cert, pki_.other_client_key));
  std::string error;
  EXPECT_FALSE(client.Put("/tls/refused", "x", 0, &error));
  EXPECT_EQ(client.last_failure(), EtcdFailure::kTls) << error;
  EXPECT_NE(error.find(server_->client_url()), std::string::npos) << error;
  EXPECT_NE(error.find("client certificate"), std::string::npos) << error;

  // The same for a watch, through its state handler.
  Deliveries deliveries;
  EtcdWatcher::Options watch;
  watch.client = Options(pki_.ca, pki_.other_client_cert, pki_.other_client_key);
  watch.key = "/tls/refused";
  EtcdWatcher watcher(watch, deliveries.Events(), {}, deliveries.State());
  watcher.Start();
  ASSERT_TRUE(WaitUntil([&] { return !deliveries.errors().empty(); }, 10000));
  watcher.Stop();
  EXPECT_EQ(deliveries.connects(), 0);
  EXPECT_NE(deliveries.errors().find("client certificate"), std::string::npos) << deliveries.errors();

  // No client certificate at all: refused as well.
  EtcdClient anonymous(Options(pki_.ca, "", ""));
  EXPECT_FALSE(anonymous.Put("/tls/refused", "x", 0, &error));
  EXPECT_EQ(anonymous.last_failure(), EtcdFailure::kTls) << error;
  EXPECT_NE(error.find("TLS"), std::string::npos) << error;
}

TEST_F(EtcdTlsTest, AServerCertificateOurCaDidNotSignIsRefused) {
  // The client trusts the other CA only; etcd's certificate is from the first.
  EtcdClient client(Options(pki_.other_ca, pki_.client_cert, pki_.client_key));
  std::string error;
  std::optional<EtcdKeyValue> kv;
  EXPECT_FALSE(client.Get("/tls/anything", &kv, &error));
  EXPECT_EQ(client.last_failure(), EtcdFailure::kTls) << error;
  EXPECT_NE(error.find("server's certificate"), std::string::npos) << error;
  EXPECT_NE(error.find("refused"), std::string::npos) << error;
  EXPECT_NE(error.find("--etcd-cacert"), std::string::npos) << error;

  // Plain http to the https port is no way around it either.
  const std::string http_url = "http://127.0.0.1:" + std::to_string(server_->client_port());
  EtcdClient plain(EtcdClientOptions{{http_url}, 1000, 2000});
  EXPECT_FALSE(plain.Get("/tls/anything", &kv, &error));
}

// ---- with etcd's user/password auth on ----------------------------------------------

constexpr char kUser[] = "chronolink";
constexpr char kPassword[] = "s3cret pass";
constexpr char kPrefix[] = "/chronolink-auth/";

class EtcdTlsAuthTest : public PkiTest {
 protected:
  static void TearDownTestSuite() { server_.reset(); }
  void SetUp() override {
    RequireEtcd();
    if (IsSkipped() || HasFatalFailure()) return;
    std::string why;
    if (!testing::EtcdctlAvailable(&why)) {
      testing::SkipOrFailOutsideCi(why);
      return;
    }
    PkiTest::SetUp();
    if (HasFatalFailure()) return;
    if (!server_) server_ = StartAuthEtcd({});
    ASSERT_NE(server_, nullptr);
  }

  static std::unique_ptr<EtcdServerProcess> StartAuthEtcd(std::vector<std::string> extra) {
    auto server = StartTlsEtcd(pki_, std::move(extra));
    if (!server) return nullptr;
    std::string error;
    EXPECT_TRUE(testing::EnableEtcdAuth(server->client_url(), pki_, "rootpw", kUser, kPassword, kPrefix, &error))
        << error;
    return server;
  }

  static EtcdClientOptions Options(const EtcdServerProcess& server, const std::string& password) {
    EtcdClientOptions options;
    options.endpoints = {server.client_url()};
    options.tls = Credentials(pki_.ca, pki_.client_cert, pki_.client_key);
    options.auth = std::make_shared<EtcdAuth>(kUser, password);
    return options;
  }

  static inline std::unique_ptr<EtcdServerProcess> server_;
};

TEST_F(EtcdTlsAuthTest, TheRightPasswordWorksForPutsWatchesAndKeepalives) {
  const EtcdClientOptions options = Options(*server_, kPassword);
  Deliveries deliveries;
  EtcdWatcher::Options watch;
  watch.client = options;  // shares the token
  watch.key = std::string(kPrefix) + "w/";
  watch.prefix = true;
  EtcdWatcher watcher(watch, deliveries.Events(), {}, deliveries.State());
  watcher.Start();
  ASSERT_TRUE(WaitUntil([&] { return deliveries.connects() > 0; }, 10000)) << deliveries.errors();

  EtcdClient client(options);
  std::string error;
  int64_t lease = 0, ttl = 0;
  ASSERT_TRUE(client.GrantLease(5, &lease, &error)) << error;
  ASSERT_TRUE(client.Put(std::string(kPrefix) + "w/a", "authenticated", lease, &error)) << error;
  ASSERT_TRUE(client.KeepAliveOnce(lease, &ttl, &error)) << error;
  EXPECT_GT(ttl, 0);
  ASSERT_TRUE(WaitUntil([&] { return deliveries.values().size() == 1; }, 10000)) << deliveries.errors();
  EXPECT_EQ(deliveries.values().front(), "authenticated");
  ASSERT_TRUE(options.auth->token().has_value());
  EXPECT_FALSE(options.auth->token()->empty());

  // The role grants kPrefix only: elsewhere etcd says no, and that is an
  // auth failure (a setting to fix), not an outage.
  EXPECT_FALSE(client.Put("/elsewhere", "x", 0, &error));
  EXPECT_EQ(client.last_failure(), EtcdFailure::kAuth) << error;
  EXPECT_NE(error.find("permission denied"), std::string::npos) << error;
  watcher.Stop();
}

TEST_F(EtcdTlsAuthTest, AWrongPasswordIsRefusedClearly) {
  EtcdClient client(Options(*server_, "wrong"));
  std::string error;
  EXPECT_FALSE(client.Put(std::string(kPrefix) + "x", "x", 0, &error));
  EXPECT_EQ(client.last_failure(), EtcdFailure::kAuth) << error;
  EXPECT_NE(error.find(server_->client_url()), std::string::npos) << error;
  EXPECT_NE(error.find("authentication failed for user 'chronolink'"), std::string::npos) << error;
  EXPECT_NE(error.find("invalid user ID or password"), std::string::npos) << error;  // etcd's words
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;

  // A watch says the same and never gets established.
  Deliveries deliveries;
  EtcdWatcher::Options watch;
  watch.client = Options(*server_, "wrong");
  watch.key = std::string(kPrefix) + "x";
  EtcdWatcher watcher(watch, deliveries.Events(), {}, deliveries.State());
  watcher.Start();
  ASSERT_TRUE(WaitUntil([&] { return !deliveries.errors().empty(); }, 10000));
  watcher.Stop();
  EXPECT_EQ(deliveries.connects(), 0);
  EXPECT_NE(deliveries.errors().find("authentication failed"), std::string::npos) << deliveries.errors();
}

// etcd 3.4's gateway, with auth on, answers a client certificate that has a
// CommonName with a plain-text refusal whatever the password: the error
// says what to change, and it is a setting to fix.
TEST_F(EtcdTlsAuthTest, AClientCertificateWithACommonNameIsRefusedWithTheFix) {
  EtcdClientOptions options = Options(*server_, kPassword);
  options.tls = Credentials(pki_.ca, pki_.cn_client_cert, pki_.cn_client_key);
  EXPECT_EQ(options.tls->ClientCommonName(), "chronolink");
  EXPECT_EQ(Credentials(pki_.ca, pki_.client_cert, pki_.client_key)->ClientCommonName(), "");
  EtcdClient client(options);
  std::string error;
  EXPECT_FALSE(client.Put(std::string(kPrefix) + "cn", "x", 0, &error));
  EXPECT_EQ(client.last_failure(), EtcdFailure::kTls) << error;
  EXPECT_NE(error.find("without a CN"), std::string::npos) << error;
  EXPECT_EQ(error.find("authentication failed"), std::string::npos) << error;
}

TEST_F(EtcdTlsAuthTest, TokensOfARestartedEtcdAreRenewedByClientAndWatch) {
  // etcd's simple tokens live in the etcd process: a restart kills them all.
  const EtcdClientOptions options = Options(*server_, kPassword);
  Deliveries deliveries;
  EtcdWatcher::Options watch;
  watch.client = options;
  watch.key = std::string(kPrefix) + "restart/";
  watch.prefix = true;
  EtcdWatcher watcher(watch, deliveries.Events(), {}, deliveries.State());
  watcher.Start();
  ASSERT_TRUE(WaitUntil([&] { return deliveries.connects() > 0; }, 10000)) << deliveries.errors();
  EtcdClient client(options);
  std::string error;
  ASSERT_TRUE(client.Put(std::string(kPrefix) + "restart/1", "before", 0, &error)) << error;
  const std::optional<std::string> old_token = options.auth->token();
  ASSERT_TRUE(old_token.has_value());

  ASSERT_TRUE(server_->Restart(&error)) << error;
  // The client's request goes with the dead token, is refused, and goes
  // again with a new one.
  ASSERT_TRUE(client.Put(std::string(kPrefix) + "restart/2", "after", 0, &error)) << error;
  EXPECT_NE(options.auth->token(), old_token);
  // The watch reconnected (with the old or the new token) and caught up.
  ASSERT_TRUE(WaitUntil([&] { return deliveries.values().size() == 2; }, 20000)) << deliveries.errors();
  EXPECT_EQ(deliveries.values(), (std::vector<std::string>{"before", "after"}));
  watcher.Stop();
}

TEST_F(EtcdTlsAuthTest, AnExpiredTokenIsRenewedOnce) {
  // A server of its own whose tokens expire 2 s after their last use.
  auto server = StartAuthEtcd({"--auth-token=simple", "--auth-token-ttl=2"});
  ASSERT_NE(server, nullptr);
  const EtcdClientOptions options = Options(*server, kPassword);
  EtcdClient client(options);
  std::string error;
  ASSERT_TRUE(client.Put(std::string(kPrefix) + "ttl", "1", 0, &error)) << error;
  const std::optional<std::string> first = options.auth->token();
  ASSERT_TRUE(first.has_value());
  // Idle for well over the TTL (etcd drops expired tokens once a second).
  std::this_thread::sleep_for(std::chrono::seconds(5));
  ASSERT_TRUE(client.Put(std::string(kPrefix) + "ttl", "2", 0, &error)) << error;
  EXPECT_NE(options.auth->token(), first) << "the token did not expire: nothing was renewed";
  std::optional<EtcdKeyValue> kv;
  ASSERT_TRUE(client.Get(std::string(kPrefix) + "ttl", &kv, &error)) << error;
  ASSERT_TRUE(kv.has_value());
  EXPECT_EQ(kv->value, "2");
}

}  // namespace
}  // namespace chronolink
