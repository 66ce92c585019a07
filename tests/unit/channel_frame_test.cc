// Coordination channel wire protocol without sockets: hello layout, key
// derivation, handshake outcomes, frame sealing/decoding and every rejection,
// fed whole, byte by byte and as garbage, against the real libsodium.
#include "agent/coord/channel_frame.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace chronolink {
namespace {

constexpr uint32_t kCluster = 0x01020304;
constexpr size_t kMax = 1 << 20;

ClusterKey TestKey() {
  ClusterKey k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(0x31 + 5 * i);
  return k;
}

ChannelIdentity Id(uint32_t node, uint32_t cluster = kCluster, ClusterKey key = TestKey()) {
  return ChannelIdentity{cluster, node, key};
}

std::span<const uint8_t> AsBytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

struct Received {
  ChannelEvent::Kind kind;
  uint32_t peer;
  uint16_t type;
  std::string payload;
};

// One end of an in-memory connection.
struct Side {
  Side(const ChannelIdentity& id, ChannelRole role, std::optional<uint32_t> expected,
       size_t max = kMax)
      : session(id, role, expected, max), outbox(session.hello()) {}

  // Feeds `bytes` in pieces of `chunk` and drains every event after each.
  void Receive(std::string_view bytes, size_t chunk) {
    for (size_t i = 0; i < bytes.size(); i += chunk) {
      session.Feed(AsBytes(bytes.substr(i, chunk)));
      Drain();
    }
  }
  void Drain() {
    for (;;) {
      ChannelEvent ev;
      last = session.Next(&ev, &outbox);
      if (last != ChannelResult::kOk) return;
      events.push_back({ev.kind, ev.peer, ev.frame.type, std::string(ev.frame.payload)});
    }
  }
  void Send(uint16_t type, std::string_view payload) {
    ASSERT_TRUE(session.Seal(type, payload, &outbox));
  }

