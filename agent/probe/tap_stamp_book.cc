#include "agent/probe/tap_stamp_book.h"

namespace chronolink {

TapStampBook::Entries::iterator TapStampBook::Insert(const Id& id, Pool pool) {
  auto [it, inserted] = entries_.try_emplace(id);
  if (inserted) {
    std::list<Id>& list = ListOf(pool);
    it->second.pool = pool;
    it->second.pos = list.insert(list.end(), id);
  }
  return it;
}

void TapStampBook::MoveTo(Entries::iterator it, Pool pool) {
  Entry& e = it->second;
  if (e.pool == pool) return;
  std::list<Id>& to = ListOf(pool);
  to.splice(to.end(), ListOf(e.pool), e.pos);
  e.pool = pool;
}

void TapStampBook::Erase(Entries::iterator it) {
  ListOf(it->second.pool).erase(it->second.pos);
  entries_.erase(it);
}

void TapStampBook::Trim() {
  while (held_.size() > limits_.held) {
    auto it = entries_.find(held_.front());
    unverified_dropped_ += it->second.n_seen + it->second.repeats;
    Erase(it);
  }
  // Forgetting an old packet is safe: a late copy of it then finds nothing
  // to spoil, and its datagram (if any) meets the protocol's own checks.
  while (remembered_.size() > limits_.remembered) Erase(entries_.find(remembered_.front()));
}

bool TapStampBook::AddSeen(Entry& e, const TapStamp& t, bool* no_room) {
  *no_room = false;
  for (uint8_t i = 0; i < e.n_seen; ++i) {
    if (e.seen[i].hook == t.hook && e.seen[i].ifindex == t.ifindex) return false;
  }
  if (e.n_seen == kMaxSeen) {
    *no_room = true;
    return true;
  }
  e.seen[e.n_seen++] = Seen{t.hook, t.ifindex, t.stamp};
  return true;
}

void TapStampBook::ExpectSent(const PacketKey& key, const PacketMac& mac) {
  auto it = Insert(Id{key, mac}, Pool::kRemembered);
  MoveTo(it, Pool::kRemembered);
  it->second.sent = true;
  Trim();
}

TapStampBook::Verdict TapStampBook::OnRecord(const TapStamp& t) {
  const Id id{t.key, t.mac};
  if (TapHookTransmits(t.hook)) {
    auto it = entries_.find(id);
    if (it == entries_.end() || !it->second.sent) return Verdict::kNotSent;
    Entry& e = it->second;
    bool no_room = false;
    if (!AddSeen(e, t, &no_room)) {
      e.duplicate = true;
      return Verdict::kDuplicateAfterRead;  // the first one is in use already
    }
    return no_room ? Verdict::kNoRoom : Verdict::kUse;
  }
  auto it = entries_.find(id);
  if (it == entries_.end()) {
    it = Insert(id, Pool::kHeld);
    it->second.held_since_ns = t.stamp.ns;
  }
  Entry& e = it->second;
  bool no_room = false;
  if (!AddSeen(e, t, &no_room)) {
    e.duplicate = true;
    if (e.read) return Verdict::kDuplicateAfterRead;
    ++e.repeats;
    return Verdict::kDuplicate;
  }
  Trim();
  if (no_room) return Verdict::kNoRoom;
  return e.read ? Verdict::kLate : Verdict::kHeld;
}

TapStampBook::Received TapStampBook::OnAuthenticDatagram(const PacketKey& key,
                                                         const PacketMac& mac) {
  Received out;
  auto it = Insert(Id{key, mac}, Pool::kRemembered);
  Entry& e = it->second;
  out.duplicate = e.duplicate;
  if (!e.read) {
    e.read = true;
    out.duplicate_records = e.repeats;
    if (!e.duplicate) {
      for (uint8_t i = 0; i < e.n_seen; ++i) out.stamps.push_back(e.seen[i].stamp);
    }
    MoveTo(it, Pool::kRemembered);
  }
  Trim();
  return out;
}

void TapStampBook::Expire(int64_t now_ns) {
  while (!held_.empty()) {
    auto it = entries_.find(held_.front());
    if (now_ns - it->second.held_since_ns <= limits_.held_ttl_ns) break;
    unverified_dropped_ += it->second.n_seen + it->second.repeats;
    Erase(it);
  }
}

}  // namespace chronolink
