// Binds the eBPF tap's stamps to authentic probe packets. A record names a
// packet by its header (public, predictable) and its MAC (unpredictable
// without the cluster key); the book keeps records by both, so a datagram
// that copies a real header with any other MAC never lends its stamps to
// the real packet. Send-hook records (tc egress, net_dev_start_xmit) count
// only for packets this node sent with exactly that key and MAC;
// receive-hook records (XDP, tc ingress) are held until a datagram with
// that key and MAC has passed the MAC check. A packet recorded twice at one
// hook on one device (a copy, or a replay) is marked duplicate: none of its
// stamps can be told from the copy's, so the caller spoils what it measured
// (docs/bpf-tap.md "Binding stamps to authentic packets").
//
// Memory is bounded: held receive records expire after a time-to-live or
// when too many wait (forgeries never find their datagram), and the
// packets remembered for duplicate detection are the most recent ones.
// Work is bounded too: records are filed before any MAC is checked, so
// their ids are the sender's choice; the table hashes them with SipHash
// under a secret drawn per book, and refuses a new id whose bucket is full
// (issue 29: a flood of ids colliding under an unkeyed hash cost 15x).
// Single-threaded: the agent loop owns it, through the probe engine.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <list>
#include <unordered_map>
#include <utility>
#include <vector>

#include "agent/capture/packet_key.h"

namespace chronolink {

class TapStampBook {
 public:
  struct Limits {
    size_t held = 4096;          // receive records waiting for their datagram
    size_t remembered = 8192;    // packets sent or received, for duplicates and late records
    int64_t held_ttl_ns = 250'000'000;  // a datagram comes within ms of its records
  };

  enum class Verdict : uint8_t {
    kUse,                // send hook: the first record of this packet of ours here: a send stamp
    kHeld,               // receive hook: waits for its datagram
    kLate,               // receive hook: its datagram was read already; not used
    kDuplicate,          // seen before at this hook and device; its datagram not read yet
                         // (counted when it is: a forgery copied twice is no authentic packet)
    kDuplicateAfterRead, // the same, but the packet's stamps may already be in use
    kNotSent,            // send hook: not a packet we sent (key and MAC), or forgotten
    kNoRoom,             // more hooks and devices than one packet can pass: ignored
    kBucketFull,         // receive hook: a new packet whose hash bucket is full: refused
  };

  // What the book held for an authentic datagram.
  struct Received {
    std::vector<ProbeStamp> stamps;  // one per hook and device, in arrival order
    bool duplicate = false;          // some hook saw the packet twice: use nothing of it
    uint32_t duplicate_records = 0;  // records that repeated a hook and device before it came
  };

  // The secret of the table's hash (crypto_shorthash_KEYBYTES).
  using HashKey = std::array<uint8_t, 16>;
  // More entries than this in one bucket: a new id there is refused. With a
  // keyed hash and the table's load at most 1, an honest id meets a full
  // bucket with probability about e^-1/16! = 2e-14 per insert (never, in
  // practice); only someone who knows the secret can fill one.
  static constexpr size_t kMaxBucket = 16;

  TapStampBook() : TapStampBook(Limits{}) {}
  // A random hash secret, drawn here (per run: an attacker cannot
  // precompute colliding ids).
  explicit TapStampBook(Limits limits);
  // A fixed hash secret: tests and benchmarks only.
  TapStampBook(Limits limits, const HashKey& hash_key);

  // This node is sending the packet (key, mac): its send-hook records follow.
  void ExpectSent(const PacketKey& key, const PacketMac& mac);
  // One record, direction by its hook. The caller has checked that a send
  // record claims this node's id and session, a receive record is addressed
  // to this node by a member other than itself.
  Verdict OnRecord(const TapStamp& t);
  // A datagram with this key and MAC passed the MAC check: the receive
  // stamps held for it, once (later calls return none).
  Received OnAuthenticDatagram(const PacketKey& key, const PacketMac& mac);
  // Drops held receive records older than the time-to-live (node clock).
  void Expire(int64_t now_ns);

  // Receive records dropped without ever meeting an authentic datagram with
  // their key and MAC (repeats included): forgeries, or packets whose
  // datagram never came.
  uint64_t unverified_dropped() const { return unverified_dropped_; }
  // New ids refused because their hash bucket held kMaxBucket entries
  // (records, sent packets and datagrams alike).
  uint64_t bucket_full() const { return bucket_full_; }
  size_t held() const { return held_.size(); }
  size_t remembered() const { return remembered_.size(); }

  // For tests: the keyed hash of an id, its bucket, and the longest bucket.
  uint64_t HashOf(const PacketKey& key, const PacketMac& mac) const {
    return entries_.hash_function()(Id{key, mac});
  }
  size_t BucketOf(const PacketKey& key, const PacketMac& mac) const {
    return entries_.bucket(Id{key, mac});
  }
  size_t longest_bucket() const;

 private:
  using Id = std::pair<PacketKey, PacketMac>;
  enum class Pool : uint8_t { kHeld, kRemembered };
  struct Seen {
    uint32_t hook = 0;
    uint32_t ifindex = 0;
    ProbeStamp stamp;
  };
  static constexpr size_t kMaxSeen = 6;  // tc + driver hook on a device and its VLAN/bond parent...
  struct Entry {
    std::array<Seen, kMaxSeen> seen{};
    uint8_t n_seen = 0;
    uint32_t repeats = 0;   // held records that repeated a hook and device
    bool sent = false;      // we sent it
    bool read = false;      // its authentic datagram was read
    bool duplicate = false;
    int64_t held_since_ns = 0;
    Pool pool = Pool::kHeld;
    std::list<Id>::iterator pos;
  };
  // Hashed, not ordered: every probe passes the book several times, and on
  // the ordered map the key comparisons were the agent's largest user-space
  // cost (PERFORMANCE §3). Keyed SipHash-2-4 over every byte of the id: a
  // sender chooses all of them (records are filed before the MAC check).
  // Not noexcept on purpose: the table then stores each hash, so a lookup
  // compares stored hashes before ids and a rehash does not hash again.
  struct IdHash {
    HashKey key{};
    size_t operator()(const Id& id) const;
  };
  using Entries = std::unordered_map<Id, Entry, IdHash>;

  // The id's entry, new in `pool` if it was not there (*inserted); end()
  // if it was not there and its bucket is full (counted).
  Entries::iterator Insert(const Id& id, Pool pool, bool* inserted = nullptr);
  void MoveTo(Entries::iterator it, Pool pool);
  void Erase(Entries::iterator it);
  void Trim();
  // Records (hook, device) for the entry; false if it was there already.
  static bool AddSeen(Entry& e, const TapStamp& t, bool* no_room);
  std::list<Id>& ListOf(Pool p) { return p == Pool::kHeld ? held_ : remembered_; }

  Limits limits_;
  Entries entries_;
  std::list<Id> held_;        // oldest first
  std::list<Id> remembered_;  // oldest first
  uint64_t unverified_dropped_ = 0;
  uint64_t bucket_full_ = 0;
};

}  // namespace chronolink
