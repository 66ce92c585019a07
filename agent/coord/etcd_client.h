// A small client for etcd 3.4's v3 JSON gateway (HTTP/1.1 + JSON, the
// grpc-gateway that every etcd client URL also serves), enough for the etcd
// coordination backend: keys, prefixes, leases, the two transactions of a
// leader election, and watches.
//
// Why the gateway and not gRPC: it needs nothing beyond cpp-httplib and
// nlohmann-json, which the agent links anyway.
//
// What the gateway does that a user must know (etcd 3.4.23, checked by
// tests/unit/etcd_client_test.cc):
//   - keys and values travel base64-encoded; int64s (revisions, lease IDs,
//     TTLs, counts) travel as JSON strings. Both are hidden here: keys and
//     values are raw bytes, any byte allowed.
//   - fields holding their default value are left out of responses: no
//     "kvs" for an empty range, no "TTL" for a lease that no longer exists,
//     no "type" on PUT events, no "succeeded" on a failed transaction.
//   - errors come as a non-200 status with {"error","message","code"}; code
//     is the gRPC code (5 not found, 14 unavailable, ...). Their chunked body
//     ends with an HTTP trailer (Grpc-Trailer-Content-Type) that cpp-httplib
//     0.11 reports as a read error; the client accepts such an answer when
//     its status line and a whole JSON object arrived.
//   - lease keepalive is a streaming RPC: one request gives one
//     {"result":...} object and the stream ends.
//   - a watch is one long POST whose response is a stream of {"result":...}
//     objects; the first says "created". When the start revision was
//     compacted, etcd answers created, then canceled with compact_revision,
//     and leaves the stream open: the client must close it.
//   - the smallest lease TTL is about 2 s with etcd's default timing; a
//     shorter TTL is granted as that.
//
// Threading: an EtcdClient is synchronous and not thread-safe; use one per
// thread. An EtcdWatcher owns its thread and may be stopped from any thread.
// Nothing here throws; every call is bounded by the configured timeouts.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace httplib {
class Client;
enum class Error;
}  // namespace httplib

namespace chronolink {

struct EtcdKeyValue {
  std::string key, value;
  int64_t create_revision = 0, mod_revision = 0, version = 0, lease = 0;
};

struct EtcdEvent {
  enum class Type { kPut, kDelete } type = Type::kPut;
  EtcdKeyValue kv;  // a delete carries the key and its mod_revision only
};

// Endpoints: a request goes to the current endpoint; when that one does not
// answer, the next request starts at the next endpoint. Within one request
// the next endpoints are tried only where that cannot apply it twice: the
// connection failed (nothing was sent), or the request is a read, a delete
// or a lease keepalive. An answer from etcd, error or not, is final (a 503,
// "unavailable", also moves the next request on). So one call takes at most
// endpoints x (connect_timeout_ms + request_timeout_ms), a refused
// connection costing next to nothing.
struct EtcdClientOptions {
  // "http://host:port" (IPv6 as http://[::1]:2379). Tried in order; the
  // client sticks to the first that answers until it fails.
  std::vector<std::string> endpoints;
  int64_t connect_timeout_ms = 1000;
  // Bounds the wait for the answer (each read, and the whole answer).
  int64_t request_timeout_ms = 2000;
};

// Splits "http://HOST:PORT[/]" into host (brackets of an IPv6 literal
// removed) and port. Plain http only: https, other schemes, user info, paths,
// queries and missing or bad ports are errors that say what is wrong.
bool ParseEtcdEndpoint(const std::string& url, std::string* host, int* port, std::string* error);

// The range_end that makes [prefix, range_end) exactly the keys starting with
// prefix, as etcd's clientv3 computes it: the last byte below 0xff is
// incremented and what follows dropped. "\0" (every key from the start key
// on) when there is no such byte, including for the empty prefix.
std::string PrefixRangeEnd(std::string_view prefix);

// Splits a byte stream of concatenated JSON objects (the gateway's streaming
// answers: one object per line, but chunks may split or join them) into
// whole objects. It checks only the brackets and strings, not the JSON.
class JsonObjectStream {
 public:
  explicit JsonObjectStream(size_t max_object_bytes = 64u << 20) : max_object_bytes_(max_object_bytes) {}
  // Appends bytes; complete top-level objects are appended to *objects.
  // False (with *error) when the bytes are not a sequence of objects or one
  // outgrows the limit; the stream is then unusable (Reset it).
  bool Feed(std::string_view bytes, std::vector<std::string>* objects, std::string* error);
  bool InsideObject() const { return depth_ > 0; }
  void Reset();

