#include "agent/coord/leader_exchange.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <unordered_map>

#include "clock/clock_reader.h"

namespace chronolink {

namespace {

constexpr size_t kBatch = 256;  // summaries per channel message (~60 kB)
constexpr int64_t kRefusalLogEveryNs = 60'000'000'000;  // one report a minute: a peer may send many
constexpr char kWrongWriter[] = "wrong_writer";          // as the etcd codec names its refusals

int64_t MonotonicNs() { return ReadClockNs(CLOCK_MONOTONIC); }

}  // namespace

OffsetsSnapshot HeaderOf(const OffsetsSnapshot& s) {
  OffsetsSnapshot header;  // field by field: not a copy of every node's row
  header.leader = s.leader;
  header.sequence = s.sequence;
  header.reference_instant_ns = s.reference_instant_ns;
  header.reference_node = s.reference_node;
  header.recomputed = s.recomputed;
  return header;
}

OffsetsSnapshot OwnPartOf(const OffsetsSnapshot& s, uint32_t node) {
  OffsetsSnapshot part = HeaderOf(s);
  if (const NodeSolution* mine = s.Find(node)) part.nodes.push_back(*mine);
  return part;
}

std::map<std::string, uint64_t> ChannelCounters(const ChannelStats& c) {
  return {{"connects", c.connects},
          {"connect_failures", c.connect_failures},
          {"accepts", c.accepts},
          {"handshakes_ok", c.handshakes_ok},
          {"handshakes_failed", c.handshakes_failed},
          {"handshake_timeouts", c.handshake_timeouts},
          {"handshakes_shed", c.handshakes_shed},
          {"accepts_deferred", c.accepts_deferred},
          {"hellos_refused", c.refused},
          {"auth_failures", c.auth_failures},
          {"frame_errors", c.frame_errors},
          {"idle_timeouts", c.idle_timeouts},
          {"disconnects", c.disconnects},
          {"send_queue_full", c.send_queue_full},
          {"bytes_sent", c.bytes_sent},
          {"bytes_received", c.bytes_received}};
}

LeaderExchange::LeaderExchange(uint32_t self, int64_t retention_ns, std::string log_name, int64_t resend_ns)
    : self_(self), log_name_(std::move(log_name)), resend_ns_(resend_ns), outbox_(retention_ns) {}

void LeaderExchange::SetLeader(std::optional<uint32_t> leader, int64_t term) {
  std::lock_guard<std::mutex> lock(mutex_);
  leader_ = leader;
  term_ = term;
}

std::optional<uint32_t> LeaderExchange::leader() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return leader_;
}

void LeaderExchange::PublishWindows(std::span<const WindowSummary> windows) {
  std::lock_guard<std::mutex> lock(mutex_);
  incoming_.insert(incoming_.end(), windows.begin(), windows.end());
}

std::vector<WindowSummary> LeaderExchange::TakeInbox() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<WindowSummary> out;
  out.swap(inbox_);
  return out;
}

bool LeaderExchange::Supersedes(const OffsetsSnapshot& candidate, int64_t term) const {
  // A new term replaces what an old leader said; within a term a newer
  // instant does, or a later solve of the same instant.
  if (!latest_ || term != latest_term_) return true;
  if (candidate.reference_instant_ns != latest_->reference_instant_ns) {
    return candidate.reference_instant_ns > latest_->reference_instant_ns;
  }
  return candidate.sequence > latest_->sequence;
}

void LeaderExchange::Take(OffsetsSnapshot s, int64_t term) {
  latest_ = std::move(s);
  latest_term_ = term;
  ++latest_version_;
}

void LeaderExchange::PublishOffsets(const OffsetsSnapshot& snapshot) {
  std::lock_guard<std::mutex> lock(mutex_);
  // A re-solve of an older instant: offsets.jsonl has it.
  if (!Supersedes(snapshot, term_)) return;
  Take(snapshot, term_);
  to_send_.push_back(snapshot);
}

std::optional<OffsetsSnapshot> LeaderExchange::Latest(uint64_t* version) const {
  std::lock_guard<std::mutex> lock(mutex_);
  *version = latest_version_;
  return latest_;
}

uint64_t LeaderExchange::LatestVersion() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return latest_version_;
}

