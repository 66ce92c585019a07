#include "agent/coord/etcd/etcd_watcher.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "agent/coord/etcd/etcd_auth.h"

namespace chronolink {

using namespace etcd_gateway;  // NOLINT: this file is the gateway's watcher
using nlohmann::json;

namespace {

constexpr int64_t kInitialBackoffMs = 100;
constexpr int64_t kMaxBackoffMs = 2000;

}  // namespace

struct EtcdWatcher::StreamState {
  explicit StreamState(size_t max_message_bytes) : splitter(max_message_bytes) {}
  JsonObjectStream splitter;
  // Events of the revision a fragment ended in, held until the rest of
  // that revision arrives (HoldLastRevision).
  std::vector<EtcdEvent> held;
  std::vector<std::string> objects;
  int http_status = 0;
  std::string error_body;  // a non-200 answer, kept for its message
  bool established = false;
  bool failed = false;  // a bad or canceling object: the stream is aborted
  bool token_refused = false;  // etcd refused the stream's token (or its role)
  int64_t resync_revision = 0;  // etcd cannot resume where we are: resync, then watch from here
  std::string error;
};

EtcdWatcher::EtcdWatcher(Options options, EventsHandler on_events, ResyncHandler on_resync, StateHandler on_state)
    : options_(std::move(options)),
      on_events_(std::move(on_events)),
      on_resync_(std::move(on_resync)),
      on_state_(std::move(on_state)) {
  if (options_.start_revision > 0) {
    last_revision_ = options_.start_revision - 1;
    position_known_ = true;
  }
}

EtcdWatcher::~EtcdWatcher() { Stop(); }

void EtcdWatcher::Start() {
  if (thread_.joinable()) return;
  stopping_ = false;
  running_ = true;
  thread_ = std::thread([this] {
    Run();
    running_ = false;
  });
}

void EtcdWatcher::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (!thread_.joinable()) return;
  if (std::this_thread::get_id() == thread_.get_id()) return;  // from a callback: the loop ends after it
  std::lock_guard<std::mutex> stopping(stop_mutex_);              // one joiner
  if (!thread_.joinable()) return;
  // Repeated: a stop() just before the thread's next request starts would
  // find nothing to interrupt.
  while (running_) {
    std::shared_ptr<httplib::ClientImpl> client;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      client = active_client_;
    }
    if (client) client->stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  thread_.join();
}

EtcdWatcher::Stats EtcdWatcher::stats() const {
  return Stats{streams_opened_.load(), failures_.load(), bad_responses_.load(), events_.load(), resyncs_.load()};
}

void EtcdWatcher::SetActiveClient(std::shared_ptr<httplib::ClientImpl> client) {
  std::lock_guard<std::mutex> lock(mutex_);
  active_client_ = std::move(client);
}

void EtcdWatcher::SleepUnlessStopped(int64_t ms) {
  std::unique_lock<std::mutex> lock(mutex_);
  wake_.wait_for(lock, std::chrono::milliseconds(ms), [this] { return stopping_.load(); });
}

void EtcdWatcher::Guarded(const char* what, const std::function<void()>& callback) {
  // An exception escaping into httplib's thread would end the process; a
  // handler's bug is logged instead, and the watch goes on.
  try {
    callback();
  } catch (const std::exception& e) {
    spdlog::error("etcd watch {}: the {} threw: {}", options_.key, what, e.what());
  } catch (...) {
    spdlog::error("etcd watch {}: the {} threw", options_.key, what);
  }
}

void EtcdWatcher::ReportState(bool connected, const std::string& error) {
  if (reported_connected_ == connected) return;  // transitions only
  reported_connected_ = connected;
  if (on_state_) Guarded("state handler", [&] { on_state_(connected, error); });
}

std::string EtcdWatcher::CreateRequestBody() const {
  json create;
  if (options_.prefix) {
    create = PrefixRequest(options_.key);
  } else {
    create = RangeRequest(options_.key);
  }
  // Resume after what was delivered; a watch from now on that never got
  // going starts from now again.
  if (position_known_) create["start_revision"] = std::to_string(last_revision_.load() + 1);
  // Answers above etcd's request limit come split: each message stays under
  // max_answer_bytes where one that was not split could be any size (a
  // watch catching up gets up to 1000 revisions in one).
  create["fragment"] = true;
  return json{{"create_request", create}}.dump();
}

