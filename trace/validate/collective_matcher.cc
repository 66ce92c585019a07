#include "trace/validate/collective_matcher.h"

#include <algorithm>
#include <utility>

namespace chronolink::trace {
namespace {

using ParticipantId = std::pair<size_t, std::string>;  // (trace, "" or device plane)
using Stream = std::vector<const CollectiveEvent*>;    // one participant's, by start
using Streams = std::map<ParticipantId, Stream>;

bool IsPointToPoint(Dependency d) {
  return d == Dependency::kSend || d == Dependency::kRecv || d == Dependency::kPointToPoint;
}

std::string MatchKey(const CollectiveEvent& e) {
  std::string key = e.name->family;
  if (!e.group.empty()) key += " group=" + e.group;
  if (e.name->op != e.name->family) key += " op=" + e.name->op;
  key += e.on_device ? " [device]" : " [host]";
  return key;
}

class Matcher {
 public:
  explicit Matcher(MatchResult* result) : result_(*result) {}

  void MatchKeyStreams(const std::string& key, const Streams& streams) {
    const CollectiveEvent& first = *streams.begin()->second.front();
    FamilyMatchCounts& family = result_.families[first.name->family];
    if (streams.size() < 2) {
      Unmatched(family, streams, "a key seen on one participant only: nothing to compare");
      return;
    }
    Streams with_seq, without_seq;
    for (const auto& [who, stream] : streams) {
      for (const auto* e : stream) (e->seq ? with_seq : without_seq)[who].push_back(e);
    }
    if (!with_seq.empty()) MatchBySequence(key, with_seq, streams.size(), family);
    if (!without_seq.empty()) MatchByOrder(key, without_seq, streams.size(), family);
  }

 private:
  // Instance (seq, k): the k-th event carrying that seq on a participant.
  void MatchBySequence(const std::string& key, const Streams& streams, size_t participants,
                       FamilyMatchCounts& family) {
    std::map<std::pair<int64_t, int64_t>, Stream> instances;
    for (const auto& [who, stream] : streams) {
      std::map<int64_t, int64_t> seen;
      for (const auto* e : stream) instances[{*e->seq, seen[*e->seq]++}].push_back(e);
    }
    for (auto& [id, events] : instances) {
      if (events.size() == participants) {
        Emit(key, id.first, id.second, std::move(events), family);
      } else {
        family.unmatched_events += static_cast<int64_t>(events.size());
        family.notes.insert("sequence numbers seen on only some participants");
      }
    }
  }

  // Without sequence numbers the k-th matches the k-th, but only when every
  // participant saw the same number: otherwise which one is missing is a guess.
  void MatchByOrder(const std::string& key, const Streams& streams, size_t participants,
                    FamilyMatchCounts& family) {
    const auto [lo, hi] = std::minmax_element(streams.begin(), streams.end(), [](const auto& a, const auto& b) {
      return a.second.size() < b.second.size();
    });
    if (streams.size() != participants || lo->second.size() != hi->second.size()) {
      Unmatched(family, streams,
                "counts differ across participants (" + std::to_string(lo->second.size()) + ".." +
                    std::to_string(hi->second.size()) + ") and the trace gives no sequence number");
      return;
    }
    for (size_t k = 0; k < lo->second.size(); ++k) {
      Stream events;
      for (const auto& [who, stream] : streams) events.push_back(stream[k]);
      Emit(key, std::nullopt, static_cast<int64_t>(k), std::move(events), family);
    }
  }

  void Emit(const std::string& key, std::optional<int64_t> seq, int64_t ordinal, Stream events,
            FamilyMatchCounts& family) {
    MatchedInstance instance;
    instance.family = events.front()->name->family;
    instance.key = key;
    instance.seq = seq;
    instance.ordinal = ordinal;
    instance.dependency = events.front()->name->dependency;
    instance.checked = instance.dependency == Dependency::kAllRanks &&
                       std::all_of(events.begin(), events.end(),
                                   [](const CollectiveEvent* e) { return e->covers_rendezvous; });
    instance.events = std::move(events);
    ++family.matched_instances;
    if (instance.checked) {
      ++family.checked_instances;
    } else if (instance.dependency != Dependency::kAllRanks) {
      family.notes.insert("skew only: a " + std::string(DependencyName(instance.dependency)) +
                          " collective does not make every rank wait for every other");
    } else {
      family.notes.insert("skew only: on this side the span is a launch or enqueue, not the transfer");
    }
    result_.instances.push_back(std::move(instance));
  }