bool LeaderExchange::Flush(SecureChannelHub& hub, int64_t now_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  outbox_.Add(incoming_, now_ns);
  incoming_.clear();
  outbox_.Expire(now_ns);
  // Offsets first: they are small, and late ones are worth less.
  for (const OffsetsSnapshot& s : to_send_) {
    // Each peer's row by id, once: a scan per peer is n² at 10 000 nodes.
    std::unordered_map<uint32_t, const NodeSolution*> rows;
    for (const NodeSolution& n : s.nodes) rows.emplace(n.node, &n);
    OffsetsSnapshot part = HeaderOf(s);
    for (uint32_t peer : hub.UpPeers()) {
      part.nodes.clear();
      if (const auto it = rows.find(peer); it != rows.end()) part.nodes.push_back(*it->second);
      // A full queue drops this instant for that node: the next one follows
      // within a window, and a node whose link comes back gets the latest.
      hub.Send(peer, kOffsetsMessage, EncodeOffsetsSnapshot(part));
    }
  }
  to_send_.clear();
  const bool peers_sent = FlushPeers(hub);
  if (!leader_) return peers_sent && outbox_.pending() == 0;
  // A new leader -- another node, or this one -- has not seen what went to
  // the old one, and a leader whose link comes back may have restarted:
  // everything held goes to it again (the leader drops duplicates).
  const bool remote = *leader_ != self_;
  const bool up = remote && hub.IsUp(*leader_);
  if (leader_ != sent_to_ || (remote && up && !sent_to_link_up_)) {
    if (resend_ns_ > 0) {
      outbox_.Rewind(now_ns - resend_ns_);
    } else {
      outbox_.Rewind();
    }
  }
  sent_to_ = leader_;
  sent_to_link_up_ = up;
  if (!remote) {
    const std::vector<WindowSummary> mine = outbox_.Pending(outbox_.pending());
    inbox_.insert(inbox_.end(), mine.begin(), mine.end());
    outbox_.MarkDelivered(mine.size());
    return true;
  }
  if (!up) return outbox_.pending() == 0;
  for (;;) {
    const std::vector<WindowSummary> batch = outbox_.Pending(kBatch);
    if (batch.empty()) return true;
    if (!hub.Send(*leader_, kWindowBatchMessage, EncodeWindowBatch(batch))) return false;  // queue full
    outbox_.MarkDelivered(batch.size());
  }
}

void LeaderExchange::PublishPeers(std::unordered_map<uint32_t, std::vector<Member>> by_node) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [node, peers] : by_node) {
    const auto it = peer_lists_.find(node);
    if (it == peer_lists_.end() || it->second != peers) peers_due_.insert(node);
  }
  // A node that left needs no list; one that comes back is sent its new one.
  std::erase_if(peers_due_, [&](uint32_t node) { return by_node.count(node) == 0; });
  peer_lists_ = std::move(by_node);
}

std::optional<PeerList> LeaderExchange::Peers(uint64_t* version) const {
  std::lock_guard<std::mutex> lock(mutex_);
  *version = peers_version_;
  return peers_;
}

void LeaderExchange::SetOwnPeers(PeerList list) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (peers_ == list) return;
  peers_ = std::move(list);
  ++peers_version_;
}

bool LeaderExchange::SendPeers(SecureChannelHub& hub, uint32_t peer) {
  const auto it = peer_lists_.find(peer);
  if (it == peer_lists_.end()) return true;
  return hub.Send(peer, kPeersMessage, EncodePeerList(PeerList{self_, it->second}));
}

bool LeaderExchange::FlushPeers(SecureChannelHub& hub) {
  if (peers_due_.empty() || leader_ != self_) return true;
  bool all = true;
  for (auto it = peers_due_.begin(); it != peers_due_.end();) {
    // A node whose link is down is sent its list when the link comes up.
    if (hub.IsUp(*it) && !SendPeers(hub, *it)) {
      all = false;  // its queue is full: again at the next flush
      ++it;
      continue;
    }
    it = peers_due_.erase(it);
  }
  return all;
}

void LeaderExchange::TakePeers(uint32_t peer, std::string_view payload) {
  PeerList list;
  std::string error;
  const bool ok = DecodePeerList(payload, &list, &error);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!ok || std::any_of(list.peers.begin(), list.peers.end(), [&](const Member& m) { return m.id == self_; })) {
    ++errors_;
    spdlog::warn("{}: bad peer list from node {}: {}", log_name_, peer, ok ? "it names this node" : error);
    return;
  }
  if (leader_ != peer || list.leader != peer) return;  // not (or no longer) our leader
  ++peers_received_;
  if (peers_ == list) return;
  peers_ = std::move(list);
  ++peers_version_;
}

