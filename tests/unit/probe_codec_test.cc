// Probe wire format v1: round trips, the documented byte layout, and every
// rejection path of the decoder, against the real libsodium.
#include "agent/wire/probe_codec.h"

#include <gtest/gtest.h>
#include <sodium.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include "tests/support/ci_rule.h"

namespace chronolink {
namespace {

using Packet = std::array<uint8_t, kProbeWireSize>;

constexpr uint32_t kCluster = 0x0A0B0C0D;

ClusterKey TestKey() {
  ClusterKey k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(0xA0 + 7 * i);
  return k;
}

ClusterKey OtherKey() {
  ClusterKey k = TestKey();
  k[31] ^= 0x01;  // one bit apart
  return k;
}

EchoedStamp Stamp(int64_t kernel_ns, StampSource ks, int64_t user_ns, StampSource us) {
  EchoedStamp e;
  e.kernel = {kernel_ns, ks};
  e.user = {user_ns, us};
  return e;
}

// Every field distinct and non-trivial, so a swapped or truncated field shows.
ProbeMessage Distinctive(MessageType type) {
  ProbeMessage m;
  m.type = type;
  m.flags = kFlagHasEchoRx | kFlagHasPrevTx | kFlagFinal | kFlagClockStepped;
  m.cluster_id = kCluster;
  m.sender_node = 0x11223344;
  m.receiver_node = 0xFFFFFFFE;
  m.sender_epoch = 0x0102030405060708ull;
  m.echo_epoch = 0xF1E2D3C4B5A69788ull;
  m.seq = std::numeric_limits<uint64_t>::max();
  m.index = 1;
  m.echo_rx[0] = Stamp(-2, StampSource::kSocketSoftware, 1'700'000'000'123'456'789,
                       StampSource::kUserspace);
  m.echo_rx[1] = Stamp(std::numeric_limits<int64_t>::min(), StampSource::kHardware,
                       std::numeric_limits<int64_t>::max(), StampSource::kUserspace);
  m.prev_tx_seq = 0x8000000000000001ull;
  m.prev_tx[0] = Stamp(1'700'000'000'000'000'001, StampSource::kBpfTc, 0, StampSource::kNone);
  m.prev_tx[1] = Stamp(-1'234'567'890'123, StampSource::kSocketSched, -42,
                       StampSource::kUserspace);
  return m;
}

void ExpectStampEq(const ProbeStamp& a, const ProbeStamp& b, const std::string& what) {
  EXPECT_EQ(a.ns, b.ns) << what;
  EXPECT_EQ(a.source, b.source) << what;
}

void ExpectSame(const ProbeMessage& a, const ProbeMessage& b) {
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.flags, b.flags);
  EXPECT_EQ(a.cluster_id, b.cluster_id);
  EXPECT_EQ(a.sender_node, b.sender_node);
  EXPECT_EQ(a.receiver_node, b.receiver_node);
  EXPECT_EQ(a.sender_epoch, b.sender_epoch);
  EXPECT_EQ(a.echo_epoch, b.echo_epoch);
  EXPECT_EQ(a.seq, b.seq);
  EXPECT_EQ(a.index, b.index);
  EXPECT_EQ(a.prev_tx_seq, b.prev_tx_seq);
  for (int i = 0; i < 2; ++i) {
    ExpectStampEq(a.echo_rx[i].kernel, b.echo_rx[i].kernel, "echo_rx kernel " + std::to_string(i));
    ExpectStampEq(a.echo_rx[i].user, b.echo_rx[i].user, "echo_rx user " + std::to_string(i));
    ExpectStampEq(a.prev_tx[i].kernel, b.prev_tx[i].kernel, "prev_tx kernel " + std::to_string(i));
    ExpectStampEq(a.prev_tx[i].user, b.prev_tx[i].user, "prev_tx user " + std::to_string(i));
  }
}

Packet EncodeWith(const ProbeCodec& codec, const ProbeMessage& m) {
  Packet p{};
  codec.Encode(m, p);
  return p;
}

uint64_t ReadBe(const Packet& p, size_t off, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v = (v << 8) | p[off + i];
  return v;
}

// A message the decoder writes when it should not: any rejection must leave
// *out exactly as it was.
ProbeMessage Sentinel() {
  ProbeMessage m;
  m.seq = 0xDEADBEEF;
  m.sender_node = 77;
  return m;
}

void ExpectUntouched(const ProbeMessage& m) {
  EXPECT_EQ(m.seq, 0xDEADBEEFu);
  EXPECT_EQ(m.sender_node, 77u);
}

class ProbeCodecTest : public ::testing::Test {
 protected:
  ProbeCodec codec_{kCluster, TestKey()};