void EtcdWatcher::Run() {
  int64_t backoff_ms = kInitialBackoffMs;
  while (!stopping_) {
    std::string url, error;
    int64_t resync_revision = 0;
    StreamEnd end = StreamEnd::kFailed;
    if (const std::string config_error = CheckEtcdEndpoints(options_.client); !config_error.empty()) {
      error = config_error;
    } else {
      url = options_.client.endpoints[endpoint_index_ % options_.client.endpoints.size()];
      end = RunStream(url, &resync_revision, &error);
    }
    if (end == StreamEnd::kStopped || stopping_) break;
    if (end == StreamEnd::kResync) {
      Resync(resync_revision, error);
      backoff_ms = kInitialBackoffMs;
      continue;  // not an error: reopen at once
    }
    if (end == StreamEnd::kClosed) {
      // It was established: a fresh backoff, same endpoint first.
      spdlog::debug("etcd watch {}: stream ended ({}); reopening", options_.key, error);
      backoff_ms = kInitialBackoffMs;
    } else {
      ++failures_;
      spdlog::debug("etcd watch {}: {}", options_.key, error);
      ReportState(false, error);
      ++endpoint_index_;  // the next attempt tries the next endpoint
    }
    SleepUnlessStopped(backoff_ms);
    if (end == StreamEnd::kFailed) backoff_ms = std::min(backoff_ms * 2, kMaxBackoffMs);
  }
}

void EtcdWatcher::Resync(int64_t resume_revision, const std::string& why) {
  ++resyncs_;
  // Events before resume_revision cannot be replayed: the owner re-reads,
  // and the watch goes on from there.
  last_revision_ = resume_revision - 1;
  position_known_ = true;
  spdlog::info("etcd watch {}: {}; resyncing, then watching from revision {}", options_.key, why,
               resume_revision);
  if (on_resync_) {
    Guarded("resync handler", [&] { on_resync_(resume_revision); });
  } else {
    spdlog::warn("etcd watch {}: events before revision {} may be lost (no resync handler)", options_.key,
                 resume_revision);
  }
}

bool EtcdWatcher::TokenForStream(std::string* token, bool* fresh, std::string* error) {
  EtcdAuth* auth = options_.client.auth.get();
  *fresh = false;
  token->clear();
  if (auth == nullptr) return true;
  if (!auth->token()) {
    if (!auth_client_) auth_client_ = std::make_unique<EtcdClient>(options_.client);
    if (!auth_client_->Authenticate(error)) return false;
    *fresh = true;
  }
  *token = auth->token().value_or("");
  return true;
}

EtcdWatcher::StreamEnd EtcdWatcher::RunStream(const std::string& url, int64_t* resync_revision,
                                              std::string* error) {
  std::string host;
  int port = 0;
  bool https = false;
  if (!ParseEtcdEndpoint(url, &host, &port, error, &https)) {
    *error = "etcd endpoint \"" + url + "\": " + *error;
    return StreamEnd::kFailed;
  }
  std::string token;
  bool fresh_token = false;
  if (!TokenForStream(&token, &fresh_token, error)) return StreamEnd::kFailed;
  std::shared_ptr<httplib::ClientImpl> client = MakeHttpClient(host, port, https, options_.client);
  SetTimeouts(client.get(), options_.client.connect_timeout_ms, options_.idle_timeout_ms,
              options_.client.request_timeout_ms);
  client->set_socket_options(EnableKeepalive);
  SetActiveClient(client);
  if (stopping_) {
    SetActiveClient(nullptr);
    return StreamEnd::kStopped;
  }

  StreamState state(options_.client.max_answer_bytes);
  httplib::Request request;
  request.method = "POST";
  request.path = "/v3/watch";
  request.headers = {{"Content-Type", "application/json"}};
  if (!token.empty()) request.headers.emplace("Authorization", token);
  request.body = CreateRequestBody();
  request.response_handler = [&](const httplib::Response& response) {
    state.http_status = response.status;
    return true;
  };
  request.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    return OnStreamBytes(std::string_view(data, size), &state);
  };
  httplib::Response response;
  httplib::Error http_error = httplib::Error::Success;
  const Clock::time_point start = Clock::now();
  const bool completed = client->send(request, response, http_error);
  SetActiveClient(nullptr);
  const StreamEnd end =
      ClassifyStreamEnd(url, host, completed, http_error, ElapsedMs(start), state, client.get(), resync_revision, error);
  if (state.token_refused && options_.client.auth) {
    if (fresh_token) {
      *error += " (with a token just issued: does the user's role grant read on this key?)";
    } else {
      options_.client.auth->Invalidate(token);  // expired or unknown: the next attempt gets a new one
      *error += " (authenticating again)";
    }
  }
  return end;
}

