#include "agent/probe/tap_stamp_book.h"

#include <sodium.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace chronolink {

static_assert(std::tuple_size_v<TapStampBook::HashKey> == crypto_shorthash_KEYBYTES);

namespace {

TapStampBook::HashKey RandomHashKey() {
  if (sodium_init() < 0) std::abort();  // no usable randomness source
  TapStampBook::HashKey key;
  randombytes_buf(key.data(), key.size());
  return key;
}

void PutLe(uint8_t* p, uint64_t v, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

}  // namespace

TapStampBook::TapStampBook(Limits limits) : TapStampBook(limits, RandomHashKey()) {}

TapStampBook::TapStampBook(Limits limits, const HashKey& hash_key)
    : limits_(limits), entries_(0, IdHash{hash_key}) {
  // Room for every entry the bounds allow (plus the one inserted before a
  // trim) at a load of at most 1: the table never rehashes, and the bucket
  // bound's odds (kMaxBucket) hold.
  entries_.max_load_factor(1.0f);
  entries_.reserve(limits_.held + limits_.remembered + 1);
}

size_t TapStampBook::IdHash::operator()(const Id& id) const {
  // Every field, little-endian at fixed offsets (no struct padding).
  const PacketKey& k = id.first;
  uint8_t in[1 + 4 + 4 + 8 + 8 + 1 + kProbeMacSize];
  in[0] = static_cast<uint8_t>(k.type);
  PutLe(in + 1, k.sender, 4);
  PutLe(in + 5, k.receiver, 4);
  PutLe(in + 9, k.sender_epoch, 8);
  PutLe(in + 17, k.seq, 8);
  in[25] = k.index;
  std::memcpy(in + 26, id.second.data(), kProbeMacSize);
  uint8_t out[crypto_shorthash_BYTES];
  crypto_shorthash(out, in, sizeof(in), key.data());
  uint64_t h = 0;
  std::memcpy(&h, out, sizeof(h));
  return static_cast<size_t>(h);
}

size_t TapStampBook::longest_bucket() const {
  size_t longest = 0;
  for (size_t b = 0; b < entries_.bucket_count(); ++b) longest = std::max(longest, entries_.bucket_size(b));
  return longest;
}

TapStampBook::Entries::iterator TapStampBook::Insert(const Id& id, Pool pool, bool* inserted) {
  auto [it, is_new] = entries_.try_emplace(id);
  if (inserted != nullptr) *inserted = is_new;
  if (!is_new) return it;
  if (entries_.bucket_size(entries_.bucket(id)) > kMaxBucket) {
    entries_.erase(it);
    ++bucket_full_;
    return entries_.end();
  }
  std::list<Id>& list = ListOf(pool);
  it->second.pool = pool;
  it->second.pos = list.insert(list.end(), id);
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
  if (it == entries_.end()) return;  // its send records will be counted as not sent
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
  bool inserted = false;
  auto it = Insert(id, Pool::kHeld, &inserted);
  if (it == entries_.end()) return Verdict::kBucketFull;
  if (inserted) it->second.held_since_ns = t.stamp.ns;
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
  if (it == entries_.end()) return out;  // held nothing (it would be in the bucket); not remembered
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