 private:
  size_t max_object_bytes_;
  std::string current_;
  int depth_ = 0;
  bool in_string_ = false, escaped_ = false;
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
  // Every key starting with prefix, sorted by key, in one answer.
  bool GetPrefix(std::string_view prefix, std::vector<EtcdKeyValue>* out, std::string* error,
                 int64_t* revision = nullptr);
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

  // The endpoint the next request goes to first (empty without endpoints).
  const std::string& current_endpoint() const;

  // POSTs a raw JSON request (body as the gateway expects it) and returns
  // the parsed answer's text. For what this class does not wrap (tests use
  // it for /v3/kv/compaction).
  bool RawCall(const std::string& path, const std::string& json_body, std::string* json_answer,
               std::string* error);

 private:
  struct Endpoint;
  struct Reply;
  // Sends to the current endpoint, then the others in order when the request
  // surely did not arrive (no connection) or may safely repeat (idempotent).
  bool Call(const std::string& path, const std::string& body, bool idempotent, Reply* reply,
            std::string* error);
  bool CallOne(Endpoint& endpoint, const std::string& path, const std::string& body, Reply* reply,
               bool* may_retry, std::string* error);

  EtcdClientOptions options_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  std::string config_error_;  // a bad endpoint: every call fails with it
  size_t current_ = 0;
};

// A watch on a key or a prefix, on its own thread, delivering events in
// revision order through a callback.
//
// Continuity: after any error or end of the stream it reconnects (backoff
// 100 ms doubling to 2 s, reset once a watch is established), trying the
// endpoints in turn, and resumes at the last delivered revision + 1, so no
// event is lost or repeated. When that revision was compacted, etcd can no
// longer replay the gap: on_resync(compact_revision) tells the owner to
// re-read the state (Get/GetPrefix), and the watch resumes at
// compact_revision, the oldest revision etcd still has. Events from there on
// are delivered even where the re-read already shows them: apply events
// idempotently, or skip those with kv.mod_revision <= the re-read's revision.
// The same happens when etcd's revision goes backwards under an established
// position (a restored backup, a wiped and recreated cluster):
// on_resync(current revision + 1), then the watch goes on from there;
// without this it would wait silently for the old revision to come round.
//
// A quiet watch whose resume revision falls behind a compaction (say the
// cluster compacts hourly and the prefix saw no event for longer) gets a
// resync on its next reconnect although nothing was missed: the re-read is
// then merely redundant. (Progress notifications would keep the revision
// fresh, but etcd before 3.4.24 may send them ahead of pending events.)
//
// Stopping: cpp-httplib 0.11 blocks in read while a quiet stream waits for an
// event. Stop() uses httplib::Client::stop(), which shuts the socket down
// and wakes that read at once, and repeats it until the thread has left (a
// stop() landing just before a request starts would otherwise be missed).
// The alternative, a short read timeout and a reconnect each time, would
// re-create the watch every few seconds on a quiet key. A long read timeout
// (idle_timeout_ms) and TCP keepalives only guard against a server that
// vanished silently; they play no part in stopping. Stop() returns within
// connect_timeout_ms plus a little (a connect in progress holds httplib's
// socket lock).
//
// Callbacks run on the watcher's thread, one at a time. They may call
// Stop() (it then returns without waiting) but must not destroy the watcher.
// An exception from a callback is logged and swallowed (the batch counts as
// delivered).
class EtcdWatcher {
 public:
  struct Options {
    EtcdClientOptions client;
    std::string key;
    bool prefix = false;
    // The first revision to deliver; 0: from now on (after the current one).
    int64_t start_revision = 0;
    // A stream silent for this long is reopened (resuming, nothing lost);
    // a backstop to TCP keepalives (dead peer noticed in about 11 s).
    int64_t idle_timeout_ms = 60000;
  };
  // revision: the mod_revision of the batch's last event (all events at or
  // below it are delivered).
  using EventsHandler = std::function<void(const std::vector<EtcdEvent>&, int64_t revision)>;
  // compact_revision: where the watch goes on (see above).
  using ResyncHandler = std::function<void(int64_t compact_revision)>;
  // Called when the watch becomes established (true) and when an attempt
  // fails while it was established or had never been (false, why); a stream
  // reopened at once without a failed attempt reports nothing.
  using StateHandler = std::function<void(bool connected, const std::string& error)>;

