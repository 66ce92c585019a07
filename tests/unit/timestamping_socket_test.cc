// Real SO_TIMESTAMPING on a loopback socket: RX software stamps, TX_SCHED and
// TX_SOFTWARE stamps from the error queue matched by OPT_ID.
#include "agent/capture/timestamping_socket.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <array>
#include <map>

#include "agent/clock/clock_reader.h"

namespace chronolink {
namespace {

TEST(TimestampingSocket, StampsEveryDatagramInBothDirections) {
  TimestampingSocket s;
  std::string error;
  ASSERT_TRUE(s.Open("127.0.0.1", 0, &error)) << error;
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
    std::array<uint8_t, 64> buf;
    ReceivedDatagram d;
    while (s.Receive(buf, &d)) stamped = stamped || d.kernel_rx_real_ns > 0;
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
    std::array<uint8_t, 64> buf;
    ReceivedDatagram d;
    while (s.Receive(buf, &d)) {
      ++received;
      EXPECT_EQ(d.length, payload.size());
      EXPECT_GT(d.kernel_rx_real_ns, 0);
      EXPECT_GE(d.user_rx_real_ns, d.kernel_rx_real_ns);
    }
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
