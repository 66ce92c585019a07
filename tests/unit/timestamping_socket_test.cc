// Real SO_TIMESTAMPING on a loopback socket: RX software stamps, TX_SCHED and
// TX_SOFTWARE stamps from the error queue matched by OPT_ID.
#include "agent/capture/timestamping_socket.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <array>
#include <map>
#include <vector>

#include "clock/clock_reader.h"

namespace chronolink {
namespace {

TEST(TimestampingSocket, StampsEveryDatagramInBothDirections) {
  TimestampingSocket s;
  std::string error;
  ASSERT_TRUE(s.Open("127.0.0.1", 0, &error)) << error;
  s.SetAlwaysSched(true);
  UdpEndpoint self;
  ASSERT_TRUE(UdpEndpoint::Parse("127.0.0.1", s.bound_port(), &self, &error));

  const std::array<uint8_t, 16> payload{};
  // The kernel switches RX software stamping on through deferred work after
  // the first socket asks for it, so the very first datagrams may come
  // unstamped: warm up until one arrives stamped (the agent simply counts
  // such early probes as lacking kernel stamps).
  uint32_t next_id = 0;
  bool stamped = false;
  const int64_t warm_deadline = ReadClockNs(CLOCK_MONOTONIC) + 2'000'000'000;
  while (!stamped && ReadClockNs(CLOCK_MONOTONIC) < warm_deadline) {
    const SendResult w = s.Send(self, payload);
    ASSERT_TRUE(w.ok);
    EXPECT_EQ(w.op_id, next_id++);  // the kernel numbers datagrams from 0
    pollfd fd{s.fd(), POLLIN, 0};
    poll(&fd, 1, 10);
    s.ReceiveAll([&](std::span<const uint8_t>, const ReceivedDatagram& d) {
      stamped = stamped || d.kernel_rx_real_ns > 0;
    });
  }
  ASSERT_TRUE(stamped) << "no RX software stamp within 2 s";
  s.DrainTxStamps([](const TxStampEvent&) {});

  std::vector<SendResult> sent;
  for (int i = 0; i < 3; ++i) sent.push_back(s.Send(self, payload));
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(sent[i].ok);
    EXPECT_EQ(sent[i].op_id, next_id + static_cast<uint32_t>(i));
  }