  DecodeResult DecodeBytes(const Packet& p) {
    ProbeMessage out = Sentinel();
    DecodeResult r = codec_.Decode(p, &out);
    if (r != DecodeResult::kOk) ExpectUntouched(out);
    return r;
  }
  // Tampers with an authentic packet, then re-MACs it so that only the field
  // checks can refuse it.
  DecodeResult DecodeForged(Packet p) {
    SealForTest(p, TestKey());
    return DecodeBytes(p);
  }
};

// ---------------------------------------------------------------- round trip

TEST_F(ProbeCodecTest, RoundTripsEveryMessageType) {
  for (MessageType t : {MessageType::kForward, MessageType::kReverse, MessageType::kFollowUp}) {
    SCOPED_TRACE(static_cast<int>(t));
    const ProbeMessage in = Distinctive(t);
    const Packet p = EncodeWith(codec_, in);
    ProbeMessage out;
    ASSERT_EQ(codec_.Decode(p, &out), DecodeResult::kOk);
    ExpectSame(in, out);
  }
}

TEST_F(ProbeCodecTest, RoundTripsMinimalForwardAndIndexZero) {
  ProbeMessage in;  // all defaults: no stamps, no flags
  in.cluster_id = kCluster;
  in.sender_node = 1;
  in.receiver_node = 2;
  in.sender_epoch = 3;
  in.seq = 0;
  in.index = 0;
  ProbeMessage out = Distinctive(MessageType::kReverse);
  ASSERT_EQ(codec_.Decode(EncodeWith(codec_, in), &out), DecodeResult::kOk);
  ExpectSame(in, out);
}

TEST_F(ProbeCodecTest, EncodingIsDeterministicAndUsesTheCodecsClusterId) {
  ProbeMessage m = Distinctive(MessageType::kForward);
  const Packet a = EncodeWith(codec_, m);
  m.cluster_id = 999;  // ignored: the codec speaks for its own cluster
  const Packet b = EncodeWith(codec_, m);
  EXPECT_EQ(a, b);
  ProbeMessage out;
  ASSERT_EQ(codec_.Decode(b, &out), DecodeResult::kOk);
  EXPECT_EQ(out.cluster_id, kCluster);
}

TEST_F(ProbeCodecTest, TwoCodecsWithTheSameKeyAndClusterInteroperate) {
  ProbeCodec peer(kCluster, TestKey());
  ProbeMessage out;
  EXPECT_EQ(peer.Decode(EncodeWith(codec_, Distinctive(MessageType::kReverse)), &out),
            DecodeResult::kOk);
}

TEST_F(ProbeCodecTest, DecodeAcceptsNullOutput) {
  EXPECT_EQ(codec_.Decode(EncodeWith(codec_, Distinctive(MessageType::kForward)), nullptr),
            DecodeResult::kOk);
}

// -------------------------------------------------------------- byte layout

TEST_F(ProbeCodecTest, LayoutIsBigEndianAtDocumentedOffsets) {
  const ProbeMessage m = Distinctive(MessageType::kReverse);
  const Packet p = EncodeWith(codec_, m);

  EXPECT_EQ(p[0], 'C');
  EXPECT_EQ(p[1], 'H');
  EXPECT_EQ(p[2], 'L');
  EXPECT_EQ(p[3], 'K');
  EXPECT_EQ(p[4], 1);  // version
  EXPECT_EQ(p[5], 2);  // type reverse
  EXPECT_EQ(p[6], 0x00);
  EXPECT_EQ(p[7], 0x0F);  // flags
  EXPECT_EQ(p[8], 0x0A);
  EXPECT_EQ(p[9], 0x0B);
  EXPECT_EQ(p[10], 0x0C);
  EXPECT_EQ(p[11], 0x0D);  // cluster id
  EXPECT_EQ(ReadBe(p, 12, 4), m.sender_node);
  EXPECT_EQ(p[12], 0x11);
  EXPECT_EQ(p[15], 0x44);
  EXPECT_EQ(ReadBe(p, 16, 4), m.receiver_node);
  EXPECT_EQ(ReadBe(p, 20, 8), m.sender_epoch);
  EXPECT_EQ(p[20], 0x01);
  EXPECT_EQ(p[27], 0x08);
  EXPECT_EQ(ReadBe(p, 28, 8), m.echo_epoch);
  EXPECT_EQ(ReadBe(p, 36, 8), m.seq);
  EXPECT_EQ(p[44], 1);  // index
  EXPECT_EQ(p[45], 0);
  EXPECT_EQ(p[46], 0);
  EXPECT_EQ(p[47], 0);  // reserved
  EXPECT_EQ(ReadBe(p, 48, 8), m.prev_tx_seq);
  EXPECT_EQ(p[48], 0x80);
  EXPECT_EQ(p[55], 0x01);

  // echo_rx[0] at 56: kernel ns -2 is two's complement big-endian.
  for (size_t i = 56; i < 63; ++i) EXPECT_EQ(p[i], 0xFF) << i;
  EXPECT_EQ(p[63], 0xFE);
  EXPECT_EQ(p[64], static_cast<uint8_t>(StampSource::kSocketSoftware));
  EXPECT_EQ(ReadBe(p, 65, 8), static_cast<uint64_t>(m.echo_rx[0].user.ns));
  EXPECT_EQ(p[73], static_cast<uint8_t>(StampSource::kUserspace));
  // echo_rx[1] at 74.
  EXPECT_EQ(ReadBe(p, 74, 8), 0x8000000000000000ull);
  EXPECT_EQ(p[82], static_cast<uint8_t>(StampSource::kHardware));
  EXPECT_EQ(ReadBe(p, 83, 8), 0x7FFFFFFFFFFFFFFFull);
  EXPECT_EQ(p[91], static_cast<uint8_t>(StampSource::kUserspace));
  // prev_tx[0] at 92.
  EXPECT_EQ(ReadBe(p, 92, 8), static_cast<uint64_t>(m.prev_tx[0].kernel.ns));
  EXPECT_EQ(p[100], static_cast<uint8_t>(StampSource::kBpfTc));
  EXPECT_EQ(ReadBe(p, 101, 8), 0u);
  EXPECT_EQ(p[109], static_cast<uint8_t>(StampSource::kNone));
  // prev_tx[1] at 110.
  EXPECT_EQ(ReadBe(p, 110, 8), static_cast<uint64_t>(m.prev_tx[1].kernel.ns));
  EXPECT_EQ(p[118], static_cast<uint8_t>(StampSource::kSocketSched));
  EXPECT_EQ(ReadBe(p, 119, 8), static_cast<uint64_t>(int64_t{-42}));
  EXPECT_EQ(p[127], static_cast<uint8_t>(StampSource::kUserspace));

  // MAC at 128: keyed BLAKE2b-128 of bytes [0,128), computed here directly.
  ASSERT_GE(sodium_init(), 0);
  const ClusterKey key = TestKey();
  uint8_t mac[16];
  ASSERT_EQ(crypto_generichash(mac, sizeof mac, p.data(), 128, key.data(), key.size()), 0);
  for (size_t i = 0; i < 16; ++i) EXPECT_EQ(p[128 + i], mac[i]) << "mac byte " << i;
}

TEST(ProbeCodecConstants, MatchTheDocumentedFormat) {
  EXPECT_EQ(kProbeMagic, 0x43484C4Bu);
  EXPECT_EQ(kProbeVersion, 1);
  EXPECT_EQ(kProbeWireSize, 144u);
  EXPECT_EQ(kProbeMacSize, 16u);
  EXPECT_EQ(kClusterKeySize, 32u);
}

// --------------------------------------------------------------- rejections

TEST_F(ProbeCodecTest, RejectsWrongLengths) {
  const Packet good = EncodeWith(codec_, Distinctive(MessageType::kForward));
  std::vector<uint8_t> buf(good.begin(), good.end());
  buf.push_back(0);  // a valid packet with one trailing byte
  ProbeMessage out = Sentinel();
  EXPECT_EQ(codec_.Decode(buf, &out), DecodeResult::kBadLength);
  for (size_t n : {size_t{0}, size_t{1}, size_t{127}, size_t{128}, size_t{143}}) {
    EXPECT_EQ(codec_.Decode(std::span<const uint8_t>(good.data(), n), &out),
              DecodeResult::kBadLength)
        << n;
  }
  std::vector<uint8_t> big(9000, 0);
  std::copy(good.begin(), good.end(), big.begin());
  EXPECT_EQ(codec_.Decode(big, &out), DecodeResult::kBadLength);
  ExpectUntouched(out);
}

TEST_F(ProbeCodecTest, RejectsWrongMagic) {
  Packet p = EncodeWith(codec_, Distinctive(MessageType::kForward));
  p[3] = 'X';
  EXPECT_EQ(DecodeBytes(p), DecodeResult::kBadMagic);
  // Also with a valid MAC over the wrong magic: the magic is checked first.
  EXPECT_EQ(DecodeForged(p), DecodeResult::kBadMagic);
}

TEST_F(ProbeCodecTest, RejectsOtherVersions) {
  for (uint8_t v : {0, 2, 255}) {
    Packet p = EncodeWith(codec_, Distinctive(MessageType::kForward));
    p[4] = v;
    EXPECT_EQ(DecodeForged(p), DecodeResult::kBadVersion) << int(v);
  }
}

TEST_F(ProbeCodecTest, RejectsUnknownTypes) {
  for (uint8_t t : {0, 4, 6, 128, 255}) {
    Packet p = EncodeWith(codec_, Distinctive(MessageType::kForward));
    p[5] = t;
    EXPECT_EQ(DecodeForged(p), DecodeResult::kUnknownType) << int(t);
  }
}

// ClockRemap (type 5): the header, the remap's three i64 where the stamps
// go, zeros elsewhere (docs/protocol.md "ClockRemap").
ProbeMessage Remap() {
  ProbeMessage m;
  m.type = MessageType::kClockRemap;
  m.sender_node = 0x11223344;
  m.receiver_node = 0x55667788;
  m.sender_epoch = 0x0102030405060708ull;
  m.seq = 3;
  m.remap = {1'796'526'740'208'968'216, -9'123'456'789, -46'530'000'001};
  return m;
}

TEST_F(ProbeCodecTest, ClockRemapRoundTripsAtItsDocumentedOffsets) {
  const Packet p = EncodeWith(codec_, Remap());
  EXPECT_EQ(p[5], 5);
  EXPECT_EQ(ReadBe(p, 48, 8), 0u) << "no prev_tx_seq";
  EXPECT_EQ(static_cast<int64_t>(ReadBe(p, 56, 8)), Remap().remap.at_fit_ns);
  EXPECT_EQ(static_cast<int64_t>(ReadBe(p, 64, 8)), Remap().remap.rate_before_fine);
  EXPECT_EQ(static_cast<int64_t>(ReadBe(p, 72, 8)), Remap().remap.rate_after_fine);
  for (size_t i = 80; i < 128; ++i) EXPECT_EQ(p[i], 0) << i;
  ProbeMessage out;
  ASSERT_EQ(codec_.Decode(p, &out), DecodeResult::kOk);
  EXPECT_EQ(out.type, MessageType::kClockRemap);
  EXPECT_EQ(out.sender_node, Remap().sender_node);
  EXPECT_EQ(out.seq, 3u);
  EXPECT_EQ(out.remap, Remap().remap);
}

TEST_F(ProbeCodecTest, ClockRemapWithAnythingElseIsRefused) {
  const Packet good = EncodeWith(codec_, Remap());
  ASSERT_EQ(DecodeForged(good), DecodeResult::kOk);
  auto refused = [&](const std::string& what, auto tamper) {
    Packet p = good;
    tamper(p);
    EXPECT_EQ(DecodeForged(p), DecodeResult::kBadField) << what;
  };
  refused("a flag", [](Packet& p) { p[7] = kFlagClockStepped; });
  refused("index 1", [](Packet& p) { p[44] = 1; });
  refused("a prev_tx_seq", [](Packet& p) { p[55] = 1; });
  refused("a byte after the remap", [](Packet& p) { p[80] = 1; });
  refused("the last byte before the MAC", [](Packet& p) { p[127] = 1; });
  refused("seq 0", [](Packet& p) { std::memset(p.data() + 36, 0, 8); });
  // Rates past 10 %: 1e14 + 1 fine is 0x5AF3107A4001.
  refused("a rate before past 10 %", [](Packet& p) {
    const uint8_t r[8] = {0x00, 0x00, 0x5A, 0xF3, 0x10, 0x7A, 0x40, 0x01};
    std::memcpy(p.data() + 64, r, 8);
  });
  refused("a rate after past -10 %", [](Packet& p) { std::memset(p.data() + 72, 0x80, 8); });
}

// The pilot: the first 16 header bytes of a probe, type 4, no MAC.
TEST_F(ProbeCodecTest, PilotIsSixteenHeaderBytesOfTypeFour) {
  std::array<uint8_t, kPilotWireSize> pilot{};
  codec_.EncodePilot(0x01020304, pilot);
  const std::array<uint8_t, kPilotWireSize> want = {0x43, 0x48, 0x4C, 0x4B, kProbeVersion, 4,    0,    0,
                                                    0x0A, 0x0B, 0x0C, 0x0D, 0x01,          0x02, 0x03, 0x04};
  EXPECT_EQ(pilot, want);
  uint32_t sender = 0;
  ASSERT_TRUE(codec_.DecodePilot(pilot, &sender));
  EXPECT_EQ(sender, 0x01020304u);
  // Not a probe message: the decoder refuses it for its length.
  EXPECT_EQ(codec_.Decode(pilot, nullptr), DecodeResult::kBadLength);
}

TEST_F(ProbeCodecTest, OnlyAPilotOfThisClusterIsOne) {
  std::array<uint8_t, kPilotWireSize> pilot{};
  codec_.EncodePilot(7, pilot);
  uint32_t sender = 0;
  ProbeCodec other(kCluster + 1, TestKey());
  EXPECT_FALSE(other.DecodePilot(pilot, &sender));
  for (size_t byte : {0, 3, 4, 5, 6, 7, 8, 11}) {  // magic, version, type, flags, cluster
    std::array<uint8_t, kPilotWireSize> bad = pilot;
    bad[byte] ^= 0x01;
    EXPECT_FALSE(codec_.DecodePilot(bad, &sender)) << "byte " << byte;
  }
  std::vector<uint8_t> longer(pilot.begin(), pilot.end());
  longer.push_back(0);
  EXPECT_FALSE(codec_.DecodePilot(longer, &sender));
  EXPECT_FALSE(codec_.DecodePilot(std::span<const uint8_t>(pilot.data(), 15), &sender));
  // A whole probe message is never a pilot, even one of type 4.
  Packet p = EncodeWith(codec_, Distinctive(MessageType::kForward));
  p[5] = kPilotType;
  EXPECT_FALSE(codec_.DecodePilot(p, &sender));
  EXPECT_EQ(DecodeForged(p), DecodeResult::kUnknownType);
}

TEST_F(ProbeCodecTest, RejectsAnotherClustersPacket) {
  ProbeCodec other(kCluster + 1, TestKey());  // same key, other cluster id
  const Packet p = EncodeWith(other, Distinctive(MessageType::kForward));
  EXPECT_EQ(DecodeBytes(p), DecodeResult::kWrongCluster);
  ProbeMessage out;
  EXPECT_EQ(other.Decode(p, &out), DecodeResult::kOk);
  EXPECT_EQ(other.Decode(EncodeWith(codec_, Distinctive(MessageType::kForward)), &out),
            DecodeResult::kWrongCluster);
}

TEST_F(ProbeCodecTest, RejectsAPacketUnderAnotherKey) {
  ProbeCodec stranger(kCluster, OtherKey());
  EXPECT_EQ(DecodeBytes(EncodeWith(stranger, Distinctive(MessageType::kReverse))),
            DecodeResult::kBadMac);
  ProbeMessage out;
  EXPECT_EQ(stranger.Decode(EncodeWith(codec_, Distinctive(MessageType::kReverse)), &out),
            DecodeResult::kBadMac);
}

// What a change at `off` is caught by: header fields checked before the MAC
// are caught by their own check, everything else by the MAC.
DecodeResult ExpectedForTamperAt(size_t off) {
  if (off < 4) return DecodeResult::kBadMagic;
  if (off == 4) return DecodeResult::kBadVersion;
  if (off >= 8 && off < 12) return DecodeResult::kWrongCluster;
  return DecodeResult::kBadMac;
}

TEST_F(ProbeCodecTest, EveryBitOfTheAuthenticatedRegionIsCovered) {
  const Packet good = EncodeWith(codec_, Distinctive(MessageType::kReverse));
  int bad_mac = 0;
  for (size_t off = 0; off < 128; ++off) {
    for (int bit = 0; bit < 8; ++bit) {
      Packet p = good;
      p[off] ^= static_cast<uint8_t>(1u << bit);
      DecodeResult want = ExpectedForTamperAt(off);
      if (off == 5) {
        // Type 2 with one bit flipped: 3 is a known type (then the MAC
        // catches it), anything else is unknown.
        want = (p[5] >= 1 && p[5] <= 3) ? DecodeResult::kBadMac : DecodeResult::kUnknownType;
      }
      EXPECT_EQ(DecodeBytes(p), want) << "offset " << off << " bit " << bit;
      if (want == DecodeResult::kBadMac) ++bad_mac;
    }
  }
  // 128 bytes minus magic, version and cluster id (9 bytes), plus one
  // type-byte flip (2 -> 3) that stays a known type.
  EXPECT_EQ(bad_mac, (128 - 9) * 8 - 8 + 1);
}

TEST_F(ProbeCodecTest, EveryMacByteIsChecked) {
  const Packet good = EncodeWith(codec_, Distinctive(MessageType::kFollowUp));
  for (size_t off = 128; off < 144; ++off) {
    for (uint8_t mask : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xFF}}) {
      Packet p = good;
      p[off] ^= mask;
      EXPECT_EQ(DecodeBytes(p), DecodeResult::kBadMac) << "offset " << off;
    }
  }
  Packet zero_mac = good;
  std::fill(zero_mac.begin() + 128, zero_mac.end(), 0);
  EXPECT_EQ(DecodeBytes(zero_mac), DecodeResult::kBadMac);
}

