// A watch on etcd 3.4 through the v3 JSON gateway (etcd_gateway.h): one
// long POST per stream, reopened and resumed without loss.
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

#include "agent/coord/etcd/etcd_client.h"
#include "agent/coord/etcd/etcd_gateway.h"

namespace chronolink {

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
// event. Stop() uses httplib::ClientImpl::stop(), which shuts the socket down
// and wakes that read at once, and repeats it until the thread has left (a
// stop() landing just before a request starts would otherwise be missed).
// The alternative, a short read timeout and a reconnect each time, would
// re-create the watch every few seconds on a quiet key. A long read timeout
// (idle_timeout_ms) and TCP keepalives only guard against a server that
// vanished silently; they play no part in stopping. Stop() returns within
// connect_timeout_ms plus a little (a connect in progress holds httplib's
// socket lock).
//
// Auth (options.client.auth): each stream carries the shared token, got
// first where none is held. etcd cancels a watch whose token it no longer
// knows with "permission denied": the token is then dropped and the next
// attempt authenticates again, unless the token was fresh, in which case
// the role really lacks the permission and the error says so.
//
// Bounds: a message of the stream larger than client.max_answer_bytes, or
// nested deeper than kMaxJsonDepth, is refused (counted in bad_responses,
// the stream reopened); etcd is asked to split larger answers ("fragment"),
// and a revision split across messages is delivered whole, once its last
// event has arrived.
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
                              httplib::Error http_error, int64_t elapsed_ms, StreamState& state,
                              const httplib::ClientImpl* client, int64_t* resync_revision, std::string* error);
  // With auth: the token for the next stream (authenticating when none is
  // held); *fresh: it was issued just now.
  bool TokenForStream(std::string* token, bool* fresh, std::string* error);
  std::string CreateRequestBody() const;
  // The stream's bytes and objects; false aborts the stream.
  bool OnStreamBytes(std::string_view bytes, StreamState* state);
  bool HandleObject(const std::string& text, StreamState* state);
  bool HandleCanceled(const nlohmann::json& result, StreamState* state);
  bool HandleCreated(const nlohmann::json& result, StreamState* state);
  bool HandleEvents(const nlohmann::json& result, const std::string& text, StreamState* state);
  bool HoldLastRevision(std::vector<EtcdEvent>* events, StreamState* state);
  void ReportState(bool connected, const std::string& error);
  void Guarded(const char* what, const std::function<void()>& callback);
  void SleepUnlessStopped(int64_t ms);
  void SetActiveClient(std::shared_ptr<httplib::ClientImpl> client);

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
  std::shared_ptr<httplib::ClientImpl> active_client_;
  std::unique_ptr<EtcdClient> auth_client_;  // the watcher thread's: authenticates

  std::atomic<uint64_t> streams_opened_{0}, failures_{0}, bad_responses_{0}, events_{0}, resyncs_{0};
};

}  // namespace chronolink