bool EtcdWatcher::OnStreamBytes(std::string_view bytes, StreamState* state) {
  if (stopping_) return false;
  if (state->http_status != 200 && state->http_status != 0) {
    constexpr size_t kMaxErrorBody = 4096;  // enough for etcd's error object
    state->error_body.append(bytes.substr(0, kMaxErrorBody - std::min(kMaxErrorBody, state->error_body.size())));
    return true;
  }
  state->objects.clear();
  if (!state->splitter.Feed(bytes, &state->objects, &state->error)) {
    ++bad_responses_;
    state->failed = true;
    state->error = "bad watch stream: " + state->error;
    return false;
  }
  for (const std::string& object : state->objects) {
    if (!HandleObject(object, state)) {
      state->failed = true;
      return false;
    }
    if (stopping_) return false;  // a callback stopped us
  }
  return true;
}

EtcdWatcher::StreamEnd EtcdWatcher::ClassifyStreamEnd(const std::string& url, const std::string& host,
                                                      bool completed, httplib::Error http_error,
                                                      int64_t elapsed_ms, StreamState& state,
                                                      const httplib::ClientImpl* client,
                                                      int64_t* resync_revision, std::string* error) {
  const std::string where = "etcd " + url + ": ";
  if (stopping_) return StreamEnd::kStopped;
  if (state.resync_revision > 0) {
    *resync_revision = state.resync_revision;
    *error = state.error;
    return StreamEnd::kResync;
  }
  if (state.failed) {
    *error = where + state.error;
    return StreamEnd::kFailed;
  }
  if (state.http_status != 0 && state.http_status != 200) {
    int grpc_code = 0;
    json body;
    std::string ignored;
    if (!ParseJsonAnswer(state.error_body, &body, &ignored)) body = json();
    const std::string message = GatewayErrorMessage(body, &grpc_code);
    if (IsStaleTokenMessage(message)) state.token_refused = true;
    *error = where + "watch: HTTP " + std::to_string(state.http_status) + ": " +
             (message.empty() ? Excerpt(state.error_body) : message);
    return StreamEnd::kFailed;
  }
  if (!state.established) {
    if (completed) {
      *error = where + "watch stream ended before etcd created the watch";
    } else {
      EtcdClientOptions timing = options_.client;
      timing.request_timeout_ms = options_.idle_timeout_ms;
      *error = where + "watch: " + DescribeTransportError(http_error, host, elapsed_ms, timing, client);
    }
    return StreamEnd::kFailed;
  }
  *error = completed ? "etcd closed the stream" : "stream broke (" + httplib::to_string(http_error) + ")";
  return StreamEnd::kClosed;
}

bool EtcdWatcher::HandleObject(const std::string& text, StreamState* state) {
  json object;
  std::string parse_error;
  if (!ParseJsonAnswer(text, &object, &parse_error)) {
    ++bad_responses_;
    state->error = "bad watch response: " + parse_error;
    spdlog::warn("etcd watch {}: {}", options_.key, state->error);
    return false;
  }
  const json* result = object.is_object() ? ObjectField(object, "result") : nullptr;
  if (result == nullptr) {
    int grpc_code = 0;
    const std::string message = object.is_object() ? GatewayErrorMessage(object, &grpc_code) : "";
    if (message.empty()) {
      ++bad_responses_;
      state->error = "unexpected watch response: " + Excerpt(text);
      spdlog::warn("etcd watch {}: {}", options_.key, state->error);
    } else {
      state->error = "watch: " + message;
      state->token_refused = IsStaleTokenMessage(message);
    }
    return false;
  }
  if (BoolField(*result, "canceled")) return HandleCanceled(*result, state);
  if (BoolField(*result, "created")) return HandleCreated(*result, state);
  return HandleEvents(*result, text, state);
}