// ----------------------------------------------------- field checks (forged)

TEST_F(ProbeCodecTest, SealForTestProducesAnAuthenticPacket) {
  Packet p = EncodeWith(codec_, Distinctive(MessageType::kForward));
  p[36] ^= 0x55;  // change seq
  EXPECT_EQ(DecodeBytes(p), DecodeResult::kBadMac);
  ProbeMessage out;
  SealForTest(p, TestKey());
  ASSERT_EQ(codec_.Decode(p, &out), DecodeResult::kOk);
  EXPECT_EQ(out.seq, std::numeric_limits<uint64_t>::max() ^ (uint64_t{0x55} << 56));
}

TEST_F(ProbeCodecTest, RejectsIndexAboveOne) {
  for (uint8_t idx : {2, 3, 128, 255}) {
    Packet p = EncodeWith(codec_, Distinctive(MessageType::kForward));
    p[44] = idx;
    EXPECT_EQ(DecodeForged(p), DecodeResult::kBadField) << int(idx);
  }
}

TEST_F(ProbeCodecTest, RejectsNonZeroReservedBytes) {
  for (size_t off : {45, 46, 47}) {
    Packet p = EncodeWith(codec_, Distinctive(MessageType::kForward));
    p[off] = 0x01;
    EXPECT_EQ(DecodeForged(p), DecodeResult::kBadField) << off;
  }
}