  std::map<uint32_t, std::map<StampSource, int64_t>> tx;
  int received = 0;
  const int64_t deadline = ReadClockNs(CLOCK_MONOTONIC) + 2'000'000'000;
  const uint32_t last = next_id + 2;
  while ((received < 3 || tx.count(last) == 0 || tx[last].size() < 2) &&
         ReadClockNs(CLOCK_MONOTONIC) < deadline) {
    pollfd fd{s.fd(), POLLIN, 0};
    poll(&fd, 1, 10);
    s.DrainTxStamps([&](const TxStampEvent& ev) { tx[ev.op_id][ev.source] = ev.real_ns; });
    s.ReceiveAll([&](std::span<const uint8_t> bytes, const ReceivedDatagram& d) {
      ++received;
      EXPECT_EQ(bytes.size(), payload.size());
      EXPECT_EQ(d.length, payload.size());
      EXPECT_GT(d.kernel_rx_real_ns, 0);
      EXPECT_GE(d.user_rx_real_ns, d.kernel_rx_real_ns);
    });
  }
  EXPECT_EQ(received, 3);
  for (int i = 0; i < 3; ++i) {
    auto& st = tx[next_id + static_cast<uint32_t>(i)];
    ASSERT_TRUE(st.count(StampSource::kSocketSched)) << i;
    ASSERT_TRUE(st.count(StampSource::kSocketSoftware)) << i;
    EXPECT_LE(sent[i].user_tx_real_ns, st[StampSource::kSocketSched]);
    EXPECT_LE(st[StampSource::kSocketSched], st[StampSource::kSocketSoftware]);
  }
}

// Collects TX stamps and datagrams until `done` holds or 2 s pass.
template <typename Done>
void Collect(TimestampingSocket& s, std::map<uint32_t, std::map<StampSource, int64_t>>* tx, int* received,
             Done done) {
  const int64_t deadline = ReadClockNs(CLOCK_MONOTONIC) + 2'000'000'000;
  while (!done() && ReadClockNs(CLOCK_MONOTONIC) < deadline) {
    pollfd fd{s.fd(), POLLIN, 0};
    poll(&fd, 1, 10);
    s.DrainTxStamps([&](const TxStampEvent& ev) { (*tx)[ev.op_id][ev.source] = ev.real_ns; });
    *received += s.ReceiveAll([](std::span<const uint8_t>, const ReceivedDatagram&) {});
  }
}

// TX stamps are asked for per datagram: an unstamped send takes no OPT_ID
// (the kernel numbers stamped datagrams only) and leaves nothing on the
// error queue; TX_SCHED is asked for only until TX_SOFTWARE has come once.
TEST(TimestampingSocket, TxStampsOnlyForDatagramsThatAskForThem) {
  TimestampingSocket s;
  std::string error;
  ASSERT_TRUE(s.Open("127.0.0.1", 0, &error)) << error;
  UdpEndpoint self;
  ASSERT_TRUE(UdpEndpoint::Parse("127.0.0.1", s.bound_port(), &self, &error));
  const std::array<uint8_t, 16> payload{};

  const SendResult a = s.Send(self, payload, true);
  const SendResult quiet = s.Send(self, payload, false);
  const SendResult b = s.Send(self, payload, true);
  ASSERT_TRUE(a.ok && quiet.ok && b.ok);
  EXPECT_TRUE(a.stamped);
  EXPECT_FALSE(quiet.stamped);
  EXPECT_EQ(a.op_id, 0u);
  EXPECT_EQ(b.op_id, 1u) << "an unstamped send must not consume an id";
  EXPECT_EQ(s.stamped_since_drain(), 2u);

  std::map<uint32_t, std::map<StampSource, int64_t>> tx;
  int received = 0;
  Collect(s, &tx, &received, [&] { return received == 3 && tx[1].count(StampSource::kSocketSoftware) != 0; });
  EXPECT_EQ(received, 3);
  EXPECT_EQ(tx.size(), 2u) << "stamps for a datagram that asked for none";
  EXPECT_TRUE(tx[0].count(StampSource::kSocketSched)) << "TX_SCHED until TX_SOFTWARE is known to come";
  EXPECT_TRUE(tx[1].count(StampSource::kSocketSoftware));
  EXPECT_GT(s.error_queue_calls(), 0u);
  EXPECT_EQ(s.stamped_since_drain(), 0u);

  // TX_SOFTWARE came: from now on TX_SCHED is not asked for.
  const SendResult c = s.Send(self, payload, true);
  ASSERT_TRUE(c.ok && c.stamped);
  EXPECT_EQ(c.op_id, 2u);
  Collect(s, &tx, &received, [&] { return received == 4 && tx[2].count(StampSource::kSocketSoftware) != 0; });
  EXPECT_TRUE(tx[2].count(StampSource::kSocketSoftware));
  EXPECT_FALSE(tx[2].count(StampSource::kSocketSched));
}

// A burst goes in one call, in order; each datagram asks for its own stamps
// and only the stamped ones take timestamping ids.
TEST(TimestampingSocket, SendBurstSendsInOrderWithPerDatagramStamps) {
  TimestampingSocket s;
  std::string error;
  ASSERT_TRUE(s.Open("127.0.0.1", 0, &error)) << error;
  UdpEndpoint self;
  ASSERT_TRUE(UdpEndpoint::Parse("127.0.0.1", s.bound_port(), &self, &error));
  const std::array<uint8_t, 8> pilot{1};
  const std::array<uint8_t, 16> first{2}, second{3};
  const TimestampingSocket::BurstDatagram burst[] = {{pilot, false}, {first, true}, {second, true}};
  std::array<SendResult, 3> r;
  ASSERT_EQ(s.SendBurst(self, burst, r), 3u);
  EXPECT_TRUE(r[0].ok && r[1].ok && r[2].ok);
  EXPECT_FALSE(r[0].stamped);
  EXPECT_TRUE(r[1].stamped && r[2].stamped);
  EXPECT_EQ(r[1].op_id, 0u);
  EXPECT_EQ(r[2].op_id, 1u);
  EXPECT_EQ(r[1].user_tx_real_ns, r[2].user_tx_real_ns) << "one call, one userspace instant";

  std::vector<uint8_t> order;
  s.ReceiveAll([&](std::span<const uint8_t> bytes, const ReceivedDatagram&) { order.push_back(bytes[0]); });
  for (int tries = 0; order.size() < 3 && tries < 100; ++tries) {
    pollfd fd{s.fd(), POLLIN, 0};
    ::poll(&fd, 1, 20);
    s.ReceiveAll([&](std::span<const uint8_t> bytes, const ReceivedDatagram&) { order.push_back(bytes[0]); });
  }
  EXPECT_EQ(order, (std::vector<uint8_t>{1, 2, 3}));
  std::map<uint32_t, std::map<StampSource, int64_t>> tx;
  int received = 0;
  Collect(s, &tx, &received, [&] { return tx[1].count(StampSource::kSocketSoftware) != 0; });
  ASSERT_TRUE(tx[0].count(StampSource::kSocketSoftware) && tx[1].count(StampSource::kSocketSoftware));
  EXPECT_LE(r[1].user_tx_real_ns, tx[0][StampSource::kSocketSoftware]);
  EXPECT_LE(tx[0][StampSource::kSocketSoftware], tx[1][StampSource::kSocketSoftware]) << "sent in order";
  EXPECT_EQ(tx.size(), 2u) << "the unstamped datagram got stamps";
}

// A burst larger than one recvmmsg batch arrives whole, in order, with stamps.
TEST(TimestampingSocket, ReceiveAllReadsABurstInBatches) {
  TimestampingSocket s;
  std::string error;
  ASSERT_TRUE(s.Open("127.0.0.1", 0, &error)) << error;
  UdpEndpoint self;
  ASSERT_TRUE(UdpEndpoint::Parse("127.0.0.1", s.bound_port(), &self, &error));
  constexpr int kBurst = 21;
  for (int i = 0; i < kBurst; ++i) {
    std::array<uint8_t, 8> payload{};
    payload[0] = static_cast<uint8_t>(i);
    ASSERT_TRUE(s.Send(self, payload, false).ok);
  }
  std::vector<int> order;
  const uint64_t calls_before = s.receive_calls();
  const int64_t deadline = ReadClockNs(CLOCK_MONOTONIC) + 2'000'000'000;
  while (order.size() < kBurst && ReadClockNs(CLOCK_MONOTONIC) < deadline) {
    pollfd fd{s.fd(), POLLIN, 0};
    poll(&fd, 1, 10);
    s.ReceiveAll([&](std::span<const uint8_t> bytes, const ReceivedDatagram& d) {
      EXPECT_EQ(bytes.size(), 8u);
      EXPECT_EQ(d.from.ToString(), self.ToString());
      order.push_back(bytes[0]);
    });
  }
  ASSERT_EQ(order.size(), static_cast<size_t>(kBurst));
  for (int i = 0; i < kBurst; ++i) EXPECT_EQ(order[i], i);
  EXPECT_LT(s.receive_calls() - calls_before, static_cast<uint64_t>(kBurst)) << "not batched";
}

// The pilot filter: datagrams of exactly the given payload length never
// reach the queue; every other length does.
TEST(TimestampingSocket, DropsDatagramsOfOneLengthBeforeTheyAreQueued) {
  TimestampingSocket s;
  std::string error;
  ASSERT_TRUE(s.Open("127.0.0.1", 0, &error)) << error;
  ASSERT_TRUE(s.DropDatagramsOfLength(16, &error)) << error;
  UdpEndpoint self;
  ASSERT_TRUE(UdpEndpoint::Parse("127.0.0.1", s.bound_port(), &self, &error));
  for (size_t len : {16u, 15u, 17u, 16u, 144u}) {
    std::vector<uint8_t> payload(len, static_cast<uint8_t>(len));
    ASSERT_TRUE(s.Send(self, payload, false).ok);
  }
  std::vector<size_t> lengths;
  const int64_t deadline = ReadClockNs(CLOCK_MONOTONIC) + 2'000'000'000;
  while (lengths.size() < 3 && ReadClockNs(CLOCK_MONOTONIC) < deadline) {
    pollfd fd{s.fd(), POLLIN, 0};
    poll(&fd, 1, 10);
    s.ReceiveAll([&](std::span<const uint8_t> bytes, const ReceivedDatagram&) { lengths.push_back(bytes.size()); });
  }
  // Loopback delivers in order and synchronously: nothing more is coming.
  s.ReceiveAll([&](std::span<const uint8_t> bytes, const ReceivedDatagram&) { lengths.push_back(bytes.size()); });
  EXPECT_EQ(lengths, (std::vector<size_t>{15, 17, 144}));
}

TEST(TimestampingSocket, PortInUseAndBadAddressAreClearErrors) {
  TimestampingSocket a, b;
  std::string error;
  ASSERT_TRUE(a.Open("127.0.0.1", 0, &error)) << error;
  EXPECT_FALSE(b.Open("127.0.0.1", a.bound_port(), &error));
  EXPECT_NE(error.find("in use"), std::string::npos) << error;
  EXPECT_FALSE(b.Open("not-an-ip", 7319, &error));
  EXPECT_NE(error.find("not an IPv4 or IPv6 address"), std::string::npos) << error;
}

}  // namespace
}  // namespace chronolink
