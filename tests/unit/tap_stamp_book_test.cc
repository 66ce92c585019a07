// The book that binds eBPF tap records to authentic packets by key and MAC:
// direction by hook, held receive records, duplicates per hook and device,
// and its bounds.
#include "agent/probe/tap_stamp_book.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace chronolink {
namespace {

using Verdict = TapStampBook::Verdict;

PacketKey Key(uint64_t seq, uint32_t from = 2, uint32_t to = 1) {
  return PacketKey{MessageType::kForward, from, to, 0xE, seq, 0};
}

PacketMac Mac(uint8_t b) {
  PacketMac m;
  m.fill(b);
  return m;
}

TapStamp Record(uint32_t hook, const PacketKey& key, const PacketMac& mac, int64_t ns,
                uint32_t ifindex = 2) {
  TapStamp t;
  t.hook = hook;
  t.ifindex = ifindex;
  t.key = key;
  t.mac = mac;
  t.stamp = {ns, TapHookSource(hook)};
  return t;
}

TEST(TapStampBook, ReceiveRecordsWaitForTheDatagramWithTheirMac) {
  TapStampBook book;
  EXPECT_EQ(book.OnRecord(Record(CHRONOLINK_HOOK_XDP, Key(1), Mac(7), 100)), Verdict::kHeld);
  EXPECT_EQ(book.OnRecord(Record(CHRONOLINK_HOOK_TC_INGRESS, Key(1), Mac(7), 200)), Verdict::kHeld);
  // Same header, another MAC: another packet, which never came.
  EXPECT_EQ(book.OnRecord(Record(CHRONOLINK_HOOK_XDP, Key(1), Mac(9), 50)), Verdict::kHeld);
  const TapStampBook::Received r = book.OnAuthenticDatagram(Key(1), Mac(7));
  EXPECT_FALSE(r.duplicate);
  ASSERT_EQ(r.stamps.size(), 2u);
  EXPECT_EQ(r.stamps[0].ns, 100);
  EXPECT_EQ(r.stamps[1].ns, 200);
  // Given once; a record after its datagram is late, not held.
  EXPECT_TRUE(book.OnAuthenticDatagram(Key(1), Mac(7)).stamps.empty());
  EXPECT_EQ(book.OnRecord(Record(CHRONOLINK_HOOK_XDP, Key(1), Mac(7), 300, 5)), Verdict::kLate);
  // The forgery expires unverified, counted.
  book.Expire(50 + 300'000'000);
  EXPECT_EQ(book.unverified_dropped(), 1u);
  EXPECT_EQ(book.held(), 0u);
}

TEST(TapStampBook, SendRecordsCountOnlyForWhatWeSent) {
  TapStampBook book;
  book.ExpectSent(Key(4, 1, 2), Mac(1));
  EXPECT_EQ(book.OnRecord(Record(CHRONOLINK_HOOK_TC_EGRESS, Key(4, 1, 2), Mac(1), 10)), Verdict::kUse);
  EXPECT_EQ(book.OnRecord(Record(CHRONOLINK_HOOK_DEV_XMIT, Key(4, 1, 2), Mac(1), 20)), Verdict::kUse);
  // The same packet through a second device (a VLAN over its parent) is no copy.
  EXPECT_EQ(book.OnRecord(Record(CHRONOLINK_HOOK_DEV_XMIT, Key(4, 1, 2), Mac(1), 25, 3)), Verdict::kUse);
  // Our header with a MAC we never sent, or a packet we never sent.
  EXPECT_EQ(book.OnRecord(Record(CHRONOLINK_HOOK_DEV_XMIT, Key(4, 1, 2), Mac(2), 30)), Verdict::kNotSent);
  EXPECT_EQ(book.OnRecord(Record(CHRONOLINK_HOOK_DEV_XMIT, Key(5, 1, 2), Mac(1), 30)), Verdict::kNotSent);
  // It leaves a second time through the same hook and device: a copy.
  EXPECT_EQ(book.OnRecord(Record(CHRONOLINK_HOOK_DEV_XMIT, Key(4, 1, 2), Mac(1), 40)),
            Verdict::kDuplicateAfterRead);
}

TEST(TapStampBook, ACopyAtOneHookSpoilsThePacketWhicheverCameFirst) {
  TapStampBook book;
  // Before its datagram: the datagram gets no stamp, and learns it was copied.
  EXPECT_EQ(book.OnRecord(Record(CHRONOLINK_HOOK_XDP, Key(1), Mac(7), 100)), Verdict::kHeld);
  EXPECT_EQ(book.OnRecord(Record(CHRONOLINK_HOOK_XDP, Key(1), Mac(7), 90)), Verdict::kDuplicate);
  const TapStampBook::Received r = book.OnAuthenticDatagram(Key(1), Mac(7));
  EXPECT_TRUE(r.duplicate);
  EXPECT_EQ(r.duplicate_records, 1u);
  EXPECT_TRUE(r.stamps.empty());
  // After its datagram: the caller must spoil what it measured.
  book.OnRecord(Record(CHRONOLINK_HOOK_XDP, Key(2), Mac(7), 100));
  EXPECT_FALSE(book.OnAuthenticDatagram(Key(2), Mac(7)).duplicate);
  EXPECT_EQ(book.OnRecord(Record(CHRONOLINK_HOOK_XDP, Key(2), Mac(7), 120)), Verdict::kDuplicateAfterRead);
  // A forgery copied twice, never authentic: counted with the unverified.
  book.OnRecord(Record(CHRONOLINK_HOOK_XDP, Key(3), Mac(0), 100));
  book.OnRecord(Record(CHRONOLINK_HOOK_XDP, Key(3), Mac(0), 110));
  book.Expire(1'000'000'000);
  EXPECT_EQ(book.unverified_dropped(), 2u);
}

TEST(TapStampBook, StaysWithinItsBoundsUnderAFloodOfForgeries) {
  TapStampBook::Limits limits;
  limits.held = 64;
  limits.remembered = 32;
  TapStampBook book(limits);
  for (uint64_t i = 0; i < 10'000; ++i) {
    book.OnRecord(Record(CHRONOLINK_HOOK_XDP, Key(i), Mac(0), static_cast<int64_t>(i)));
    EXPECT_LE(book.held(), 64u);
  }
  EXPECT_EQ(book.unverified_dropped(), 10'000u - 64u);
  for (uint64_t i = 0; i < 1'000; ++i) {
    book.ExpectSent(Key(i, 1, 2), Mac(1));
    book.OnAuthenticDatagram(Key(100'000 + i), Mac(1));
  }
  EXPECT_LE(book.remembered(), 32u);
  // The newest packet is still remembered, an old one is forgotten.
  EXPECT_EQ(book.OnRecord(Record(CHRONOLINK_HOOK_TC_EGRESS, Key(999, 1, 2), Mac(1), 5)), Verdict::kUse);
  EXPECT_EQ(book.OnRecord(Record(CHRONOLINK_HOOK_TC_EGRESS, Key(0, 1, 2), Mac(1), 5)), Verdict::kNotSent);
}

// Records are filed before any MAC is checked, so a sender chooses every
// byte of their ids. Under the old unkeyed hash (MAC bytes 0-7, sequence
// number, index) these thousands of ids all shared one bucket, and every
// lookup walked the whole chain (issue 29: 15x the agent's loop cost at
// 15 k datagrams/s). Under the keyed hash they spread, and none is refused.
TEST(TapStampBook, IdsCollidingInTheBytesASenderChoosesDoNotShareABucket) {
  TapStampBook book(TapStampBook::Limits{}, TapStampBook::HashKey{1, 2, 3});
  constexpr uint32_t kForged = 3000;
  for (uint32_t i = 0; i < kForged; ++i) {
    PacketKey key = Key(77, 2 + (i & 1));
    key.sender_epoch = 0xE + i;
    PacketMac mac = Mac(0x5A);                        // same first 8 bytes
    for (int b = 8; b < 16; ++b) mac[b] = static_cast<uint8_t>(i >> (b & 3));
    ASSERT_EQ(book.OnRecord(Record(CHRONOLINK_HOOK_XDP, key, mac, 100 + i)), Verdict::kHeld) << i;
  }
  EXPECT_EQ(book.held(), kForged);
  EXPECT_EQ(book.bucket_full(), 0u);
  EXPECT_LE(book.longest_bucket(), 12u);  // a handful for 3000 random hashes in 12k buckets
  // A real packet after the flood: held, then given to its datagram.
  EXPECT_EQ(book.OnRecord(Record(CHRONOLINK_HOOK_XDP, Key(78), Mac(3), 5000)), Verdict::kHeld);
  const TapStampBook::Received r = book.OnAuthenticDatagram(Key(78), Mac(3));
  ASSERT_EQ(r.stamps.size(), 1u);
  EXPECT_EQ(r.stamps[0].ns, 5000);
}

// The hash secret is the book's own: drawn per book (per run), so colliding
// ids cannot be computed ahead; a fixed secret gives a fixed hash.
TEST(TapStampBook, TheHashDependsOnTheBooksSecret) {
  const PacketKey key = Key(5);
  const PacketMac mac = Mac(9);
  TapStampBook a(TapStampBook::Limits{}, TapStampBook::HashKey{1});
  TapStampBook a_again(TapStampBook::Limits{}, TapStampBook::HashKey{1});
  TapStampBook b(TapStampBook::Limits{}, TapStampBook::HashKey{2});
  EXPECT_EQ(a.HashOf(key, mac), a_again.HashOf(key, mac));
  EXPECT_NE(a.HashOf(key, mac), b.HashOf(key, mac));
  TapStampBook random_1, random_2;
  EXPECT_NE(random_1.HashOf(key, mac), random_2.HashOf(key, mac));
  // Every byte of the id counts, also those the old hash ignored.
  PacketMac tail = mac;
  tail[15] ^= 1;
  PacketKey epoch = key;
  ++epoch.sender_epoch;
  PacketKey sender = key;
  ++sender.sender;
  PacketKey receiver = key;
  ++receiver.receiver;
  PacketKey type = key;
  type.type = MessageType::kReverse;
  for (const auto& [k, m] : {std::pair{key, tail}, std::pair{epoch, mac}, std::pair{sender, mac},
                             std::pair{receiver, mac}, std::pair{type, mac}}) {
    EXPECT_NE(a.HashOf(k, m), a.HashOf(key, mac));
  }
}

// Someone who knew the secret could still fill one bucket: past kMaxBucket
// entries a new id there is refused and counted, so no lookup walks further.
TEST(TapStampBook, AFullBucketRefusesNewIdsAndCountsThem) {
  TapStampBook::Limits limits;
  limits.held = 64;
  limits.remembered = 32;
  TapStampBook book(limits, TapStampBook::HashKey{7});
  // Find kMaxBucket + 2 ids in one bucket (about 100 buckets: a few
  // thousand tries).
  const size_t target = book.BucketOf(Key(0), Mac(1));
  std::vector<uint64_t> seqs;
  for (uint64_t seq = 0; seqs.size() < TapStampBook::kMaxBucket + 2 && seq < 1'000'000; ++seq) {
    if (book.BucketOf(Key(seq), Mac(1)) == target) seqs.push_back(seq);
  }
  ASSERT_EQ(seqs.size(), TapStampBook::kMaxBucket + 2);
  for (size_t i = 0; i < TapStampBook::kMaxBucket; ++i) {
    EXPECT_EQ(book.OnRecord(Record(CHRONOLINK_HOOK_XDP, Key(seqs[i]), Mac(1), 10)), Verdict::kHeld);
  }
  EXPECT_EQ(book.longest_bucket(), TapStampBook::kMaxBucket);
  const uint64_t over = seqs[TapStampBook::kMaxBucket];
  EXPECT_EQ(book.OnRecord(Record(CHRONOLINK_HOOK_XDP, Key(over), Mac(1), 10)), Verdict::kBucketFull);
  EXPECT_EQ(book.bucket_full(), 1u);
  EXPECT_EQ(book.held(), TapStampBook::kMaxBucket);
  EXPECT_EQ(book.longest_bucket(), TapStampBook::kMaxBucket);
  // Its datagram finds nothing held; a packet we send there is not remembered.
  EXPECT_TRUE(book.OnAuthenticDatagram(Key(over), Mac(1)).stamps.empty());
  book.ExpectSent(Key(seqs.back()), Mac(1));
  EXPECT_EQ(book.OnRecord(Record(CHRONOLINK_HOOK_TC_EGRESS, Key(seqs.back()), Mac(1), 20)),
            Verdict::kNotSent);
  EXPECT_EQ(book.bucket_full(), 3u);
  // Ids already in the bucket are still found.
  const TapStampBook::Received r = book.OnAuthenticDatagram(Key(seqs[0]), Mac(1));
  ASSERT_EQ(r.stamps.size(), 1u);
  EXPECT_EQ(r.stamps[0].ns, 10);
}

}  // namespace
}  // namespace chronolink