  ChannelSession session;
  std::string outbox;  // bytes for the other side
  std::vector<Received> events;
  ChannelResult last = ChannelResult::kNeedMore;
};

// Moves bytes both ways until neither side has anything to say.
void Exchange(Side& a, Side& b, size_t chunk = SIZE_MAX) {
  while (!a.outbox.empty() || !b.outbox.empty()) {
    std::string to_b;
    std::string to_a;
    to_b.swap(a.outbox);
    to_a.swap(b.outbox);
    b.Receive(to_b, chunk);
    a.Receive(to_a, chunk);
  }
}

TEST(ChannelHello, LayoutAndRoundTrip) {
  ChannelHello h;
  h.cluster_id = 0xA1B2C3D4;
  h.node_id = 0x0000BEEF;
  for (size_t i = 0; i < h.nonce.size(); ++i) h.nonce[i] = static_cast<uint8_t>(i + 1);
  const std::string wire = EncodeChannelHello(h);
  ASSERT_EQ(wire.size(), kChannelHelloSize);
  EXPECT_EQ(wire.substr(0, 4), "CLCH");
  EXPECT_EQ(static_cast<uint8_t>(wire[4]), kChannelVersion);
  EXPECT_EQ(wire.substr(5, 3), std::string(3, '\0'));
  EXPECT_EQ(wire.substr(8, 4), "\xA1\xB2\xC3\xD4");
  EXPECT_EQ(wire.substr(12, 4), std::string("\x00\x00\xBE\xEF", 4));
  EXPECT_EQ(static_cast<uint8_t>(wire[16]), 1);
  EXPECT_EQ(static_cast<uint8_t>(wire[47]), 32);

  ChannelHello back;
  const auto bytes = AsBytes(wire);
  ASSERT_EQ(DecodeChannelHello(bytes.first<kChannelHelloSize>(), &back), ChannelResult::kOk);
  EXPECT_EQ(back.cluster_id, h.cluster_id);
  EXPECT_EQ(back.node_id, h.node_id);
  EXPECT_EQ(back.nonce, h.nonce);
}

TEST(ChannelHello, RejectsMagicAndVersion) {
  std::string wire = EncodeChannelHello({});
  ChannelHello out;
  wire[0] ^= 1;
  EXPECT_EQ(DecodeChannelHello(AsBytes(wire).first<kChannelHelloSize>(), &out), ChannelResult::kBadMagic);
  wire[0] ^= 1;
  wire[4] = 2;
  EXPECT_EQ(DecodeChannelHello(AsBytes(wire).first<kChannelHelloSize>(), &out), ChannelResult::kBadVersion);
}

TEST(ChannelKeys, DirectionalAndBoundToBothHellos) {
  ChannelHello hi{kCluster, 1, {}};
  ChannelHello hr{kCluster, 2, {}};
  hr.nonce[0] = 9;
  const std::string i = EncodeChannelHello(hi);
  const std::string r = EncodeChannelHello(hr);
  const ChannelKeys ki = DeriveChannelKeys(TestKey(), i, r, ChannelRole::kInitiator);
  const ChannelKeys kr = DeriveChannelKeys(TestKey(), i, r, ChannelRole::kResponder);
  EXPECT_EQ(ki.send_frame, kr.recv_frame);
  EXPECT_EQ(ki.recv_frame, kr.send_frame);
  EXPECT_EQ(ki.send_auth, kr.recv_auth);
  EXPECT_NE(ki.send_frame, ki.recv_frame);
  EXPECT_NE(ki.send_frame, ki.send_auth);

  ChannelHello hr2 = hr;
  hr2.nonce[31] ^= 1;  // another connection: one nonce bit
  const ChannelKeys other = DeriveChannelKeys(TestKey(), i, EncodeChannelHello(hr2), ChannelRole::kInitiator);
  EXPECT_NE(other.send_frame, ki.send_frame);
  ClusterKey k2 = TestKey();
  k2[0] ^= 1;
  EXPECT_NE(DeriveChannelKeys(k2, i, r, ChannelRole::kInitiator).send_frame, ki.send_frame);
}

TEST(ChannelSession, HandshakeThenFramesBothWays) {
  Side a(Id(1), ChannelRole::kInitiator, 2u);
  Side b(Id(2), ChannelRole::kResponder, std::nullopt);
  Exchange(a, b);
  ASSERT_TRUE(a.session.established());
  ASSERT_TRUE(b.session.established());
  ASSERT_EQ(a.events.size(), 1u);
  EXPECT_EQ(a.events[0].kind, ChannelEvent::Kind::kEstablished);
  EXPECT_EQ(a.events[0].peer, 2u);
  EXPECT_EQ(b.events[0].peer, 1u);

  a.Send(16, "to b");
  a.Send(17, "");
  b.Send(40000, std::string(70000, 'x'));
  Exchange(a, b);
  ASSERT_EQ(b.events.size(), 3u);
  EXPECT_EQ(b.events[1].type, 16);
  EXPECT_EQ(b.events[1].payload, "to b");
  EXPECT_EQ(b.events[2].type, 17);
  EXPECT_EQ(b.events[2].payload, "");
  ASSERT_EQ(a.events.size(), 2u);
  EXPECT_EQ(a.events[1].type, 40000);
  EXPECT_EQ(a.events[1].payload, std::string(70000, 'x'));
  EXPECT_EQ(a.last, ChannelResult::kNeedMore);
  EXPECT_EQ(a.session.Finish(), ChannelResult::kOk);
}

TEST(ChannelSession, ByteByByteGivesTheSameEvents) {
  Side a(Id(1), ChannelRole::kInitiator, 2u);
  Side b(Id(2), ChannelRole::kResponder, std::nullopt);
  Exchange(a, b, 1);
  ASSERT_TRUE(b.session.established());
  for (int i = 0; i < 20; ++i) a.Send(static_cast<uint16_t>(16 + i), std::string(i * 7, static_cast<char>('a' + i)));
  Exchange(a, b, 1);
  ASSERT_EQ(b.events.size(), 21u);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(b.events[i + 1].type, 16 + i);
    EXPECT_EQ(b.events[i + 1].payload, std::string(i * 7, static_cast<char>('a' + i)));
  }
}

TEST(ChannelSession, FramesInTheSameReadAsTheHandshake) {
  Side a(Id(1), ChannelRole::kInitiator, 2u);
  Side b(Id(2), ChannelRole::kResponder, std::nullopt);
  b.Receive(a.outbox, SIZE_MAX);  // b has a's hello and answers with hello + auth
  a.outbox.clear();
  a.Receive(b.outbox, SIZE_MAX);
  b.outbox.clear();
  ASSERT_TRUE(a.session.established());
  a.Send(16, "early");
  b.Receive(a.outbox, SIZE_MAX);  // auth and frame together
  ASSERT_EQ(b.events.size(), 2u);
  EXPECT_EQ(b.events[1].payload, "early");
}

