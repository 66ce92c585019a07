// Two probe engines talking over real loopback UDP sockets with real
// SO_TIMESTAMPING: the whole protocol (coded pairs, echoed RX stamps,
// interleaved TX stamps, follow-ups, sessions) without namespaces.
#include "agent/probe/probe_engine.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sodium.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <map>
#include <vector>

#include "agent/runtime/socket_transport.h"
#include "clock/fit_clock.h"
#include "tests/support/fast_probing.h"

namespace chronolink {
namespace {

ClusterKey TestKey(uint8_t seed) {
  ClusterKey k;
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(seed + 7 * i);
  return k;
}

struct Node {
  uint32_t id;
  FitClock clock;
  TimestampingSocket socket;
  std::unique_ptr<ProbeCodec> codec;
  std::unique_ptr<SocketTransport> transport;
  std::unique_ptr<ProbeEngine> engine;
  std::vector<FullTuple> tuples;
  int pairs_sent = 0;

  Node(uint32_t id_, VirtualClockParams vc = {}) : id(id_), clock(NodeClock(vc)) {
    std::string error;
    EXPECT_TRUE(socket.Open("127.0.0.1", 0, &error)) << error;
  }
  void Start(const std::map<uint32_t, uint16_t>& ports, std::vector<uint32_t> probe,
             uint64_t epoch, const ClusterKey& key, ProbeSettings ps = FastProbing()) {
    codec = std::make_unique<ProbeCodec>(7, key);
    transport = std::make_unique<SocketTransport>(socket, clock);
    ProbeEngineOptions o;
    o.node_id = id;
    o.cluster_id = 7;
    o.epoch = epoch;
    o.probed_peers = std::move(probe);
    o.probe = ps;
    for (auto [peer, port] : ports) {
      o.members.insert(peer);
      UdpEndpoint ep;
      std::string error;
      UdpEndpoint::Parse("127.0.0.1", port, &ep, &error);
      if (peer != id) transport->AddPeer(peer, ep);
    }
    engine = std::make_unique<ProbeEngine>(
        o, *codec, *transport, [this](uint32_t, const FullTuple& t) { tuples.push_back(t); },
        [this](uint32_t, int64_t) { ++pairs_sent; });
  }
};

// Drives the engines for `ms` milliseconds of real time, running `each`
// (if any) once per turn.
void RunFor(std::vector<Node*> nodes, int ms, const std::function<void()>& each = {}) {
  const int64_t end = ReadClockNs(CLOCK_MONOTONIC) + int64_t{ms} * 1'000'000;
  while (ReadClockNs(CLOCK_MONOTONIC) < end) {
    if (each) each();
    std::vector<pollfd> fds;
    for (Node* n : nodes) {
      n->engine->Poll(n->clock.Now());
      fds.push_back({n->socket.fd(), POLLIN, 0});
    }
    const timespec ts{0, 50'000};
    ppoll(fds.data(), fds.size(), &ts, nullptr);
    for (Node* n : nodes) PumpSocket(n->socket, n->clock, *n->engine, true, true, nullptr, n->transport.get());
  }
}

class ProbeEngineTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_GE(sodium_init(), 0); }
};

TEST_F(ProbeEngineTest, CompletesTuplesWithKernelStampsBothWays) {
  Node a(1), b(2);
  const std::map<uint32_t, uint16_t> ports = {{1, a.socket.bound_port()}, {2, b.socket.bound_port()}};
  ProbeSettings ps = FastProbing();
  ps.pilot = true;  // pilots share the socket with the probes: they must not disturb them
  a.Start(ports, {2}, 0xA1, TestKey(1), ps);
  b.Start(ports, {1}, 0xB2, TestKey(1), ps);
  RunFor({&a, &b}, 400);
  a.engine->FinalizeTuples(a.clock.Now(), a.clock.Now());
  b.engine->FinalizeTuples(b.clock.Now(), b.clock.Now());

  ASSERT_GT(a.pairs_sent, 100);  // ~1 pair per ms
  int complete = 0;
  int without_rx_stamps = 0;
  for (const FullTuple& t : a.tuples) {
    if (ClassifyTuple(t) != TupleOutcome::kComplete) continue;
    ++complete;
    PtPrTuple k;
    if (!t.Project(SourceClass::kKernel, &k)) {
      // The kernel turns RX stamping on through deferred work, so the first
      // probes after the first timestamping socket opens may arrive unstamped.
      EXPECT_FALSE(t.fwd_rx[0].kernel.present() && t.fwd_rx[1].kernel.present() &&
                   t.rev_rx[0].kernel.present() && t.rev_rx[1].kernel.present());
      ++without_rx_stamps;
      continue;
    }
    // Causality on one shared clock: tx < peer rx < peer tx < rx.
    EXPECT_LT(k.fwd_tx[0].ns, k.fwd_rx[0].ns);
    EXPECT_LE(k.fwd_rx[1].ns, k.rev_tx[0].ns);
    EXPECT_LT(k.rev_tx[0].ns, k.rev_rx[0].ns);
    EXPECT_EQ(k.fwd_rx[0].source, StampSource::kSocketSoftware);
    EXPECT_EQ(k.fwd_tx[0].source, StampSource::kSocketSoftware);
    // Userspace stamps bracket the kernel ones.
    EXPECT_LE(t.fwd_tx[0].user.ns, t.fwd_tx[0].kernel.ns);
    EXPECT_GE(t.rev_rx[0].user.ns, t.rev_rx[0].kernel.ns);
  }
  // All but the last pair or two (still in flight) complete on loopback.
  EXPECT_GE(complete, static_cast<int>(a.tuples.size()) - 3);
  EXPECT_LE(without_rx_stamps, 20);
  EXPECT_GT(b.tuples.size(), 100u);
  EXPECT_EQ(a.engine->counters().decode.rejected(), 0u);
  EXPECT_EQ(a.engine->counters().tx_stamps_unmatched, 0u);
  // A pilot went ahead of every pair, on the same socket:
  // its TX stamps kept the timestamping ids in step (none unmatched above),
  // and the peer counted it without refusing it.
  const uint64_t pilots = a.engine->peer_counters().at(2).pilots_sent;
  EXPECT_GE(pilots + 1, static_cast<uint64_t>(a.pairs_sent));
  EXPECT_LE(pilots, static_cast<uint64_t>(a.pairs_sent) + 1);
  EXPECT_GE(b.engine->peer_counters().at(1).pilots_received + 2, pilots);
  EXPECT_EQ(b.engine->counters().decode.rejected(), 0u);
  EXPECT_EQ(b.engine->counters().tx_stamps_unmatched, 0u);
  // Decoded echoes are tagged with the peer's clock, our stamps with ours.
  EXPECT_EQ(a.engine->peer_counters().at(2).stamps_wrong_domain, 0u);
  PtPrTuple k;
  ASSERT_TRUE(a.tuples.size() > 10 && a.tuples[10].Project(SourceClass::kKernel, &k));
  EXPECT_EQ(k.fwd_tx[0].domain, ClockDomain::kNodeRealtime);
  EXPECT_EQ(k.fwd_rx[0].domain, ClockDomain::kPeerRealtime);
  EXPECT_EQ(k.rev_tx[1].domain, ClockDomain::kPeerRealtime);
  EXPECT_EQ(k.rev_rx[1].domain, ClockDomain::kNodeRealtime);
}

// A fit clock's new rate goes to every member in kRemapCopies datagrams
// kRemapEveryNs apart; the peer takes it once, whatever copies arrive, and
// a second remap of ours is a new one. The probing goes on undisturbed.
TEST_F(ProbeEngineTest, AClockRemapReachesThePeerOnceOfItsCopies) {
  Node a(1), b(2);
  const std::map<uint32_t, uint16_t> ports = {{1, a.socket.bound_port()}, {2, b.socket.bound_port()}};
  a.Start(ports, {2}, 0xA1, TestKey(1));
  b.Start(ports, {1}, 0xB2, TestKey(1));
  std::vector<std::pair<uint32_t, FitClockRemap>> told;
  b.engine->SetPeerRemapSink([&](uint32_t peer, const FitClockRemap& m, int64_t) { told.emplace_back(peer, m); });
  RunFor({&a, &b}, 50);
  const FitClockRemap first{a.clock.Now(), 3'000'000'000, -40'000'000'000};
  a.engine->AnnounceClockRemap(first, a.clock.Now());
  RunFor({&a, &b}, 1200);
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0].first, 1u);
  EXPECT_EQ(told[0].second, first);
  EXPECT_EQ(a.engine->peer_counters().at(2).clock_remaps_sent, static_cast<uint64_t>(ProbeEngine::kRemapCopies));
  EXPECT_EQ(b.engine->peer_counters().at(1).peer_clock_remaps, 1u);
  const FitClockRemap second{a.clock.Now(), -40'000'000'000, -39'000'000'000};
  a.engine->AnnounceClockRemap(second, a.clock.Now());
  RunFor({&a, &b}, 100);
  ASSERT_EQ(told.size(), 2u);
  EXPECT_EQ(told[1].second, second);
  EXPECT_EQ(b.engine->counters().decode.rejected(), 0u);
  EXPECT_EQ(b.engine->peer_counters().at(1).peer_clock_steps, 0u) << "a new rate is no step";
  EXPECT_GT(a.pairs_sent, 500);
}