TEST_F(ProbeCodecTest, RejectsUnknownFlagBits) {
  for (int bit = 4; bit < 16; ++bit) {  // bit 3 is kFlagClockStepped
    Packet p = EncodeWith(codec_, Distinctive(MessageType::kForward));
    const uint16_t flags = static_cast<uint16_t>(kFlagHasEchoRx | (1u << bit));
    p[6] = static_cast<uint8_t>(flags >> 8);
    p[7] = static_cast<uint8_t>(flags);
    EXPECT_EQ(DecodeForged(p), DecodeResult::kBadField) << bit;
  }
}

// Offsets of the source byte of each stamp: kernel at +8, user at +17 of each
// 18-byte echoed stamp starting at 56, 74, 92, 110.
constexpr size_t kStampStarts[] = {56, 74, 92, 110};

TEST_F(ProbeCodecTest, RejectsOutOfRangeStampSources) {
  for (size_t start : kStampStarts) {
    for (size_t src_off : {start + 8, start + 17}) {
      for (uint8_t v : {uint8_t{kNumStampSources}, uint8_t{8}, uint8_t{255}}) {
        Packet p = EncodeWith(codec_, Distinctive(MessageType::kReverse));
        p[src_off] = v;
        EXPECT_EQ(DecodeForged(p), DecodeResult::kBadField) << src_off << " " << int(v);
      }
    }
  }
}