TEST(ChannelSession, WrongKeyFailsAuthOnBothSides) {
  ClusterKey other = TestKey();
  other[5] ^= 0x80;
  Side a(Id(1, kCluster, other), ChannelRole::kInitiator, 2u);
  Side b(Id(2), ChannelRole::kResponder, std::nullopt);
  Exchange(a, b);
  EXPECT_EQ(a.last, ChannelResult::kBadAuth);
  EXPECT_EQ(b.last, ChannelResult::kBadAuth);
  EXPECT_TRUE(a.events.empty());
  EXPECT_TRUE(b.events.empty());
}

TEST(ChannelSession, RefusesOtherClusterOwnIdAndWrongPeer) {
  {
    Side a(Id(1, kCluster + 1), ChannelRole::kInitiator, 2u);
    Side b(Id(2), ChannelRole::kResponder, std::nullopt);
    Exchange(a, b);
    EXPECT_EQ(a.last, ChannelResult::kWrongCluster);
    EXPECT_EQ(b.last, ChannelResult::kWrongCluster);
  }
  {
    Side a(Id(2), ChannelRole::kInitiator, 5u);
    Side b(Id(2), ChannelRole::kResponder, std::nullopt);
    Exchange(a, b);
    EXPECT_EQ(b.last, ChannelResult::kSelfConnect);
    EXPECT_EQ(a.last, ChannelResult::kSelfConnect);
  }
  {
    Side a(Id(1), ChannelRole::kInitiator, 3u);  // dialled 3, 2 answers
    Side b(Id(2), ChannelRole::kResponder, std::nullopt);
    Exchange(a, b);
    EXPECT_EQ(a.last, ChannelResult::kUnexpectedPeer);
    EXPECT_FALSE(b.session.established());
  }
}

TEST(ChannelSession, ReplayedHandshakeFailsAuth) {
  Side a(Id(1), ChannelRole::kInitiator, 2u);
  Side b(Id(2), ChannelRole::kResponder, std::nullopt);
  const std::string hello = a.outbox;
  b.Receive(a.outbox, SIZE_MAX);
  a.outbox.clear();
  a.Receive(b.outbox, SIZE_MAX);
  b.outbox.clear();
  const std::string auth = a.outbox;  // a's MAC for this connection
  b.Receive(auth, SIZE_MAX);
  ASSERT_TRUE(b.session.established());
  // The recorded initiator side, replayed to the same node later: the new
  // responder nonce makes the recorded MAC worthless.
  Side b2(Id(2), ChannelRole::kResponder, std::nullopt);
  b2.Receive(hello + auth, SIZE_MAX);
  EXPECT_EQ(b2.last, ChannelResult::kBadAuth);
  EXPECT_FALSE(b2.session.established());
}

TEST(ChannelSession, SealRefusedBeforeKeysAndAboveLimit) {
  Side a(Id(1), ChannelRole::kInitiator, 2u, 100);
  std::string out;
  EXPECT_FALSE(a.session.Seal(16, "x", &out));
  Side b(Id(2), ChannelRole::kResponder, std::nullopt, 100);
  Exchange(a, b);
  EXPECT_TRUE(a.session.Seal(16, std::string(100, 'x'), &out));
  EXPECT_FALSE(a.session.Seal(16, std::string(101, 'x'), &out));
}

TEST(ChannelSession, TruncatedHandshakeAndErrorsAreSticky) {
  Side a(Id(1), ChannelRole::kInitiator, 2u);
  Side b(Id(2), ChannelRole::kResponder, std::nullopt);
  b.Receive(a.outbox.substr(0, 20), SIZE_MAX);
  EXPECT_EQ(b.last, ChannelResult::kNeedMore);
  EXPECT_EQ(b.session.Finish(), ChannelResult::kTruncated);

  Side c(Id(2), ChannelRole::kResponder, std::nullopt);
  c.Receive(std::string(kChannelHelloSize, 'z'), SIZE_MAX);
  EXPECT_EQ(c.last, ChannelResult::kBadMagic);
  c.Receive(a.outbox, SIZE_MAX);  // a valid hello cannot revive it
  EXPECT_EQ(c.last, ChannelResult::kBadMagic);
  EXPECT_EQ(c.session.Finish(), ChannelResult::kBadMagic);
}

// Frame-level tests with a known key.
ChannelKey FrameKey(uint8_t seed) {
  ChannelKey k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(seed + i);
  return k;
}

std::string Seal(FrameSealer& s, uint16_t type, std::string_view payload) {
  std::string out;
  EXPECT_TRUE(s.Seal(type, payload, &out));
  return out;
}

