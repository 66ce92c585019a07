// A small client for etcd 3.4's v3 JSON gateway (see etcd_gateway.h for
// what the gateway does), enough for the etcd coordination backend: keys,
// prefixes, leases, batched puts and the two transactions of a leader
// election. Watches are EtcdWatcher's (etcd_watcher.h).
//
// With options.auth every request carries the token; one refused as stale
// (etcd_auth.h) gets a new token and is sent once more.
//
// Threading: an EtcdClient is synchronous and not thread-safe; use one per
// thread. Nothing here throws; every call is bounded by the configured
// timeouts.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/coord/etcd/etcd_gateway.h"

namespace chronolink {

// What made the last call fail, for a caller that must tell a setting to
// fix (refuse to start) from an outage (wait it out).
enum class EtcdFailure {
  kNone,
  kUnreachable,  // no answer: connection refused or timed out, ...
  kTls,          // TLS refused: etcd's certificate, or ours; a setting to fix
  kAuth,         // authentication failed, or permission denied; a setting to fix
  kAnswer,       // etcd answered with another error, or garbage
};

class EtcdClient {
 public:
  explicit EtcdClient(EtcdClientOptions options);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // lease 0: no lease. *revision: the revision of the put.
  bool Put(std::string_view key, std::string_view value, int64_t lease, std::string* error,
           int64_t* revision = nullptr);
  // *out empty when the key does not exist. *revision: the store's revision
  // at the read (the header's), also when the key is absent.
  bool Get(std::string_view key, std::optional<EtcdKeyValue>* out, std::string* error,
           int64_t* revision = nullptr);
  // Every key starting with prefix, sorted by key, as of one revision
  // (*revision): read in pages of options.range_page_keys keys, each page
  // at the first one's revision. Should that revision be compacted before
  // the last page, the read starts over at the current revision (3 times
  // at most). With `keep`, only the pairs it accepts are stored, page by
  // page: memory follows what is kept, not what a writer to etcd put there.
  using KeyValueFilter = std::function<bool(const EtcdKeyValue&)>;
  bool GetPrefix(std::string_view prefix, std::vector<EtcdKeyValue>* out, std::string* error,
                 int64_t* revision = nullptr, const KeyValueFilter& keep = {});
  // Deleting an absent key succeeds.
  bool Delete(std::string_view key, std::string* error);
  bool DeletePrefix(std::string_view prefix, int64_t* deleted, std::string* error);

  // *lease_id: the new lease; etcd may round ttl_s up to its minimum.
  bool GrantLease(int64_t ttl_s, int64_t* lease_id, std::string* error);
  // Refreshes once. *ttl_s: the remaining TTL; 0 when the lease no longer
  // exists (expired or revoked), which is a success, not an error.
  bool KeepAliveOnce(int64_t lease_id, int64_t* ttl_s, std::string* error);
  // Deletes the lease and every key bound to it. An unknown lease is an
  // error ("etcd: lease N not found").
  bool RevokeLease(int64_t lease_id, std::string* error);

  // Puts every key, lease 0 or one lease for all, in transactions of at
  // most kMaxTxnOps puts (and about 1 MiB): far fewer round trips than one
  // Put each when a backlog drains. Each transaction applies whole or not
  // at all, so *stored (the puts applied, always a prefix of kvs) is exact
  // also on failure.
  bool PutMany(const std::vector<std::pair<std::string, std::string>>& kvs, int64_t lease, size_t* stored,
               std::string* error);

  // Election primitive, one transaction: if the key does not exist, put it
  // (bound to lease) else read it. *created says which; *current holds the
  // key after the transaction either way. After a request retried on another
  // endpoint the key may exist because of our own first attempt: compare
  // current->value, not only *created.
  bool PutIfAbsent(std::string_view key, std::string_view value, int64_t lease, bool* created,
                   EtcdKeyValue* current, std::string* error);
  // Resign primitive, one transaction: if the key holds expected, delete it.
  // *deleted says whether it did (false also when the key is absent).
  bool DeleteIfValue(std::string_view key, std::string_view expected, bool* deleted, std::string* error);

  // Gets a token for options.auth (user and password), stored there for
  // every request of this client and of whoever shares the EtcdAuth. When
  // etcd has auth switched off the token is empty and requests go without.
  // Refused credentials: "etcd URL: authentication failed for user NAME:
  // <etcd's message>", last_failure() kAuth.
  bool Authenticate(std::string* error);

  // The endpoint the next request goes to first (empty without endpoints).
  const std::string& current_endpoint() const;
  EtcdFailure last_failure() const { return last_failure_; }

  // POSTs a raw JSON request (body as the gateway expects it) and returns
  // the answer's text, once it parsed as a JSON object. For what this class
  // does not wrap (tests use it for /v3/kv/compaction).
  bool RawCall(const std::string& path, const std::string& json_body, std::string* json_answer,
               std::string* error);

 private:
  struct Endpoint;
  struct Reply;
  // Sends to the current endpoint, then the others in order when the request
  // surely did not arrive (no connection) or may safely repeat (idempotent).
  // With auth: authenticates first when no token is held, and once more
  // when etcd calls the token stale.
  bool Call(const std::string& path, const std::string& body, bool idempotent, Reply* reply,
            std::string* error);
  bool CallEndpoints(const std::string& path, const std::string& body, bool idempotent, bool with_token,
                     Reply* reply, std::string* error);
  // One endpoint, one request: Post, then what the outcome was. The
  // workarounds for the client's and the server's versions are their own
  // functions (TrailerOnlyFailure, CommonNameRefusal).
  bool CallOne(Endpoint& endpoint, const std::string& path, const std::string& body, bool with_token,
               Reply* reply, bool* may_retry, std::string* error);
  struct Exchange;
  Exchange Post(Endpoint& endpoint, const std::string& path, const std::string& body, bool with_token,
                std::string* answer);
  static bool TrailerOnlyFailure(const Exchange& x, const Reply& reply);
  void ClassifyTransportFailure(const Exchange& x, Endpoint& endpoint, const std::string& path,
                                const std::string& answer, Reply* reply, bool* may_retry, std::string* error);
  static std::string CommonNameRefusal(const std::string& answer);
  void ClassifyHttpError(int status, const std::string& where, const std::string& answer, Reply* reply,
                         std::string* error);
  // GetPrefix's one attempt. *compacted: it failed because read_revision
  // was compacted between pages.
  bool ReadPrefixPages(std::string_view prefix, std::vector<EtcdKeyValue>* out, int64_t* read_revision,
                       bool* compacted, const KeyValueFilter& keep, std::string* error);
  // *last_key: the last key read (kept or not), empty before the first.
  static bool AppendPage(std::string_view prefix, std::vector<EtcdKeyValue> page, bool more,
                         const KeyValueFilter& keep, std::string* last_key, std::vector<EtcdKeyValue>* out);

  EtcdClientOptions options_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  std::string config_error_;  // a bad endpoint: every call fails with it
  size_t current_ = 0;
  EtcdFailure last_failure_ = EtcdFailure::kNone;
};

}  // namespace chronolink