TEST_F(ProbeCodecTest, RejectsAUserspaceSourceInAKernelSlot) {
  for (size_t start : kStampStarts) {
    Packet p = EncodeWith(codec_, Distinctive(MessageType::kReverse));
    p[start + 8] = static_cast<uint8_t>(StampSource::kUserspace);
    EXPECT_EQ(DecodeForged(p), DecodeResult::kBadField) << start;
  }
}

TEST_F(ProbeCodecTest, RejectsAKernelSourceInAUserSlot) {
  for (size_t start : kStampStarts) {
    for (int s = 2; s < kNumStampSources; ++s) {
      Packet p = EncodeWith(codec_, Distinctive(MessageType::kReverse));
      p[start + 17] = static_cast<uint8_t>(s);
      EXPECT_EQ(DecodeForged(p), DecodeResult::kBadField) << start << " source " << s;
    }
  }
}

TEST_F(ProbeCodecTest, RejectsAnAbsentStampWithATime) {
  // prev_tx[0].user is kNone with ns 0 in Distinctive(); give it a time.
  Packet p = EncodeWith(codec_, Distinctive(MessageType::kReverse));
  p[108] = 0x01;  // last byte of prev_tx[0].user.ns (101..108)
  EXPECT_EQ(DecodeForged(p), DecodeResult::kBadField);

  ProbeMessage m = Distinctive(MessageType::kReverse);
  m.echo_rx[1].kernel = {5, StampSource::kNone};  // the encoder does not validate
  EXPECT_EQ(DecodeBytes(EncodeWith(codec_, m)), DecodeResult::kBadField);
}

TEST_F(ProbeCodecTest, AcceptsEveryValidSourceInItsSlot) {
  // The positive side of the checks above, so they are not vacuous.
  for (int s = 0; s < kNumStampSources; ++s) {
    const auto src = static_cast<StampSource>(s);
    ProbeMessage m = Distinctive(MessageType::kReverse);
    if (src != StampSource::kUserspace) {
      m.echo_rx[0].kernel = {src == StampSource::kNone ? 0 : 123, src};
      ProbeMessage out;
      ASSERT_EQ(codec_.Decode(EncodeWith(codec_, m), &out), DecodeResult::kOk) << s;
      EXPECT_EQ(out.echo_rx[0].kernel.source, src);
    }
  }
  ProbeMessage m = Distinctive(MessageType::kReverse);
  m.prev_tx[1].user = {0, StampSource::kNone};
  EXPECT_EQ(DecodeBytes(EncodeWith(codec_, m)), DecodeResult::kOk);
}