TEST(ChannelFrame, LayoutAndRoundTrip) {
  FrameSealer sealer(FrameKey(1));
  const std::string f0 = Seal(sealer, 0x1234, "abc");
  ASSERT_EQ(f0.size(), kChannelFrameOverhead + 3);
  EXPECT_EQ(f0.substr(0, 4), std::string("\0\0\0\3", 4));      // length
  EXPECT_EQ(f0.substr(4, 8), std::string(8, '\0'));           // seq 0
  EXPECT_EQ(f0.substr(12, 2), "\x12\x34");                    // type
  EXPECT_EQ(f0.substr(14, 3), "abc");
  const std::string f1 = Seal(sealer, 16, "");
  EXPECT_EQ(static_cast<uint8_t>(f1[11]), 1);  // seq 1

  FrameDecoder d(FrameKey(1), kMax);
  d.Feed(AsBytes(f0 + f1));
  ChannelFrame f;
  ASSERT_EQ(d.Next(&f), ChannelResult::kOk);
  EXPECT_EQ(f.seq, 0u);
  EXPECT_EQ(f.type, 0x1234);
  EXPECT_EQ(f.payload, "abc");
  ASSERT_EQ(d.Next(&f), ChannelResult::kOk);
  EXPECT_EQ(f.seq, 1u);
  EXPECT_EQ(f.payload, "");
  EXPECT_EQ(d.Next(&f), ChannelResult::kNeedMore);
  EXPECT_EQ(d.Finish(), ChannelResult::kOk);
}

TEST(ChannelFrame, EveryTamperedByteIsRejected) {
  FrameSealer sealer(FrameKey(1));
  const std::string frame = Seal(sealer, 16, "payload bytes");
  for (size_t i = 0; i < frame.size(); ++i) {
    for (uint8_t bit : {0x01, 0x80}) {
      std::string bad = frame;
      bad[i] = static_cast<char>(bad[i] ^ bit);
      FrameDecoder d(FrameKey(1), kMax);
      d.Feed(AsBytes(bad));
      ChannelFrame f;
      const ChannelResult r = d.Next(&f);
      EXPECT_NE(r, ChannelResult::kOk) << "byte " << i;
      // A longer length waits for bytes that never come: truncated at the end.
      if (r == ChannelResult::kNeedMore) {
        EXPECT_EQ(d.Finish(), ChannelResult::kTruncated);
      }
    }
  }
}

TEST(ChannelFrame, ReplayReorderAndReflectionAreRejected) {
  FrameSealer sealer(FrameKey(1));
  const std::string f0 = Seal(sealer, 16, "zero");
  const std::string f1 = Seal(sealer, 16, "one");
  ChannelFrame f;
  {
    FrameDecoder d(FrameKey(1), kMax);
    d.Feed(AsBytes(f0 + f0));
    EXPECT_EQ(d.Next(&f), ChannelResult::kOk);
    EXPECT_EQ(d.Next(&f), ChannelResult::kBadSequence);
    d.Feed(AsBytes(f1));
    EXPECT_EQ(d.Next(&f), ChannelResult::kBadSequence);  // sticky
  }
  {
    FrameDecoder d(FrameKey(1), kMax);
    d.Feed(AsBytes(f1 + f0));
    EXPECT_EQ(d.Next(&f), ChannelResult::kBadSequence);
  }
  {
    FrameDecoder d(FrameKey(2), kMax);  // the other direction's key
    d.Feed(AsBytes(f0));
    EXPECT_EQ(d.Next(&f), ChannelResult::kBadMac);
  }
}

TEST(ChannelFrame, OversizeIsRejectedFromTheHeaderAlone) {
  FrameSealer sealer(FrameKey(1));
  const std::string big = Seal(sealer, 16, std::string(1025, 'b'));
  FrameDecoder d(FrameKey(1), 1024);
  d.Feed(AsBytes(big.substr(0, kChannelFrameHeaderSize)));
  ChannelFrame f;
  EXPECT_EQ(d.Next(&f), ChannelResult::kOversize);
  d.Feed(AsBytes(big));
  EXPECT_EQ(d.buffered(), 0u);  // a dead decoder keeps nothing

  // A forged 4 GiB length is refused just the same.
  FrameDecoder d2(FrameKey(1), kMax);
  d2.Feed(AsBytes(std::string("\xFF\xFF\xFF\xFF", 4) + std::string(10, '\0')));
  EXPECT_EQ(d2.Next(&f), ChannelResult::kOversize);

  FrameDecoder exact(FrameKey(1), 1025);
  exact.Feed(AsBytes(big));
  EXPECT_EQ(exact.Next(&f), ChannelResult::kOk);
}