  void Unmatched(FamilyMatchCounts& family, const Streams& streams, std::string note) {
    for (const auto& [who, stream] : streams) family.unmatched_events += static_cast<int64_t>(stream.size());
    family.notes.insert(std::move(note));
  }

  MatchResult& result_;
};

// Point-to-point: a channel is (producer side, group, sender rank, receiver
// rank); transfers on one channel arrive in the order they were sent.
struct Channel {
  Stream sends;
  Stream recvs;
};

// Why a point-to-point half cannot be put on a channel; nullptr when it can.
const char* UnpairableBecause(const CollectiveEvent& e, const std::optional<int64_t>& self) {
  if (e.name->dependency == Dependency::kPointToPoint) return "direction not in the name";
  if (!e.peer) return "no peer rank in the trace";
  if (!self) return "the trace's own rank is unknown";
  return nullptr;
}

void MatchTransfers(const std::vector<const CollectiveEvent*>& p2p,
                    const std::vector<std::optional<int64_t>>& trace_ranks, MatchResult& result) {
  std::map<std::string, Channel> channels;
  for (const auto* e : p2p) {
    FamilyMatchCounts& family = result.families[e->name->family];
    const std::optional<int64_t> self =
        e->trace < trace_ranks.size() ? trace_ranks[e->trace] : std::optional<int64_t>();
    if (const char* why = UnpairableBecause(*e, self)) {
      ++family.unmatched_events;
      family.notes.insert(std::string("point-to-point skipped: ") + why);
      continue;
    }
    const bool send = e->name->dependency == Dependency::kSend;
    const int64_t me = self.value_or(0);
    const int64_t peer = e->peer.value_or(0);
    const int64_t src = send ? me : peer;
    const int64_t dst = send ? peer : me;
    const std::string key = std::string(e->on_device ? "[device]" : "[host]") +
                            (e->group.empty() ? "" : " group=" + e->group) + " rank " + std::to_string(src) +
                            " -> rank " + std::to_string(dst);
    (send ? channels[key].sends : channels[key].recvs).push_back(e);
  }
  for (auto& [key, channel] : channels) {
    if (channel.sends.size() != channel.recvs.size()) {
      for (const auto& stream : {channel.sends, channel.recvs}) {
        for (const auto* e : stream) {
          auto& family = result.families[e->name->family];
          ++family.unmatched_events;
          family.notes.insert("sends and receives on a channel differ in number");
        }
      }
      continue;
    }
    for (size_t k = 0; k < channel.sends.size(); ++k) {
      MatchedTransfer t;
      t.send = channel.sends[k];
      t.recv = channel.recvs[k];
      t.key = t.send->name->family + " -> " + t.recv->name->family + " " + key;
      t.ordinal = static_cast<int64_t>(k);
      t.checked = t.send->covers_rendezvous && t.recv->covers_rendezvous;
      for (const auto* e : {t.send, t.recv}) {
        auto& family = result.families[e->name->family];
        ++family.matched_instances;
        if (t.checked) {
          ++family.checked_instances;
        } else {
          family.notes.insert("not checked: on this side the span is a launch or enqueue, not the transfer");
        }
      }
      result.transfers.push_back(t);
    }
  }
}

}  // namespace

MatchResult MatchCollectives(const std::vector<CollectiveEvent>& events,
                             const std::vector<std::optional<int64_t>>& trace_ranks) {
  MatchResult result;
  std::map<std::string, Streams> by_key;
  std::vector<const CollectiveEvent*> p2p;
  for (const auto& e : events) {
    auto& family = result.families[e.name->family];
    family.dependency = e.name->dependency;
    ++family.events;
    if (IsPointToPoint(e.name->dependency)) {
      p2p.push_back(&e);
    } else {
      by_key[MatchKey(e)][{e.trace, e.participant}].push_back(&e);
    }
  }
  // Each participant's stream must be in start order whatever order the
  // caller's events came in.
  for (auto& [key, streams] : by_key) {
    for (auto& [who, stream] : streams) {
      std::stable_sort(stream.begin(), stream.end(),
                       [](const CollectiveEvent* a, const CollectiveEvent* b) { return a->start < b->start; });
    }
  }
  Matcher matcher(&result);
  for (const auto& [key, streams] : by_key) matcher.MatchKeyStreams(key, streams);
  std::stable_sort(p2p.begin(), p2p.end(),
                   [](const CollectiveEvent* a, const CollectiveEvent* b) { return a->start < b->start; });
  MatchTransfers(p2p, trace_ranks, result);
  return result;
}

}  // namespace chronolink::trace