  struct Stats {
    uint64_t streams_opened = 0;  // watches established
    uint64_t failures = 0;        // attempts or streams that ended in an error
    uint64_t bad_responses = 0;   // unparseable or unexpected objects from the server
    uint64_t events = 0;
    uint64_t resyncs = 0;
  };

  EtcdWatcher(Options options, EventsHandler on_events, ResyncHandler on_resync = {},
              StateHandler on_state = {});
  ~EtcdWatcher();
  EtcdWatcher(const EtcdWatcher&) = delete;
  EtcdWatcher& operator=(const EtcdWatcher&) = delete;

  void Start();
  void Stop();
  // The mod_revision of the last event delivered (or, for a watch from now
  // on, the revision it started after); 0 before anything is known.
  int64_t last_revision() const { return last_revision_.load(); }
  Stats stats() const;

 private:
  // How one stream ended: Stop(), after being established, before, or
  // with etcd unable to resume where we are (compacted, or rewound).
  enum class StreamEnd { kStopped, kClosed, kFailed, kResync };
  struct StreamState;
  void Run();
  void Resync(int64_t resume_revision, const std::string& why);
  StreamEnd RunStream(const std::string& endpoint_url, int64_t* resync_revision, std::string* error);
  StreamEnd ClassifyStreamEnd(const std::string& url, const std::string& host, bool completed,
                              httplib::Error http_error, int64_t elapsed_ms, const StreamState& state,
                              int64_t* resync_revision, std::string* error);
  std::string CreateRequestBody() const;
  // The stream's bytes and objects; false aborts the stream.
  bool OnStreamBytes(std::string_view bytes, StreamState* state);
  bool HandleObject(const std::string& text, StreamState* state);
  bool HandleCanceled(const nlohmann::json& result, StreamState* state);
  bool HandleCreated(const nlohmann::json& result, StreamState* state);
  bool HandleEvents(const nlohmann::json& result, const std::string& text, StreamState* state);
  void ReportState(bool connected, const std::string& error);
  void Guarded(const char* what, const std::function<void()>& callback);
  void SleepUnlessStopped(int64_t ms);
  void SetActiveClient(std::shared_ptr<httplib::Client> client);

  Options options_;
  EventsHandler on_events_;
  ResyncHandler on_resync_;
  StateHandler on_state_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> running_{false};
  std::atomic<int64_t> last_revision_{0};
  // The watcher thread's: whether last_revision_ is where to resume (else
  // "from now on"), and whether etcd told us that revision (not the caller).
  bool position_known_ = false;
  bool position_from_etcd_ = false;
  std::optional<bool> reported_connected_;
  size_t endpoint_index_ = 0;

  std::mutex stop_mutex_;     // serializes joiners
  mutable std::mutex mutex_;  // guards active_client_ and wakes backoff sleeps
  std::condition_variable wake_;
  std::shared_ptr<httplib::Client> active_client_;

  std::atomic<uint64_t> streams_opened_{0}, failures_{0}, bad_responses_{0}, events_{0}, resyncs_{0};
};

}  // namespace chronolink