TEST(ChannelFrame, TruncatedAtTheEnd) {
  FrameSealer sealer(FrameKey(1));
  const std::string f0 = Seal(sealer, 16, "abcdef");
  FrameDecoder d(FrameKey(1), kMax);
  d.Feed(AsBytes(f0.substr(0, f0.size() - 1)));
  ChannelFrame f;
  EXPECT_EQ(d.Next(&f), ChannelResult::kNeedMore);
  EXPECT_EQ(d.Finish(), ChannelResult::kTruncated);
}

TEST(ChannelFrame, LargePayloadInSmallPieces) {
  FrameSealer sealer(FrameKey(1));
  std::string payload(4u << 20, '\0');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 31 + (i >> 12));
  std::string wire = Seal(sealer, 16, payload);  // two statements: seq order
  wire += Seal(sealer, 17, "after");
  FrameDecoder d(FrameKey(1), 16u << 20);
  std::vector<std::string> got;
  for (size_t i = 0; i < wire.size(); i += 65536) {
    d.Feed(AsBytes(std::string_view(wire).substr(i, 65536)));
    ChannelFrame f;
    while (d.Next(&f) == ChannelResult::kOk) got.emplace_back(f.payload);
  }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(got[0] == payload);
  EXPECT_EQ(got[1], "after");
}

TEST(ChannelFuzz, GarbageNeverCrashesNorAuthenticates) {
  std::mt19937_64 rng(12345);
  for (int iter = 0; iter < 3000; ++iter) {
    std::string junk(rng() % 300, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    // Half of the time behind a valid hello, so the auth/frame paths see it.
    Side b(Id(2), ChannelRole::kResponder, std::nullopt, 4096);
    if (iter % 2) {
      Side a(Id(1), ChannelRole::kInitiator, 2u);
      junk = a.outbox + junk;
    }
    b.Receive(junk, 1 + rng() % 64);
    EXPECT_NE(b.last, ChannelResult::kOk);
    EXPECT_FALSE(b.session.established());
    EXPECT_TRUE(b.events.empty());

    FrameDecoder d(FrameKey(1), 4096);
    d.Feed(AsBytes(junk));
    ChannelFrame f;
    EXPECT_NE(d.Next(&f), ChannelResult::kOk);
  }
}

TEST(ChannelFuzz, MutatedStreamsOnlyEverYieldTheSentFrames) {
  std::mt19937_64 rng(777);
  for (int iter = 0; iter < 300; ++iter) {
    Side a(Id(1), ChannelRole::kInitiator, 2u);
    Side b(Id(2), ChannelRole::kResponder, std::nullopt);
    b.Receive(a.outbox, SIZE_MAX);
    a.outbox.clear();
    a.Receive(b.outbox, SIZE_MAX);
    b.outbox.clear();
    std::vector<std::string> sent;
    for (int i = 0; i < 8; ++i) {
      sent.push_back(std::string(rng() % 100, static_cast<char>('a' + i)));
      a.Send(static_cast<uint16_t>(16 + i), sent.back());
    }
    std::string wire = a.outbox;  // auth + 8 frames
    const size_t flips = 1 + rng() % 3;
    for (size_t k = 0; k < flips; ++k) wire[rng() % wire.size()] ^= static_cast<char>(1 + rng() % 255);
    b.Receive(wire, 1 + rng() % 50);
    // Whatever got through is exactly a prefix of what was sent.
    for (size_t i = 1; i < b.events.size(); ++i) {
      ASSERT_LE(i, sent.size());
      EXPECT_EQ(b.events[i].type, 16 + i - 1);
      EXPECT_EQ(b.events[i].payload, sent[i - 1]);
    }
    EXPECT_LT(b.events.size(), 1 + sent.size());  // something was damaged
  }
}

TEST(ChannelResult, NamesAreDistinct) {
  std::vector<std::string_view> names;
  for (int i = 0; i < static_cast<int>(ChannelResult::kCount); ++i) {
    names.push_back(ChannelResultName(static_cast<ChannelResult>(i)));
    EXPECT_NE(names.back(), "unknown");
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::unique(names.begin(), names.end()), names.end());
}

}  // namespace
}  // namespace chronolink