// Both probes of a pair in one sendmmsg, the pilot first in it.
ProbeSettings BackToBackWithPilot() {
  ProbeSettings ps = FastProbing();
  ps.spacing_ns = 0;
  ps.pilot = true;
  ps.pilot_lead_ns = 0;
  return ps;
}

// Spacing 0: each pair leaves in one sendmmsg with its pilot ahead, both
// ways; the tuples are as complete as with spaced probes, and the two
// probes of a pair leave the kernel back to back.
TEST_F(ProbeEngineTest, BackToBackPairsLeaveInOneBurstWithThePilot) {
  Node a(1), b(2);
  const std::map<uint32_t, uint16_t> ports = {{1, a.socket.bound_port()}, {2, b.socket.bound_port()}};
  const ProbeSettings ps = BackToBackWithPilot();
  a.Start(ports, {2}, 0xA1, TestKey(1), ps);
  b.Start(ports, {1}, 0xB2, TestKey(1), ps);
  RunFor({&a, &b}, 400);
  a.engine->FinalizeTuples(a.clock.Now(), a.clock.Now());

  ASSERT_GT(a.pairs_sent, 100);
  int complete = 0;
  std::vector<int64_t> fwd_gap, rev_gap;
  for (const FullTuple& t : a.tuples) {
    if (ClassifyTuple(t) != TupleOutcome::kComplete) continue;
    ++complete;
    PtPrTuple k;
    if (!t.Project(SourceClass::kKernel, &k)) continue;
    EXPECT_LT(k.fwd_tx[0].ns, k.fwd_rx[0].ns);
    EXPECT_LE(k.fwd_tx[0].ns, k.fwd_tx[1].ns) << "probe 0 leaves first";
    EXPECT_LE(k.rev_tx[0].ns, k.rev_tx[1].ns);
    EXPECT_EQ(t.fwd_tx[0].user.ns, t.fwd_tx[1].user.ns) << "one system call for the pair";
    fwd_gap.push_back(k.fwd_tx[1].ns - k.fwd_tx[0].ns);
    rev_gap.push_back(k.rev_tx[1].ns - k.rev_tx[0].ns);
  }
  EXPECT_GE(complete, static_cast<int>(a.tuples.size()) - 3);
  ASSERT_GT(fwd_gap.size(), 50u);
  std::nth_element(fwd_gap.begin(), fwd_gap.begin() + fwd_gap.size() / 2, fwd_gap.end());
  std::nth_element(rev_gap.begin(), rev_gap.begin() + rev_gap.size() / 2, rev_gap.end());
  // Spaced pairs leave 100 us apart; back to back they leave within a few us
  // (a loose bound: a loaded machine may stretch some).
  EXPECT_LT(fwd_gap[fwd_gap.size() / 2], 50'000);
  EXPECT_LT(rev_gap[rev_gap.size() / 2], 50'000);
  const uint64_t pilots = a.engine->peer_counters().at(2).pilots_sent;
  EXPECT_GE(pilots + 1, static_cast<uint64_t>(a.pairs_sent));
  EXPECT_EQ(a.engine->counters().tx_stamps_unmatched, 0u);
  EXPECT_EQ(b.engine->counters().tx_stamps_unmatched, 0u);
}

// With the reverse pilot a responder leads each reverse pair with a pilot in
// the pair's own burst (docs/protocol.md "Pilot"); without it, none. The
// pilots take no timestamping id from the probes either way.
TEST_F(ProbeEngineTest, AReversePilotLeadsEachReversePairInItsBurst) {
  for (const bool reverse_pilot : {true, false}) {
    Node a(1), b(2);
    const std::map<uint32_t, uint16_t> ports = {{1, a.socket.bound_port()}, {2, b.socket.bound_port()}};
    ProbeSettings ps = BackToBackWithPilot();
    ps.reverse_pilot = reverse_pilot;
    a.Start(ports, {2}, 0xA1, TestKey(1), ps);
    b.Start(ports, {}, 0xB2, TestKey(1), ps);  // b only answers
    RunFor({&a, &b}, 300);
    a.engine->FinalizeTuples(a.clock.Now(), a.clock.Now());
    ASSERT_GT(a.pairs_sent, 100);
    int complete = 0;
    for (const FullTuple& t : a.tuples) complete += ClassifyTuple(t) == TupleOutcome::kComplete ? 1 : 0;
    EXPECT_GE(complete, static_cast<int>(a.tuples.size()) - 3);
    const uint64_t reverse_pilots = b.engine->peer_counters().at(1).pilots_sent;
    if (reverse_pilot) {
      EXPECT_GE(reverse_pilots + 3, static_cast<uint64_t>(complete)) << "a pilot ahead of every reverse pair";
      EXPECT_LE(reverse_pilots, static_cast<uint64_t>(a.pairs_sent) + 1);
    } else {
      EXPECT_EQ(reverse_pilots, 0u);
    }
    EXPECT_EQ(a.engine->counters().tx_stamps_unmatched, 0u);
    EXPECT_EQ(b.engine->counters().tx_stamps_unmatched, 0u);
    EXPECT_EQ(a.engine->counters().decode.rejected(), 0u);
  }
}

TEST_F(ProbeEngineTest, ShutdownFollowUpDeliversTheLastTxStamps) {
  Node a(1), b(2);
  const std::map<uint32_t, uint16_t> ports = {{1, a.socket.bound_port()}, {2, b.socket.bound_port()}};
  ProbeSettings ps = FastProbing();
  ps.followup_delay_ns = 10'000'000'000;  // only the shutdown follow-up may deliver them
  a.Start(ports, {2}, 0xA1, TestKey(1), ps);
  b.Start(ports, {}, 0xB2, TestKey(1), ps);
  RunFor({&a, &b}, 100);
  // Stop probing: only b's final follow-up can complete a's last tuple.
  RunFor({&b}, 5);
  b.engine->Shutdown(b.clock.Now());
  const int64_t end = ReadClockNs(CLOCK_MONOTONIC) + 50'000'000;
  while (ReadClockNs(CLOCK_MONOTONIC) < end) PumpSocket(a.socket, a.clock, *a.engine);
  a.engine->FinalizeTuples(a.clock.Now(), a.clock.Now());
  ASSERT_FALSE(a.tuples.empty());
  // The last tuple that got its reverse pair is complete thanks to the follow-up.
  const FullTuple* last_answered = nullptr;
  for (const FullTuple& t : a.tuples)
    if (t.rev_rx[1].user.present()) last_answered = &t;
  ASSERT_NE(last_answered, nullptr);
  EXPECT_EQ(ClassifyTuple(*last_answered), TupleOutcome::kComplete);
  EXPECT_GE(b.engine->peer_counters().at(1).followups_sent, 1u);
}

// While a node drains after Shutdown it answers no new probe: the stamps
// of an answer sent then may never be collected (CI once logged such a
// reverse probe with its userspace stamp alone), and no follow-up would
// carry them to the prober.
TEST_F(ProbeEngineTest, AfterShutdownNoProbeIsAnswered) {
  Node a(1), b(2);
  const std::map<uint32_t, uint16_t> ports = {{1, a.socket.bound_port()}, {2, b.socket.bound_port()}};
  a.Start(ports, {2}, 0xA1, TestKey(1));
  b.Start(ports, {}, 0xB2, TestKey(1));
  RunFor({&a, &b}, 100);
  ASSERT_GT(b.engine->peer_counters().at(1).packets_sent, 0u);
  b.engine->Shutdown(b.clock.Now());
  const uint64_t sent_at_shutdown = b.engine->peer_counters().at(1).packets_sent;
  const int pairs_before = a.pairs_sent;
  // a goes on probing; b only reads its socket, as the agent's drain does.
  RunFor({&a}, 100, [&] { PumpSocket(b.socket, b.clock, *b.engine); });
  EXPECT_GT(a.pairs_sent, pairs_before + 2);
  EXPECT_EQ(b.engine->peer_counters().at(1).packets_sent, sent_at_shutdown);
}

TEST_F(ProbeEngineTest, CountsAndDropsForgedAndMisaddressedPackets) {
  Node a(1), b(2);
  const std::map<uint32_t, uint16_t> ports = {{1, a.socket.bound_port()}, {2, b.socket.bound_port()}};
  a.Start(ports, {}, 0xA1, TestKey(1));
  b.Start(ports, {}, 0xB2, TestKey(1));
  UdpEndpoint to_a;
  std::string error;
  UdpEndpoint::Parse("127.0.0.1", a.socket.bound_port(), &to_a, &error);

  ProbeMessage m;
  m.type = MessageType::kForward;
  m.cluster_id = 7;
  m.sender_node = 2;
  m.sender_epoch = 5;
  m.seq = 1;
  std::array<uint8_t, kProbeWireSize> buf;
  // Wrong key: a forgery.
  ProbeCodec(7, TestKey(9)).Encode(m, buf);
  b.socket.Send(to_a, buf);
  // Right key, addressed to node 3.
  m.receiver_node = 3;
  ProbeCodec(7, TestKey(1)).Encode(m, buf);
  b.socket.Send(to_a, buf);
  // Right key, from a node that is not a member.
  m.receiver_node = 1;
  m.sender_node = 42;
  ProbeCodec(7, TestKey(1)).Encode(m, buf);
  b.socket.Send(to_a, buf);
  // Garbage.
  const uint8_t junk[5] = {1, 2, 3, 4, 5};
  b.socket.Send(to_a, junk);
  RunFor({&a}, 50);

  const EngineCounters& c = a.engine->counters();
  EXPECT_EQ(c.decode.counts[static_cast<size_t>(DecodeResult::kBadMac)], 1u);
  EXPECT_EQ(c.decode.counts[static_cast<size_t>(DecodeResult::kBadLength)], 1u);
  EXPECT_EQ(c.not_for_us, 1u);
  EXPECT_EQ(c.unknown_sender, 1u);
  EXPECT_TRUE(a.tuples.empty());
}

// A probe sealed under `key`, as a member's engine would send it: authentic.
std::array<uint8_t, kProbeWireSize> Sealed(const ProbeMessage& m, const ClusterKey& key) {
  std::array<uint8_t, kProbeWireSize> buf;
  ProbeCodec(7, key).Encode(m, buf);
  return buf;
}

UdpEndpoint Loopback(uint16_t port) {
  UdpEndpoint ep;
  std::string error;
  UdpEndpoint::Parse("127.0.0.1", port, &ep, &error);
  return ep;
}

// a restarts: answers to its old session still in flight are refused and
// counted as stale (by their echo_epoch), not taken for the new session.
TEST_F(ProbeEngineTest, RestartedProberStartsANewSessionAndOldAnswersAreStale) {
  Node a(1), b(2);
  const std::map<uint32_t, uint16_t> ports = {{1, a.socket.bound_port()}, {2, b.socket.bound_port()}};
  a.Start(ports, {2}, 0xA1, TestKey(1));
  b.Start(ports, {}, 0xB2, TestKey(1));
  RunFor({&a, &b}, 50);
  // a stops; b, left alone for longer than the follow-up delay, sends the
  // follow-up of its last reverse pair to a's socket.
  RunFor({&b}, 40);
  // a "restarts" on the same socket: new epoch, sequence numbers from 1 again.
  a.tuples.clear();
  a.Start(ports, {2}, 0xA2, TestKey(1));
  RunFor({&a, &b}, 200);
  a.engine->FinalizeTuples(a.clock.Now(), a.clock.Now());
  int complete = 0;
  for (const FullTuple& t : a.tuples) complete += ClassifyTuple(t) == TupleOutcome::kComplete;
  EXPECT_GT(complete, 50);
  EXPECT_GE(a.engine->counters().stale_session, 1u) << "b's follow-up for the old session";

  // One authentic answer of each kind naming a's old epoch: both refused as
  // stale. (Taken for the new session they would land on its long
  // finalised pair 1 and count as unmatched.)
  RunFor({&a}, 5);  // nothing of b's left in a's socket
  const uint64_t stale_before = a.engine->counters().stale_session;
  const uint64_t unmatched_before = a.engine->peer_counters().at(2).stamps_unmatched;
  ProbeMessage m;
  m.cluster_id = 7;
  m.sender_node = 2;
  m.receiver_node = 1;
  m.sender_epoch = 0xB2;
  m.echo_epoch = 0xA1;
  m.seq = 1;  // long finalised in the new session too: merging it would count as unmatched
  m.type = MessageType::kReverse;
  m.flags = kFlagHasEchoRx;
  b.socket.Send(Loopback(a.socket.bound_port()), Sealed(m, TestKey(1)));
  m.type = MessageType::kFollowUp;
  m.flags = kFlagHasPrevTx;
  m.prev_tx_seq = 1;
  b.socket.Send(Loopback(a.socket.bound_port()), Sealed(m, TestKey(1)));
  RunFor({&a}, 20);
  EXPECT_EQ(a.engine->counters().stale_session - stale_before, 2u);
  EXPECT_EQ(a.engine->peer_counters().at(2).stamps_unmatched, unmatched_before);
}

// Finding 6: a captured forward probe of a's previous session, replayed to
// b about every 50 us, used to reset b's responder each time and so break
// almost every reverse pair. b remembers the retired session and drops it.
TEST_F(ProbeEngineTest, ReplayedProbesOfAnEarlierSessionAreDroppedAndCounted) {
  Node a(1), b(2);
  const std::map<uint32_t, uint16_t> ports = {{1, a.socket.bound_port()}, {2, b.socket.bound_port()}};
  a.Start(ports, {2}, 0xA1, TestKey(1));
  b.Start(ports, {}, 0xB2, TestKey(1));
  RunFor({&a, &b}, 30);
  ProbeMessage old;  // what an eavesdropper recorded in a's first session
  old.type = MessageType::kForward;
  old.cluster_id = 7;
  old.sender_node = 1;
  old.receiver_node = 2;
  old.sender_epoch = 0xA1;
  old.seq = 5;
  const auto replay = Sealed(old, TestKey(1));
  a.tuples.clear();
  a.Start(ports, {2}, 0xA2, TestKey(1));
  RunFor({&a, &b}, 20);
  Node eve(3);
  const UdpEndpoint to_b = Loopback(b.socket.bound_port());
  int replayed = 0;
  RunFor({&a, &b}, 300, [&] {
    eve.socket.Send(to_b, replay);
    ++replayed;
  });
  a.engine->FinalizeTuples(a.clock.Now(), a.clock.Now());
  int complete = 0;
  for (const FullTuple& t : a.tuples) complete += ClassifyTuple(t) == TupleOutcome::kComplete;
  // How many pairs 300 ms hold depends on the machine's load; the share that
  // the replays break does not (it was almost all of them).
  ASSERT_GE(a.tuples.size(), 30u) << replayed << " replays";
  EXPECT_GE(complete * 10, static_cast<int>(a.tuples.size()) * 9)
      << complete << " of " << a.tuples.size() << " tuples complete, " << replayed << " replays";
  EXPECT_GE(b.engine->counters().retired_session, static_cast<uint64_t>(replayed) * 9 / 10);

  // The prober's side: b restarts, and a reverse probe of b's old session
  // (answering a's current epoch) is replayed to a: a keeps b's new session.
  b.Start(ports, {}, 0xB3, TestKey(1));
  RunFor({&a, &b}, 30);
  ProbeMessage old_reverse;
  old_reverse.type = MessageType::kReverse;
  old_reverse.cluster_id = 7;
  old_reverse.sender_node = 2;
  old_reverse.receiver_node = 1;
  old_reverse.sender_epoch = 0xB2;
  old_reverse.echo_epoch = 0xA2;
  old_reverse.seq = 7;
  old_reverse.flags = kFlagHasEchoRx;
  const auto replay_reverse = Sealed(old_reverse, TestKey(1));
  const UdpEndpoint to_a = Loopback(a.socket.bound_port());
  const uint64_t retired_before = a.engine->counters().retired_session;
  int replayed_reverse = 0;
  RunFor({&a, &b}, 100, [&] {
    eve.socket.Send(to_a, replay_reverse);
    ++replayed_reverse;
  });
  EXPECT_EQ(a.engine->peer_counters().at(2).peer_restarts, 1u) << "b restarted once";
  EXPECT_GE(a.engine->counters().retired_session - retired_before,
            static_cast<uint64_t>(replayed_reverse) * 9 / 10);
}

// An address etcd names is believed only once an authentic probe comes from
// it. Node 1 is told that node 2 listens where a victim does, while the
// real node 2 probes node 1 from its own address: node 1 sends the victim
// one pair a second (not one a millisecond), answers none of node 2's
// pairs (the answers would go to the victim) and never confirms.
TEST_F(ProbeEngineTest, AnUnprovedAddressDrawsOnePairASecondAndNoAnswers) {
  Node a(1), b(2);
  const int victim = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  ASSERT_GE(victim, 0);
  sockaddr_in v{};
  v.sin_family = AF_INET;
  v.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(v);
  ASSERT_EQ(bind(victim, reinterpret_cast<sockaddr*>(&v), sizeof(v)), 0);
  ASSERT_EQ(getsockname(victim, reinterpret_cast<sockaddr*>(&v), &len), 0);
  a.Start({{1, a.socket.bound_port()}, {2, ntohs(v.sin_port)}}, {2}, 0xA1, TestKey(1));
  a.engine->RequireAddressConfirmation(2);
  b.Start({{1, a.socket.bound_port()}, {2, b.socket.bound_port()}}, {1}, 0xB2, TestKey(1));
  uint64_t at_victim = 0;
  RunFor({&a, &b}, 2500, [&] {
    char buf[512];
    while (recv(victim, buf, sizeof(buf), 0) > 0) ++at_victim;
  });
  close(victim);
  EXPECT_FALSE(a.engine->AddressConfirmed(2));
  // Over 2.5 s: three pairs a second apart, no pilots (6 datagrams); at the
  // configured rate it would be some 5000.
  EXPECT_GE(at_victim, 2u);
  EXPECT_LE(at_victim, 8u);
  const PeerCounters pc = a.engine->peer_counters()[2];
  EXPECT_EQ(pc.reverse_pairs_sent, 0u);
  EXPECT_GT(pc.forwards_unanswered_unconfirmed, 100u);  // ~5000 unloaded
  EXPECT_FALSE(pc.address_confirmed);
  EXPECT_GE(pc.pairs_sent_unconfirmed, 2u);
  EXPECT_GT(b.pairs_sent, 200);  // node 2 probed all along (~2500 pairs), from its own address
}

// The same with node 2 where etcd says: its first answer, from its listed
// address, confirms it, and node 1 probes at the configured rate.
TEST_F(ProbeEngineTest, AnAddressIsConfirmedByAnAuthenticProbeFromIt) {
  Node a(1), b(2);
  const std::map<uint32_t, uint16_t> ports = {{1, a.socket.bound_port()}, {2, b.socket.bound_port()}};
  a.Start(ports, {2}, 0xA1, TestKey(1));
  a.engine->RequireAddressConfirmation(2);
  EXPECT_FALSE(a.engine->AddressConfirmed(2));
  b.Start(ports, {}, 0xB2, TestKey(1));
  RunFor({&a, &b}, 1500);
  EXPECT_TRUE(a.engine->AddressConfirmed(2));
  const PeerCounters pc = a.engine->peer_counters()[2];
  EXPECT_TRUE(pc.address_confirmed);
  EXPECT_GE(pc.pairs_sent_unconfirmed, 1u);
  EXPECT_LE(pc.pairs_sent_unconfirmed, 2u);
  EXPECT_GT(a.pairs_sent, 100);  // ~1 pair per ms once confirmed (~1500); unconfirmed it would be 2
}

// A forward probe that reaches the responder twice (a copy passes the MAC
// too) spoils its pair even when nothing else saw it twice: which copy the
// prober sent is unknowable, so neither RX stamp counts and the pair is not
// answered. Only socket stamps here, no tap record: the datagram rule alone
// must spoil it (a repeated tap record would spoil it by another path).
TEST_F(ProbeEngineTest, AForwardProbeReceivedTwiceSpoilsItsPairOnTheResponder) {
  Node a(1), b(2);
  const std::map<uint32_t, uint16_t> ports = {{1, a.socket.bound_port()}, {2, b.socket.bound_port()}};
  b.Start(ports, {}, 0xB2, TestKey(1));  // answers node 1, probes nobody
  // a's socket stands in for node 1's engine: its probes, sealed with the key.
  const UdpEndpoint to_b = Loopback(b.socket.bound_port());
  ProbeMessage m;
  m.type = MessageType::kForward;
  m.cluster_id = 7;
  m.sender_node = 1;
  m.receiver_node = 2;
  m.sender_epoch = 0xA1;
  auto send_forward = [&](uint64_t seq, uint8_t index) {
    m.seq = seq;
    m.index = index;
    ASSERT_TRUE(a.socket.Send(to_b, Sealed(m, TestKey(1))).ok);
  };
  // Pair 1: probe 0 twice, then probe 1. Pair 2, the control: once each.
  send_forward(1, 0);
  send_forward(1, 0);
  send_forward(1, 1);
  send_forward(2, 0);
  send_forward(2, 1);

  // What b answers, as node 1 receives it, until the control pair is
  // answered (b takes the datagrams in order: pair 1 was judged by then).
  const ProbeCodec codec(7, TestKey(1));
  std::map<uint64_t, int> reverse_probes_by_seq;
  for (int turn = 0; turn < 400 && reverse_probes_by_seq[2] < 2; ++turn) {  // 2 s at most
    RunFor({&b}, 5);
    a.socket.ReceiveAll([&](std::span<const uint8_t> bytes, const ReceivedDatagram&) {
      ProbeMessage r;
      if (codec.Decode(bytes, &r) == DecodeResult::kOk && r.type == MessageType::kReverse) {
        ++reverse_probes_by_seq[r.seq];
      }
    });
  }
  ASSERT_EQ(reverse_probes_by_seq[2], 2) << "the clean pair must be answered";
  EXPECT_EQ(reverse_probes_by_seq.count(1), 0u) << "the pair with a probe seen twice was answered";
  const PeerCounters pc = b.engine->peer_counters().at(1);
  EXPECT_EQ(pc.forward_pairs_spoiled, 1u);
  EXPECT_EQ(pc.reverse_pairs_sent, 1u);
  EXPECT_EQ(b.engine->counters().duplicate_datagrams, 1u);
  EXPECT_EQ(b.engine->counters().tap_duplicates, 0u) << "no tap record may have spoiled it";
}

// Both ends probe each other: each forward pair echoes the prober's receive
// stamps of the answer to its previous pair, so the responder holds that
// tuple of the prober's session whole. It is the prober's own tuple, every
// stamp the same, with the roles swapped: the responder's reverse pair as
// its forward half. An older prober that sends no echo makes none.
TEST_F(ProbeEngineTest, EachEndHoldsThePeersTuplesWholeMirroredIntoItsFrame) {
  Node a(1), b(2);
  const std::map<uint32_t, uint16_t> ports = {{1, a.socket.bound_port()}, {2, b.socket.bound_port()}};
  a.Start(ports, {2}, 0xA1, TestKey(1));
  ProbeSettings older = FastProbing();
  older.echo_reverse_rx = false;  // b stands in for an agent from before the echo
  b.Start(ports, {1}, 0xB2, TestKey(1), older);
  std::vector<FullTuple> mirrored_at_a, mirrored_at_b;
  a.engine->SetMirrorSink([&](uint32_t peer, const FullTuple& t) {
    EXPECT_EQ(peer, 2u);
    mirrored_at_a.push_back(t);
  });
  b.engine->SetMirrorSink([&](uint32_t, const FullTuple& t) { mirrored_at_b.push_back(t); });
  RunFor({&a, &b}, 400);
  a.engine->FinalizeTuples(a.clock.Now(), a.clock.Now());
  b.engine->FinalizeTuples(b.clock.Now(), b.clock.Now());

  EXPECT_TRUE(mirrored_at_a.empty()) << "b sends no echo: a can make none of b's tuples whole";
  // ~1 pair per ms; a loaded machine (or qemu) may manage far fewer.
  ASSERT_GT(mirrored_at_b.size(), 50u) << "a echoes: b holds a's tuples";
  EXPECT_EQ(b.engine->peer_counters().at(1).peer_tuples_mirrored, mirrored_at_b.size());
  std::map<uint64_t, const FullTuple*> own_at_a;
  for (const FullTuple& t : a.tuples) own_at_a[t.seq] = &t;
  const auto same = [](const DualStamp& x, const DualStamp& y) {
    return x.kernel.ns == y.kernel.ns && x.kernel.source == y.kernel.source && x.user.ns == y.user.ns &&
           x.user.source == y.user.source;
  };
  int checked = 0, kernel_whole = 0, unreported = 0;
  for (const FullTuple& m : mirrored_at_b) {
    auto it = own_at_a.find(m.seq);
    ASSERT_NE(it, own_at_a.end()) << "a mirrored tuple of a pair a never sent: " << m.seq;
    const FullTuple& o = *it->second;
    for (int i = 0; i < 2; ++i) {
      // b's send stamps reach a in b's next message: the run may end first
      // (the last pair or two, more on a loaded machine).
      if (o.rev_tx[i].user.present()) {
        EXPECT_TRUE(same(m.fwd_tx[i], o.rev_tx[i])) << "b's send of its answer, seq " << m.seq;
      } else {
        ++unreported;
      }
      EXPECT_TRUE(same(m.fwd_rx[i], o.rev_rx[i])) << "a's receipt of it";
      EXPECT_TRUE(same(m.rev_tx[i], o.fwd_tx[i])) << "a's send of its probe";
      EXPECT_TRUE(same(m.rev_rx[i], o.fwd_rx[i])) << "b's receipt of it";
      // On b's side: its own stamps on its clock, a's on the peer's.
      EXPECT_TRUE(m.fwd_tx[i].InDomain(ClockDomain::kNodeRealtime));
      EXPECT_TRUE(m.rev_rx[i].InDomain(ClockDomain::kNodeRealtime));
      EXPECT_TRUE(m.fwd_rx[i].InDomain(ClockDomain::kPeerRealtime));
      EXPECT_TRUE(m.rev_tx[i].InDomain(ClockDomain::kPeerRealtime));
    }
    EXPECT_EQ(m.created_ns, m.fwd_tx[0].user.ns);
    PtPrTuple k;
    if (m.Project(SourceClass::kKernel, &k)) {
      ++kernel_whole;
      // One shared clock on loopback: b's answer leaves before a gets it, a's probe before b does.
      EXPECT_LT(k.fwd_tx[0].ns, k.fwd_rx[0].ns);
      EXPECT_LT(k.rev_tx[0].ns, k.rev_rx[0].ns);
    }
    ++checked;
  }
  EXPECT_GT(kernel_whole, checked / 2);
  EXPECT_LE(unreported, 8) << "only the last few pairs may lack b's send stamps at a";
}

// What counts as "from the listed address": the same IP and port, also as
// a dual-stack socket reports an IPv4 peer (::ffff:a.b.c.d); nothing else.
TEST(SocketTransportTest, AListedEndpointMatchesItselfAndItsV4MappedFormOnly) {
  TimestampingSocket socket;
  FitClock clock;
  SocketTransport transport(socket, clock);
  auto ep = [](const std::string& ip, uint16_t port) {
    UdpEndpoint e;
    std::string error;
    EXPECT_TRUE(UdpEndpoint::Parse(ip, port, &e, &error)) << error;
    return e;
  };
  EXPECT_TRUE(transport.AddPeer(2, ep("10.0.0.2", 7319)));
  EXPECT_FALSE(transport.AddPeer(2, ep("10.0.0.2", 7319)));  // unchanged
  EXPECT_TRUE(transport.IsEndpointOf(2, ep("10.0.0.2", 7319)));
  EXPECT_TRUE(transport.IsEndpointOf(2, ep("::ffff:10.0.0.2", 7319)));
  EXPECT_FALSE(transport.IsEndpointOf(2, ep("10.0.0.3", 7319)));
  EXPECT_FALSE(transport.IsEndpointOf(2, ep("10.0.0.2", 7320)));
  EXPECT_FALSE(transport.IsEndpointOf(3, ep("10.0.0.2", 7319)));  // not a peer
  EXPECT_TRUE(transport.AddPeer(3, ep("fd00::3", 7319)));
  EXPECT_TRUE(transport.IsEndpointOf(3, ep("fd00::3", 7319)));
  EXPECT_FALSE(transport.IsEndpointOf(3, ep("fd00::4", 7319)));
  EXPECT_TRUE(transport.AddPeer(2, ep("10.0.0.9", 7319)));  // moved: a change
  EXPECT_FALSE(transport.IsEndpointOf(2, ep("10.0.0.2", 7319)));
}

}  // namespace
}  // namespace chronolink