void LeaderExchange::SendOwnPart(SecureChannelHub& hub, uint32_t peer, const OffsetsSnapshot& s) {
  hub.Send(peer, kOffsetsMessage, EncodeOffsetsSnapshot(OwnPartOf(s, peer)));
}

void LeaderExchange::OnLinkUp(SecureChannelHub& hub, uint32_t peer) {
  std::lock_guard<std::mutex> lock(mutex_);
  // A node that (re)connects to us as its leader has missed what we sent.
  if (leader_ != self_) return;
  if (peer_lists_.count(peer) != 0 && SendPeers(hub, peer)) peers_due_.erase(peer);
  if (latest_ && latest_->leader == self_) SendOwnPart(hub, peer, *latest_);
}

bool LeaderExchange::OnMessage(uint32_t peer, uint16_t type, std::string_view payload) {
  std::string error;
  if (type == kWindowsMessage || type == kWindowBatchMessage) {
    std::vector<WindowSummary> batch;
    const bool ok = type == kWindowBatchMessage ? DecodeWindowBatch(payload, &batch, &error)
                                                : DecodeWindowSummaries(payload, &batch, &error);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!ok) {
      ++errors_;
      spdlog::warn("{}: bad window batch from node {}: {}", log_name_, peer, error);
      return true;
    }
    KeepOwnSummaries(peer, &batch);
    inbox_.insert(inbox_.end(), std::make_move_iterator(batch.begin()), std::make_move_iterator(batch.end()));
    return true;
  }
  if (type == kOffsetsMessage) {
    OffsetsSnapshot s;
    const bool ok = DecodeOffsetsSnapshot(payload, &s, &error);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!ok) {
      ++errors_;
      spdlog::warn("{}: bad offsets from node {}: {}", log_name_, peer, error);
      return true;
    }
    if (leader_ != peer || s.leader != peer) return true;  // not (or no longer) our leader
    ++offsets_received_;
    if (Supersedes(s, term_)) Take(std::move(s), term_);
    return true;
  }
  if (type == kPeersMessage) {
    TakePeers(peer, payload);
    return true;
  }
  return false;
}

void LeaderExchange::KeepOwnSummaries(uint32_t peer, std::vector<WindowSummary>* batch) {
  // The handshake proves that the peer holds the cluster key and binds the
  // id it claims (docs/coordination-channel.md, Trust); a summary is a
  // prober's own estimate, so the peer may send only those it probed. One
  // key holder then cannot put words in another node's mouth, nor answer a
  // window for a node that is down.
  const auto foreign = std::stable_partition(batch->begin(), batch->end(),
                                             [&](const WindowSummary& w) { return w.estimate.node == peer; });
  const size_t refused = static_cast<size_t>(batch->end() - foreign);
  if (refused == 0) return;
  const uint32_t named = foreign->estimate.node;
  batch->erase(foreign, batch->end());
  refused_ += refused;
  const int64_t now = MonotonicNs();
  if (last_refusal_log_ns_ != 0 && now - last_refusal_log_ns_ < kRefusalLogEveryNs) {
    unlogged_refusals_ += refused;
    return;
  }
  spdlog::warn("{}: refused {} window summaries from node {} that name another prober (node {}){}", log_name_,
               refused, peer, named,
               unlogged_refusals_ == 0 ? std::string()
                                       : "; " + std::to_string(unlogged_refusals_) +
                                             " more refused since the last report");
  last_refusal_log_ns_ = now;
  unlogged_refusals_ = 0;
}

void LeaderExchange::FillStatus(CoordinatorStatus* s) const {
  std::lock_guard<std::mutex> lock(mutex_);
  s->windows_published = outbox_.published() + incoming_.size();
  s->windows_delivered = outbox_.delivered();
  s->windows_pending = outbox_.pending() + incoming_.size();
  s->windows_dropped = outbox_.dropped();
  s->offsets_received = offsets_received_;
  s->peers_received = peers_received_;
  s->errors += errors_;
  s->refused += refused_;
  if (refused_ != 0) s->refused_by_reason[kWrongWriter] += refused_;
}

}  // namespace chronolink