bool EtcdWatcher::HandleCanceled(const json& result, StreamState* state) {
  int64_t compact_revision = 0;
  if (Int64Field(result, "compact_revision", &compact_revision) && compact_revision > 0) {
    state->resync_revision = compact_revision;
    state->error = "revisions before " + std::to_string(compact_revision) + " were compacted";
    return false;  // the stream stays open otherwise: close it and resync
  }
  auto reason = result.find("cancel_reason");
  state->error = "etcd canceled the watch";
  if (reason != result.end() && reason->is_string()) {
    const std::string text = Excerpt(reason->get_ref<const std::string&>());
    state->error += ": " + text;
    // How etcd 3.4 answers a watch whose token is unknown or expired.
    state->token_refused = text.find("permission denied") != std::string::npos || IsStaleTokenMessage(text);
  }
  return false;
}

bool EtcdWatcher::HandleCreated(const json& result, StreamState* state) {
  int64_t revision = 0;
  if (!HeaderRevision(result, &revision)) {
    ++bad_responses_;
    state->error = "bad header in the watch's created response";
    return false;
  }
  if (!position_known_ && revision > 0) {
    // A watch from now on starts after the revision it was created at: that
    // is where a reconnect must resume.
    last_revision_ = revision;
    position_known_ = true;
  } else if (position_from_etcd_ && revision > 0 && revision < last_revision_.load()) {
    // etcd's history went backwards (a restored backup, a wiped cluster):
    // waiting for our resume revision would skip every event up to it.
    state->resync_revision = revision + 1;
    state->error = "etcd's revision went back from " + std::to_string(last_revision_.load()) + " to " +
                   std::to_string(revision);
    return false;
  }
  position_from_etcd_ = position_known_;
  state->established = true;
  ++streams_opened_;
  ReportState(true, "");
  return true;
}

bool EtcdWatcher::HandleEvents(const json& result, const std::string& text, StreamState* state) {
  const json* items = nullptr;
  if (!ArrayField(result, "events", &items)) {
    ++bad_responses_;
    state->error = "bad events in watch response: " + Excerpt(text);
    return false;
  }
  std::vector<EtcdEvent> events = std::move(state->held);
  state->held.clear();
  events.reserve(events.size() + items->size());
  const int64_t delivered = last_revision_.load();
  for (const json& item : *items) {
    EtcdEvent event;
    if (!ParseEvent(item, &event)) {
      ++bad_responses_;
      state->error = "bad event in watch response: " + Excerpt(text);
      return false;
    }
    // Guards "never repeated" should a server replay what we have.
    if (event.kv.mod_revision > delivered) events.push_back(std::move(event));
  }
  if (BoolField(result, "fragment") && !HoldLastRevision(&events, state)) return false;
  if (events.empty()) return true;  // e.g. a progress notification
  const int64_t revision = events.back().kv.mod_revision;
  last_revision_ = revision;
  position_known_ = position_from_etcd_ = true;
  events_ += events.size();
  if (on_events_) Guarded("events handler", [&] { on_events_(events, revision); });
  return true;
}

bool EtcdWatcher::HoldLastRevision(std::vector<EtcdEvent>* events, StreamState* state) {
  // etcd may split an answer between two events of one revision. A reconnect
  // resumes after last_revision_, so delivering part of a revision would
  // lose the rest: its events wait for the next message of the stream (and
  // come again from etcd should the stream break first).
  if (events->empty()) return true;
  const int64_t last = events->back().kv.mod_revision;
  auto first_of_last = std::find_if(events->begin(), events->end(),
                                    [&](const EtcdEvent& e) { return e.kv.mod_revision == last; });
  state->held.assign(std::make_move_iterator(first_of_last), std::make_move_iterator(events->end()));
  events->erase(first_of_last, events->end());
  size_t held_bytes = 0;
  for (const EtcdEvent& e : state->held) held_bytes += e.kv.key.size() + e.kv.value.size();
  // One revision is one request to etcd, under its request limit: a larger
  // one is a server that never ends its "fragments".
  if (held_bytes <= options_.client.max_answer_bytes) return true;
  ++bad_responses_;
  state->error = "watch fragments of revision " + std::to_string(last) + " exceed " +
                 std::to_string(options_.client.max_answer_bytes) + " bytes";
  return false;
}

}  // namespace chronolink