TEST_F(ProbeCodecTest, InvalidIndexFromTheEncoderIsRefusedAtTheReceiver) {
  ProbeMessage m = Distinctive(MessageType::kForward);
  m.index = 2;
  EXPECT_EQ(DecodeBytes(EncodeWith(codec_, m)), DecodeResult::kBadField);
}

// -------------------------------------------------------------------- stats

TEST(DecodeStatsTest, CountsByReasonAndSumsRejections) {
  DecodeStats s;
  EXPECT_EQ(s.rejected(), 0u);
  s.Count(DecodeResult::kOk);
  s.Count(DecodeResult::kOk);
  s.Count(DecodeResult::kOk);
  EXPECT_EQ(s.rejected(), 0u);
  s.Count(DecodeResult::kBadMac);
  s.Count(DecodeResult::kBadMac);
  s.Count(DecodeResult::kBadLength);
  s.Count(DecodeResult::kBadField);
  s.Count(DecodeResult::kWrongCluster);
  EXPECT_EQ(s.counts[static_cast<size_t>(DecodeResult::kOk)], 3u);
  EXPECT_EQ(s.counts[static_cast<size_t>(DecodeResult::kBadMac)], 2u);
  EXPECT_EQ(s.counts[static_cast<size_t>(DecodeResult::kBadLength)], 1u);
  EXPECT_EQ(s.counts[static_cast<size_t>(DecodeResult::kBadMagic)], 0u);
  EXPECT_EQ(s.rejected(), 5u);
}

TEST_F(ProbeCodecTest, StatsOfAMixedStream) {
  DecodeStats s;
  const Packet good = EncodeWith(codec_, Distinctive(MessageType::kForward));
  Packet bad_mac = good;
  bad_mac[100] ^= 1;
  Packet bad_magic = good;
  bad_magic[0] = 0;
  for (int i = 0; i < 10; ++i) s.Count(codec_.Decode(good, nullptr));
  for (int i = 0; i < 4; ++i) s.Count(codec_.Decode(bad_mac, nullptr));
  s.Count(codec_.Decode(bad_magic, nullptr));
  s.Count(codec_.Decode(std::span<const uint8_t>(good.data(), 10), nullptr));
  EXPECT_EQ(s.counts[static_cast<size_t>(DecodeResult::kOk)], 10u);
  EXPECT_EQ(s.counts[static_cast<size_t>(DecodeResult::kBadMac)], 4u);
  EXPECT_EQ(s.counts[static_cast<size_t>(DecodeResult::kBadMagic)], 1u);
  EXPECT_EQ(s.counts[static_cast<size_t>(DecodeResult::kBadLength)], 1u);
  EXPECT_EQ(s.rejected(), 6u);
}

TEST(DecodeResultNameTest, SnakeCaseNames) {
  EXPECT_EQ(DecodeResultName(DecodeResult::kOk), "ok");
  EXPECT_EQ(DecodeResultName(DecodeResult::kBadLength), "bad_length");
  EXPECT_EQ(DecodeResultName(DecodeResult::kBadMagic), "bad_magic");
  EXPECT_EQ(DecodeResultName(DecodeResult::kBadVersion), "bad_version");
  EXPECT_EQ(DecodeResultName(DecodeResult::kUnknownType), "unknown_type");
  EXPECT_EQ(DecodeResultName(DecodeResult::kWrongCluster), "wrong_cluster");
  EXPECT_EQ(DecodeResultName(DecodeResult::kBadMac), "bad_mac");
  EXPECT_EQ(DecodeResultName(DecodeResult::kBadField), "bad_field");
}

// --------------------------------------------------------------------- keys

constexpr char kHexKey[] = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

ClusterKey CountingKey() {
  ClusterKey k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(i);
  return k;
}

TEST(ClusterKeyHexTest, ParsesEitherCase) {
  ClusterKey k{};
  std::string err;
  ASSERT_TRUE(ParseClusterKeyHex(kHexKey, &k, &err)) << err;
  EXPECT_EQ(k, CountingKey());
  std::string upper = kHexKey;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  ClusterKey k2{};
  ASSERT_TRUE(ParseClusterKeyHex(upper, &k2, &err)) << err;
  EXPECT_EQ(k2, CountingKey());
  ClusterKey k3{};
  ASSERT_TRUE(ParseClusterKeyHex(std::string(64, 'F'), &k3, &err)) << err;
  for (uint8_t b : k3) EXPECT_EQ(b, 0xFF);
}

TEST(ClusterKeyHexTest, RefusesWrongLengthsWithAClearMessage) {
  ClusterKey k = CountingKey();
  std::string err;
  for (std::string s : {std::string(), std::string(kHexKey).substr(0, 63),
                        std::string(kHexKey) + "0", std::string(kHexKey) + "\n",
                        " " + std::string(kHexKey), std::string(32, 'a')}) {
    err.clear();
    EXPECT_FALSE(ParseClusterKeyHex(s, &k, &err)) << s;
    EXPECT_NE(err.find("64 hex"), std::string::npos) << err;
  }
  EXPECT_EQ(k, CountingKey());  // untouched
}

TEST(ClusterKeyHexTest, RefusesNonHexCharacters) {
  ClusterKey k{};
  std::string err;
  std::string s = kHexKey;
  s[10] = 'g';
  EXPECT_FALSE(ParseClusterKeyHex(s, &k, &err));
  EXPECT_NE(err.find("position 10"), std::string::npos) << err;
  s = kHexKey;
  s[0] = 'x';  // "0x..." prefix style
  EXPECT_FALSE(ParseClusterKeyHex(s, &k, &err));
  EXPECT_NE(err.find("non-hex"), std::string::npos) << err;
}

