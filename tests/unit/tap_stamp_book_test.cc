// The book that binds eBPF tap records to authentic packets by key and MAC:
// direction by hook, held receive records, duplicates per hook and device,
// and its bounds.
#include "agent/probe/tap_stamp_book.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace chronolink
