// How the probe engine joins stamps of one packet from several capture
// points by packet key, and how the source policy picks among them. The
// network here is an in-process double (so eBPF-like stamps can be injected
// at the moments the kernel would produce them); the real-socket path is
// covered by probe_engine_test and the namespace tests.
#include <gtest/gtest.h>

#include <sodium.h>

#include <deque>
#include <map>
#include <vector>

#include "agent/probe/probe_engine.h"

namespace chronolink {
namespace {

struct Datagram {
  uint32_t from, to;
  uint32_t op_id;
  std::vector<uint8_t> bytes;
  int64_t sent_ns = 0;
};

// Test double of the network: queues datagrams; never loses one.
class QueueTransport : public ProbeTransport {
 public:
  QueueTransport(uint32_t self, std::deque<Datagram>* wire, int64_t* now)
      : self_(self), wire_(wire), now_(now) {}
  SendOutcome Send(uint32_t peer, std::span<const uint8_t> d) override {
    SendOutcome o;
    o.ok = true;
    o.op_id = next_op_++;
    o.user_tx_ns = *now_;
    wire_->push_back({self_, peer, o.op_id, {d.begin(), d.end()}, *now_});
    return o;
  }

 private:
  uint32_t self_;
  std::deque<Datagram>* wire_;
  int64_t* now_;
  uint32_t next_op_ = 0;
};

ClusterKey Key() {
  ClusterKey k{};
  k[0] = 1;
  return k;
}

struct Harness {
  int64_t now = 1'790'000'000'000'000'000LL;
  std::deque<Datagram> wire;
  ProbeCodec codec{7, Key()};
  std::map<uint32_t, std::unique_ptr<QueueTransport>> transports;
  std::map<uint32_t, std::unique_ptr<ProbeEngine>> engines;
  std::vector<FullTuple> tuples;
  int pilots_delivered = 0;
  std::vector<Datagram> sent;  // every datagram delivered, in order

  void Add(uint32_t id, std::vector<uint32_t> probe, StampSource forced, ProbeSettings settings = {}) {
    transports[id] = std::make_unique<QueueTransport>(id, &wire, &now);
    ProbeEngineOptions o;
    o.node_id = id;
    o.cluster_id = 7;
    o.epoch = 100 + id;
    o.probed_peers = std::move(probe);
    o.members = {1, 2};
    o.forced_source = forced;
    o.probe = settings;
    engines[id] = std::make_unique<ProbeEngine>(
        o, codec, *transports[id], [this](uint32_t, const FullTuple& t) { tuples.push_back(t); },
        [](uint32_t, int64_t) {});
  }