TEST(ClusterKeyHexTest, RefusesAnAllZeroKey) {
  ClusterKey k = CountingKey();
  std::string err;
  EXPECT_FALSE(ParseClusterKeyHex(std::string(64, '0'), &k, &err));
  EXPECT_NE(err.find("all zero"), std::string::npos) << err;
  EXPECT_EQ(k, CountingKey());
}

class ClusterKeyFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/probe_codec_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::permissions(dir_, std::filesystem::perms::owner_all, ec);
    std::filesystem::remove_all(dir_, ec);
  }
  // A key file as it should be: readable by its owner only (mode 0600).
  std::string Write(const std::string& name, const std::string& bytes, mode_t mode = 0600) {
    const std::string path = dir_ + "/" + name;
    {
      std::ofstream f(path, std::ios::binary | std::ios::trunc);
      f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    EXPECT_EQ(::chmod(path.c_str(), mode), 0) << path;
    return path;
  }
  // Loads and expects failure; returns the message.
  std::string LoadError(const std::string& path) {
    ClusterKey k = TestKey();
    std::string err;
    EXPECT_FALSE(LoadClusterKeyFile(path, &k, &err)) << path;
    EXPECT_EQ(k, TestKey()) << "key written on failure";
    EXPECT_FALSE(err.empty());
    return err;
  }
  std::string dir_;
};

TEST_F(ClusterKeyFileTest, LoadsHexWithSurroundingWhitespace) {
  for (std::string content : {std::string(kHexKey), std::string(kHexKey) + "\n",
                              "  \t" + std::string(kHexKey) + "\r\n\n"}) {
    ClusterKey k{};
    std::string err;
    ASSERT_TRUE(LoadClusterKeyFile(Write("hex.key", content), &k, &err)) << err;
    EXPECT_EQ(k, CountingKey());
  }
}

TEST_F(ClusterKeyFileTest, LoadsThirtyTwoRawBytes) {
  // Raw bytes including whitespace and NUL values: none may be trimmed.
  std::string raw(32, '\0');
  for (size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<char>(i);
  raw[0] = '\n';
  raw[31] = ' ';
  ClusterKey k{};
  std::string err;
  ASSERT_TRUE(LoadClusterKeyFile(Write("raw.key", raw), &k, &err)) << err;
  ClusterKey want = CountingKey();
  want[0] = '\n';
  want[31] = ' ';
  EXPECT_EQ(k, want);
}

TEST_F(ClusterKeyFileTest, MissingFile) {
  const std::string path = dir_ + "/nope.key";
  const std::string err = LoadError(path);
  EXPECT_NE(err.find(path), std::string::npos) << err;
  EXPECT_NE(err.find("No such file"), std::string::npos) << err;
}

TEST_F(ClusterKeyFileTest, DirectoryIsNotAKeyFile) {
  const std::string err = LoadError(dir_);
  EXPECT_NE(err.find("not a regular file"), std::string::npos) << err;
}

TEST_F(ClusterKeyFileTest, ReadErrorIsReported) {
  // Opens as a regular file but every read at offset 0 fails with EIO, even
  // for root: the read-error path, whatever user runs the test.
  const std::string err = LoadError("/proc/self/mem");
  EXPECT_NE(err.find("cannot read"), std::string::npos) << err;
}

TEST_F(ClusterKeyFileTest, WrongSizes) {
  for (const std::string& content :
       {std::string(31, 'k'), std::string(33, 'k'), std::string(kHexKey).substr(0, 62) + "\n",
        std::string(kHexKey) + std::string(kHexKey), std::string(kHexKey) + " 00"}) {
    const std::string err = LoadError(Write("size.key", content));
    EXPECT_NE(err.find("wrong size"), std::string::npos) << err;
    EXPECT_NE(err.find("32 raw bytes"), std::string::npos) << err;
  }
}

TEST_F(ClusterKeyFileTest, EmptyOrWhitespaceOnly) {
  EXPECT_NE(LoadError(Write("empty.key", "")).find("empty"), std::string::npos);
  EXPECT_NE(LoadError(Write("ws.key", "  \n\n")).find("empty"), std::string::npos);
}

TEST_F(ClusterKeyFileTest, TooLarge) {
  EXPECT_NE(LoadError(Write("big.key", std::string(100000, 'a'))).find("too large"),
            std::string::npos);
}

TEST_F(ClusterKeyFileTest, NonHexContent) {
  std::string s = kHexKey;
  s[63] = 'z';
  const std::string err = LoadError(Write("bad.key", s + "\n"));
  EXPECT_NE(err.find("non-hex"), std::string::npos) << err;
  EXPECT_NE(err.find("bad.key"), std::string::npos) << err;
}

TEST_F(ClusterKeyFileTest, AllZeroKeysAreRefused) {
  EXPECT_NE(LoadError(Write("zero.raw", std::string(32, '\0'))).find("all-zero"),
            std::string::npos);
  EXPECT_NE(LoadError(Write("zero.hex", std::string(64, '0') + "\n")).find("all zero"),
            std::string::npos);
}


// ------------------------------------------------- key file permissions

TEST_F(ClusterKeyFileTest, ReadableOrWritableByGroupOrOthersIsRefusedWithTheFix) {
  for (mode_t mode : {0640, 0620, 0604, 0602, 0644, 0666}) {
    const std::string path = Write("loose.key", std::string(kHexKey) + "\n", mode);
    const std::string err = LoadError(path);
    EXPECT_NE(err.find("chmod 600 '" + path + "'"), std::string::npos) << std::oct << mode << ": " << err;
    EXPECT_NE(err.find(mode & 060 ? "its group" : "others"), std::string::npos) << err;
  }
  for (mode_t mode : {0600, 0400, 0700}) {
    ClusterKey k{};
    std::string err;
    EXPECT_TRUE(LoadClusterKeyFile(Write("tight.key", kHexKey, mode), &k, &err)) << std::oct << mode << ": " << err;
    EXPECT_EQ(k, CountingKey());
  }
}

TEST_F(ClusterKeyFileTest, FileOfAnotherUserIsRefused) {
  if (::geteuid() != 0) {
    CHRONOLINK_SKIP_OR_FAIL_OUTSIDE_CI("giving a file to another user needs root");
  }
  const std::string path = Write("theirs.key", kHexKey);
  ASSERT_EQ(::chown(path.c_str(), 65534, 65534), 0);
  const std::string err = LoadError(path);
  EXPECT_NE(err.find("owned by uid 65534"), std::string::npos) << err;
  EXPECT_NE(err.find("chmod 600"), std::string::npos) << err;
}

// A root-owned 0400 file with an ACL entry for the agent's user is how
// systemd's LoadCredential= hands a key to a service user: accepted. An ACL
// that lets anyone else read is refused like a loose mode.
TEST_F(ClusterKeyFileTest, AclForTheAgentIsFineAnyOtherIsRefused) {
  auto acl = [](std::vector<std::array<uint32_t, 3>> entries) {  // {tag, perm, id}
    std::string x = {2, 0, 0, 0};
    for (const auto& [tag, perm, id] : entries) {
      for (int i = 0; i < 2; ++i) x.push_back(static_cast<char>(tag >> (8 * i)));
      for (int i = 0; i < 2; ++i) x.push_back(static_cast<char>(perm >> (8 * i)));
      for (int i = 0; i < 4; ++i) x.push_back(static_cast<char>(id >> (8 * i)));
    }
    return x;
  };
  const uint32_t self = ::geteuid();
  const uint32_t any = 0xffffffffu;
  const std::string for_agent = acl({{1, 4, any}, {2, 4, self}, {4, 0, any}, {0x10, 4, any}, {0x20, 0, any}});
  const std::string for_other = acl({{1, 4, any}, {2, 4, 4242}, {4, 0, any}, {0x10, 4, any}, {0x20, 0, any}});
  const std::string masked = acl({{1, 4, any}, {2, 4, 4242}, {4, 0, any}, {0x10, 0, any}, {0x20, 0, any}});
  const std::string group = acl({{1, 4, any}, {4, 4, any}, {0x10, 4, any}, {0x20, 0, any}});
  // The pure rule first.
  EXPECT_EQ(KeyFileForeignAccess(0440, for_agent, self), "");
  EXPECT_EQ(KeyFileForeignAccess(0400, masked, self), "");  // the mask takes 4242's read away
  EXPECT_EQ(KeyFileForeignAccess(0440, for_other, self), "uid 4242 (ACL)");
  EXPECT_EQ(KeyFileForeignAccess(0440, group, self), "its group (ACL)");
  EXPECT_NE(KeyFileForeignAccess(0400, "garbage", self), "");
  EXPECT_EQ(KeyFileForeignAccess(0400, "", self), "");
  EXPECT_EQ(KeyFileForeignAccess(0440, "", self), "its group (mode 0440)");
  // Then on a real file, through the kernel's ACL.
  const std::string path = Write("acl.key", kHexKey, 0400);
  if (::setxattr(path.c_str(), "system.posix_acl_access", for_agent.data(), for_agent.size(), 0) != 0) {
    CHRONOLINK_SKIP_OR_FAIL_OUTSIDE_CI(std::string("no POSIX ACLs on this filesystem: ") + std::strerror(errno));
  }
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0440u) << "the group bits show the ACL mask";
  ClusterKey k{};
  std::string err;
  EXPECT_TRUE(LoadClusterKeyFile(path, &k, &err)) << err;
  ASSERT_EQ(::setxattr(path.c_str(), "system.posix_acl_access", for_other.data(), for_other.size(), 0), 0);
  err = LoadError(path);
  EXPECT_NE(err.find("uid 4242 (ACL)"), std::string::npos) << err;
  EXPECT_NE(err.find("setfacl -b"), std::string::npos) << err;
}

// --------------------------------------------------------- key wiping

// The key type wipes its bytes when it goes: the storage of a destroyed key
// holds zeros (a plain std::array would leave the key there).
TEST(ClusterKeyTest, DestroyedKeyLeavesZeros) {
  alignas(ClusterKey) unsigned char storage[sizeof(ClusterKey)];
  auto* key = new (storage) ClusterKey(CountingKey());
  (*key)[0] = 0xAB;
  ASSERT_EQ(storage[0], 0xAB);
  key->~ClusterKey();
  for (size_t i = 0; i < sizeof(storage); ++i) EXPECT_EQ(storage[i], 0) << "byte " << i;
}

// Still used as the std::array it was: aggregate, comparable, indexable.
TEST(ClusterKeyTest, IsADropInArray) {
  ClusterKey a{};
  for (uint8_t b : a) EXPECT_EQ(b, 0);
  ClusterKey b = CountingKey();
  a = b;
  EXPECT_EQ(a, b);
  a[3] ^= 1;
  EXPECT_NE(a, b);
  const std::array<uint8_t, kClusterKeySize>& as_array = b;
  EXPECT_EQ(as_array.size(), 32u);
  EXPECT_EQ(sizeof(ClusterKey), kClusterKeySize);
}

}  // namespace
}  // namespace chronolink