  // Delivers every queued datagram with 5 us of path: the sender gets
  // TX_SOFTWARE +1 us and a tc egress stamp +0.5 us after its send, the
  // receiver an XDP stamp 1 us before RX_SOFTWARE and a tc ingress 0.4 us after.
  // A pilot gets the socket's stamps only, as on a real socket (the eBPF
  // tap records probe messages alone).
  void Deliver() {
    while (!wire.empty()) {
      Datagram d = wire.front();
      wire.pop_front();
      sent.push_back(d);
      uint32_t pilot_sender = 0;
      if (codec.DecodePilot(d.bytes, &pilot_sender)) {
        engines.at(d.from)->OnTxStamp(d.op_id, {now + 200, StampSource::kSocketSched});
        engines.at(d.from)->OnTxStamp(d.op_id, {now + 1'000, StampSource::kSocketSoftware});
        engines.at(d.to)->OnDatagram(d.bytes, DualStamp{{now + 5'000, StampSource::kSocketSoftware}, {}}, now + 8'000);
        ++pilots_delivered;
        continue;
      }
      ProbeMessage m;
      ASSERT_EQ(codec.Decode(d.bytes, &m), DecodeResult::kOk);
      const PacketKey key = KeyOf(m);
      ProbeEngine& tx = *engines.at(d.from);
      ProbeEngine& rx = *engines.at(d.to);
      tx.OnTapStamp(key, {now + 500, StampSource::kBpfTc});
      tx.OnTxStamp(d.op_id, {now + 200, StampSource::kSocketSched});
      tx.OnTxStamp(d.op_id, {now + 1'000, StampSource::kSocketSoftware});
      const int64_t arrive = now + 5'000;
      rx.OnTapStamp(key, {arrive - 1'000, StampSource::kBpfXdp});
      rx.OnTapStamp(key, {arrive + 400, StampSource::kBpfTc});
      DualStamp local;
      local.kernel = {arrive, StampSource::kSocketSoftware};
      local.user = {arrive + 3'000, StampSource::kUserspace};
      rx.OnDatagram(d.bytes, local, arrive + 3'000);
    }
  }

  // Node 1 probes node 2, both with the same source policy, for `steps`.
  void RunPair(StampSource forced, int steps = 1000, ProbeSettings probe = {}) {
    Add(1, {2}, forced, probe);
    Add(2, {}, forced, probe);
    Run(steps);
  }

  // Node 1's tuples that are whole in the kernel class, projected.
  std::vector<std::pair<const FullTuple*, PtPrTuple>> KernelTuples() const {
    std::vector<std::pair<const FullTuple*, PtPrTuple>> out;
    for (const FullTuple& t : tuples) {
      PtPrTuple k;
      if (t.Project(SourceClass::kKernel, &k)) out.emplace_back(&t, k);
    }
    return out;
  }

  void Run(int steps) {
    for (int i = 0; i < steps; ++i) {
      now += 50'000;
      for (auto& [id, e] : engines) e->Poll(now);
      Deliver();
    }
    for (auto& [id, e] : engines) e->FinalizeTuples(now, now);
  }
};

class StampMergeTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_GE(sodium_init(), 0); }
};

TEST_F(StampMergeTest, AutoPicksTheStampClosestToTheWire) {
  Harness h;
  h.RunPair(StampSource::kNone);
  const auto kernel = h.KernelTuples();
  for (const auto& [t, k] : kernel) {
    EXPECT_EQ(ClassifyTuple(*t), TupleOutcome::kComplete);
    for (int i = 0; i < 2; ++i) {
      // TX: the driver stamp (TX_SOFTWARE) beats tc egress and TX_SCHED.
      EXPECT_EQ(k.fwd_tx[i].source, StampSource::kSocketSoftware);
      EXPECT_EQ(k.rev_tx[i].source, StampSource::kSocketSoftware);
      // RX: XDP beats RX_SOFTWARE and tc ingress, on both ends.
      EXPECT_EQ(k.fwd_rx[i].source, StampSource::kBpfXdp);
      EXPECT_EQ(k.rev_rx[i].source, StampSource::kBpfXdp);
      EXPECT_EQ(k.fwd_rx[i].ns - k.fwd_tx[i].ns, 5'000 - 1'000 - 1'000);
    }
  }
  EXPECT_GT(kernel.size(), 20u);
  EXPECT_EQ(h.engines[1]->counters().tap_rx_pending_evicted, 0u);
}

TEST_F(StampMergeTest, ForcedSourceIsTheOnlyOneThatReachesTheTuples) {
  Harness h;
  h.RunPair(StampSource::kBpfTc);
  const auto kernel = h.KernelTuples();
  for (const auto& [t, k] : kernel) {
    for (int i = 0; i < 2; ++i) {
      for (const ProbeStamp* s : {&k.fwd_tx[i], &k.fwd_rx[i], &k.rev_tx[i], &k.rev_rx[i]}) {
        EXPECT_EQ(s->source, StampSource::kBpfTc);
      }
    }
    // Userspace stamps are untouched by the policy.
    EXPECT_TRUE(t->fwd_tx[0].user.present());
  }
  EXPECT_GT(kernel.size(), 20u);
  EXPECT_GT(h.engines[1]->counters().stamps_refused_by_policy, 0u);
}

TEST_F(StampMergeTest, ForcingTheSchedulingStampKeepsRxSoftwareOnReceive) {
  Harness h;
  h.RunPair(StampSource::kSocketSched);
  const auto kernel = h.KernelTuples();
  for (const auto& [t, k] : kernel) {
    EXPECT_EQ(k.fwd_tx[0].source, StampSource::kSocketSched);
    EXPECT_EQ(k.rev_tx[1].source, StampSource::kSocketSched);
    EXPECT_EQ(k.fwd_rx[0].source, StampSource::kSocketSoftware);
    EXPECT_EQ(k.rev_rx[1].source, StampSource::kSocketSoftware);
  }
  EXPECT_GT(kernel.size(), 20u);
}

TEST_F(StampMergeTest, CountsCoveragePerSourceAndIgnoresForeignPackets) {
  Harness h;
  h.RunPair(StampSource::kNone, 50);
  const EngineCounters& c = h.engines[1]->counters();
  const auto tx = static_cast<int>(StampSource::kBpfTc);
  EXPECT_GT(c.packets[1], 0u);
  EXPECT_EQ(c.stamps[1][tx], c.packets[1]);  // every sent packet got a tc egress stamp
  EXPECT_EQ(c.stamps[0][static_cast<int>(StampSource::kBpfXdp)], c.packets[0]);
  // A packet between two other nodes, or an old session of ours, is not routed.
  PacketKey foreign{MessageType::kForward, 5, 6, 1, 1, 0};
  h.engines[1]->OnTapStamp(foreign, {h.now, StampSource::kBpfXdp});
  PacketKey old_session{MessageType::kForward, 1, 2, 99, 1, 0};
  h.engines[1]->OnTapStamp(old_session, {h.now, StampSource::kBpfTc});
  EXPECT_EQ(h.engines[1]->counters().tap_stamps_unrouted, 2u);
}

// The pilot: one before every forward pair, from the prober only, its lead
// ahead of the pair's first probe (give or take one 50 us step of this
// harness: the lead is longer than a step, so they never share a turn); it
// reaches no tuple and leaves no TX stamp unmatched.
TEST_F(StampMergeTest, APilotGoesAheadOfEveryForwardPairAndIsOnlyCounted) {
  Harness h;
  ProbeSettings probe;
  probe.pilot = true;
  probe.pilot_lead_ns = 120'000;
  h.RunPair(StampSource::kNone, 400, probe);
  int pairs = 0;
  int64_t pilot_at = -1;  // of the pilot not yet followed by its pair
  for (const Datagram& d : h.sent) {
    uint32_t sender = 0;
    if (h.codec.DecodePilot(d.bytes, &sender)) {
      EXPECT_EQ(sender, 1u);
      EXPECT_EQ(d.from, 1u) << "the responder sends no pilot";
      EXPECT_EQ(pilot_at, -1) << "two pilots for one pair";
      pilot_at = d.sent_ns;
      continue;
    }
    ProbeMessage m;
    ASSERT_EQ(h.codec.Decode(d.bytes, &m), DecodeResult::kOk);
    if (m.type != MessageType::kForward || m.index != 0) continue;
    ++pairs;
    ASSERT_NE(pilot_at, -1) << "forward pair " << m.seq << " without a pilot";
    EXPECT_GE(d.sent_ns - pilot_at, probe.pilot_lead_ns - 50'000);
    EXPECT_LE(d.sent_ns - pilot_at, probe.pilot_lead_ns + 50'000);
    pilot_at = -1;
  }
  EXPECT_GE(pairs, 10);
  const PeerCounters p1 = h.engines[1]->peer_counters().at(2);
  const PeerCounters p2 = h.engines[2]->peer_counters().at(1);
  EXPECT_EQ(p1.pilots_sent, static_cast<uint64_t>(h.pilots_delivered));
  EXPECT_EQ(p2.pilots_received, p1.pilots_sent);
  EXPECT_EQ(h.engines[2]->counters().pilots_received, p1.pilots_sent);
  EXPECT_EQ(p2.pilots_sent, 0u);
  // Pilots are not probe messages: not in the packet counts or the coverage,
  // not refused by the decoder, and their TX stamps are known.
  EXPECT_EQ(p1.packets_sent, h.engines[1]->counters().packets[1]);
  EXPECT_EQ(h.engines[2]->counters().decode.rejected(), 0u);
  EXPECT_EQ(h.engines[1]->counters().tx_stamps_unmatched, 0u);
  EXPECT_FALSE(h.KernelTuples().empty());

  Harness off;
  probe.pilot = false;
  off.RunPair(StampSource::kNone, 400, probe);
  EXPECT_EQ(off.pilots_delivered, 0);
  EXPECT_FALSE(off.KernelTuples().empty());
}

}  // namespace
}  // namespace chronolink
