// How the probe engine joins stamps of one packet from several capture
// points by packet key, and how the source policy picks among them. The
// network here is an in-process double (so eBPF-like stamps can be injected
// at the moments the kernel would produce them); the real-socket path is
// covered by probe_engine_test and the namespace tests.
#include <gtest/gtest.h>

#include <sodium.h>

#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "agent/probe/probe_engine.h"
#include "tests/support/fast_probing.h"

namespace chronolink {
namespace {

// Every datagram here comes from its sender's listed address (addresses are
// probe_engine_test's subject).
const ProbeEngine::SourceCheck kFromListedAddress = [](uint32_t) { return true; };

struct Datagram {
  uint32_t from, to;
  uint32_t op_id;
  bool stamped;  // the socket was asked for TX stamps
  std::vector<uint8_t> bytes;
  int64_t sent_ns = 0;
};

// Test double of the network: queues datagrams; never loses one.
class QueueTransport : public ProbeTransport {
 public:
  QueueTransport(uint32_t self, std::deque<Datagram>* wire, int64_t* now)
      : self_(self), wire_(wire), now_(now) {}
  SendOutcome Send(uint32_t peer, std::span<const uint8_t> d, bool tx_stamps) override {
    SendOutcome o;
    o.ok = true;
    o.stamped = tx_stamps;
    if (tx_stamps) o.op_id = next_op_++;
    o.user_tx_ns = *now_;
    wire_->push_back({self_, peer, o.op_id, tx_stamps, {d.begin(), d.end()}, *now_});
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
  bool driver_tx_hook = false;  // the tap also stamps sends at the driver (net_dev_start_xmit)
  bool socket_tx_software = true;  // false: a driver that gives no TX_SOFTWARE, only TX_SCHED
  bool tap_tx = true;              // false: the tap's send hooks record nothing

  void Add(uint32_t id, std::vector<uint32_t> probe, StampSource forced, ProbeSettings settings = FastProbing()) {
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

  // Test hooks around one probe's delivery (forgeries, copies): `arrive` is
  // when the real packet reaches the receiver's RX_SOFTWARE.
  using Interposer = std::function<void(Harness& h, const Datagram& d, const ProbeMessage& m,
                                        int64_t arrive)>;
  Interposer before_rx;  // after the sender's TX stamps, before the receiver's hooks
  Interposer after_rx;   // after the receiver read the datagram

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
        EXPECT_FALSE(d.stamped) << "a pilot's TX stamps are never used";
        engines.at(d.to)->OnDatagram(d.bytes, DualStamp{{now + 5'000, StampSource::kSocketSoftware}, {}}, now + 8'000,
                                     kFromListedAddress);
        ++pilots_delivered;
        continue;
      }
      ProbeMessage m;
      ASSERT_EQ(codec.Decode(d.bytes, &m), DecodeResult::kOk);
      ProbeEngine& tx = *engines.at(d.from);
      ProbeEngine& rx = *engines.at(d.to);
      if (tap_tx) Tap(tx, CHRONOLINK_HOOK_TC_EGRESS, d.bytes, now + 500);
      if (tap_tx && driver_tx_hook) Tap(tx, CHRONOLINK_HOOK_DEV_XMIT, d.bytes, now + 900);
      if (d.stamped) {
        tx.OnTxStamp(d.op_id, {now + 200, StampSource::kSocketSched});
        if (socket_tx_software) tx.OnTxStamp(d.op_id, {now + 1'000, StampSource::kSocketSoftware});
      }
      const int64_t arrive = now + 5'000;
      if (before_rx) before_rx(*this, d, m, arrive);
      Tap(rx, CHRONOLINK_HOOK_XDP, d.bytes, arrive - 1'000);
      Tap(rx, CHRONOLINK_HOOK_TC_INGRESS, d.bytes, arrive + 400);
      rx.OnDatagram(d.bytes, Local(arrive), arrive + 3'000, kFromListedAddress);
      if (after_rx) after_rx(*this, d, m, arrive);
    }
  }

  // The socket's stamps of a datagram that reached RX_SOFTWARE at `arrive`.
  static DualStamp Local(int64_t arrive) {
    DualStamp local;
    local.kernel = {arrive, StampSource::kSocketSoftware};
    local.user = {arrive + 3'000, StampSource::kUserspace};
    return local;
  }

  // The eBPF record of `bytes` (head and MAC, as the BPF side copies them)
  // at `hook`, taken at `ns`, handed to `e` as the tap capture does.
  static void Tap(ProbeEngine& e, uint32_t hook, std::span<const uint8_t> bytes, int64_t ns) {
    chronolink_tap_record r{};
    r.hook = hook;
    r.ifindex = 2;
    std::memcpy(r.head, bytes.data(), CHRONOLINK_WIRE_KEY_BYTES);
    std::memcpy(r.mac, bytes.data() + CHRONOLINK_WIRE_MAC_OFF, CHRONOLINK_WIRE_MAC_BYTES);
    TapStamp t;
    ASSERT_TRUE(ParseTapRecord(r, &t));
    t.stamp.ns = ns;
    e.OnTapStamp(t);
  }

  // Node 1 probes node 2, both with the same source policy, for `steps`.
  void RunPair(StampSource forced, int steps = 1000, ProbeSettings probe = FastProbing()) {
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
  EXPECT_EQ(h.engines[1]->counters().tap_rx_unverified, 0u);
  EXPECT_EQ(h.engines[1]->counters().tap_rx_late, 0u);
  EXPECT_EQ(h.engines[1]->counters().tap_duplicates, 0u);
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
  TapStamp foreign;
  foreign.hook = CHRONOLINK_HOOK_XDP;
  foreign.key = PacketKey{MessageType::kForward, 5, 6, 1, 1, 0};
  foreign.stamp = {h.now, StampSource::kBpfXdp};
  h.engines[1]->OnTapStamp(foreign);
  TapStamp old_session;
  old_session.hook = CHRONOLINK_HOOK_TC_EGRESS;
  old_session.key = PacketKey{MessageType::kForward, 1, 2, 99, 1, 0};
  old_session.stamp = {h.now, StampSource::kBpfTc};
  h.engines[1]->OnTapStamp(old_session);
  EXPECT_EQ(h.engines[1]->counters().tap_stamps_unrouted, 2u);
}

// Socket TX stamps cost a system call each. Where the driver gives
// TX_SOFTWARE it is the best TX stamp short of the NIC's (read on REALTIME,
// at the driver's transmit), so it is always asked for, and wins over the
// tap's driver tracepoint. Where the driver gives only TX_SCHED, the tap's
// stamps rank above it: after a block the socket is no longer asked, the
// tuples stay whole on the tap's stamps, and when the tap stops the socket
// is asked again within a block.
TEST_F(StampMergeTest, SocketTxStampsAreAskedForOnlyWhileNoBetterSourceStampsTheProbes) {
  auto probes_stamped = [](const std::vector<Datagram>& sent, size_t from, bool* last_stamped) {
    int n = 0;
    for (size_t i = from; i < sent.size(); ++i) {
      ProbeMessage m;
      if (ProbeCodec(7, Key()).Decode(sent[i].bytes, &m) != DecodeResult::kOk) continue;
      if (m.type == MessageType::kFollowUp) {
        EXPECT_FALSE(sent[i].stamped) << "a follow-up's TX time is never used";
        continue;
      }
      n += sent[i].stamped;
      *last_stamped = sent[i].stamped;
    }
    return n;
  };
  bool last = false;

  Harness with_software;
  with_software.driver_tx_hook = true;
  with_software.RunPair(StampSource::kNone, 2000);
  EXPECT_GT(probes_stamped(with_software.sent, 0, &last), 0);
  EXPECT_TRUE(last);
  EXPECT_EQ(with_software.engines[1]->peer_counters().at(2).probes_without_socket_tx, 0u);
  for (const auto& [t, k] : with_software.KernelTuples()) {
    EXPECT_EQ(k.fwd_tx[0].source, StampSource::kSocketSoftware);
    EXPECT_EQ(k.rev_tx[1].source, StampSource::kSocketSoftware);
  }

  Harness h;
  h.driver_tx_hook = true;
  h.socket_tx_software = false;
  h.RunPair(StampSource::kNone, 2000);
  const int stamped = probes_stamped(h.sent, 0, &last);
  EXPECT_GT(stamped, 0);
  EXPECT_FALSE(last) << "still asking the socket for stamps the tap supplies better";
  const PeerCounters p1 = h.engines[1]->peer_counters().at(2);
  EXPECT_GT(p1.probes_without_socket_tx, p1.packets_sent / 3);
  const auto kernel = h.KernelTuples();
  ASSERT_GE(kernel.size(), 90u);
  for (const auto& [t, k] : kernel) {
    EXPECT_EQ(k.fwd_tx[0].source, StampSource::kBpfXdp);
    EXPECT_EQ(k.rev_tx[1].source, StampSource::kBpfXdp);
  }
  // The tap stops stamping at the driver (tc egress still ranks above
  // TX_SCHED): still not asked. The tap stops altogether: asked again.
  h.driver_tx_hook = false;
  size_t before = h.sent.size();
  h.Run(1000);
  probes_stamped(h.sent, before, &last);
  EXPECT_FALSE(last);
  h.tap_tx = false;
  before = h.sent.size();
  h.Run(2000);
  EXPECT_GT(probes_stamped(h.sent, before, &last), 0);
  EXPECT_TRUE(last);
}

// The pilot: one before every forward pair, from the prober only, its lead
// ahead of the pair's first probe (give or take one 50 us step of this
// harness: the lead is longer than a step, so they never share a turn); it
// reaches no tuple and leaves no TX stamp unmatched.
TEST_F(StampMergeTest, APilotGoesAheadOfEveryForwardPairAndIsOnlyCounted) {
  Harness h;
  ProbeSettings probe = FastProbing();
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

// A datagram with a real packet's header (which travels in clear, with a
// predictable sequence number) and any other MAC: its eBPF stamps, though
// keyed like the real packet's and earlier, never join the real packet's.
// Before they were bound to the MAC the forged XDP stamps, 40 us early,
// won and the one-way delays read -36 us.
TEST_F(StampMergeTest, ForgedTapRecordWithARealHeaderIsNeverMerged) {
  Harness h;
  int forged = 0;
  h.before_rx = [&](Harness& hh, const Datagram& d, const ProbeMessage&, int64_t arrive) {
    std::vector<uint8_t> spoof = d.bytes;
    for (size_t i = CHRONOLINK_WIRE_MAC_OFF; i < spoof.size(); ++i) spoof[i] ^= 0x5A;
    Harness::Tap(*hh.engines.at(d.to), CHRONOLINK_HOOK_XDP, spoof, arrive - 40'000);
    Harness::Tap(*hh.engines.at(d.to), CHRONOLINK_HOOK_TC_INGRESS, spoof, arrive - 39'000);
    ++forged;
  };
  h.RunPair(StampSource::kNone);
  const auto kernel = h.KernelTuples();
  ASSERT_GT(kernel.size(), 20u);
  for (const auto& [t, k] : kernel) {
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(k.fwd_rx[i].source, StampSource::kBpfXdp);
      EXPECT_EQ(k.fwd_rx[i].ns - k.fwd_tx[i].ns, 3'000) << "seq " << t->seq;
      EXPECT_EQ(k.rev_rx[i].ns - k.rev_tx[i].ns, 3'000) << "seq " << t->seq;
    }
  }
  // Every forged record is counted once it has waited long enough for a
  // datagram with its MAC.
  h.now += 1'000'000'000;
  for (auto& [id, e] : h.engines) e->Poll(h.now);
  const uint64_t refused = h.engines[1]->counters().tap_rx_unverified +
                           h.engines[2]->counters().tap_rx_unverified;
  EXPECT_EQ(refused, 2u * static_cast<uint64_t>(forged));
  EXPECT_EQ(h.engines[1]->counters().tap_duplicates + h.engines[2]->counters().tap_duplicates, 0u);
}

// A copy of one of our own probes sent back to us reaches our RX hooks
// with our id as sender: it is never taken for a send stamp of ours.
TEST_F(StampMergeTest, ReceiveHookRecordClaimingOurIdIsNotASendStamp) {
  Harness h;
  int copies = 0;
  h.before_rx = [&](Harness& hh, const Datagram& d, const ProbeMessage& m, int64_t) {
    if (m.type != MessageType::kForward) return;
    // XDP outranks every TX source of this harness, and it is 1 us late.
    Harness::Tap(*hh.engines.at(d.from), CHRONOLINK_HOOK_XDP, d.bytes, hh.now + 2'000);
    ++copies;
  };
  h.RunPair(StampSource::kNone);
  const auto kernel = h.KernelTuples();
  ASSERT_GT(kernel.size(), 20u);
  for (const auto& [t, k] : kernel) {
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(k.fwd_tx[i].source, StampSource::kSocketSoftware) << "seq " << t->seq;
      EXPECT_EQ(k.fwd_rx[i].ns - k.fwd_tx[i].ns, 3'000) << "seq " << t->seq;
    }
  }
  EXPECT_EQ(h.engines[1]->counters().tap_rx_own_sender, static_cast<uint64_t>(copies));
}

// A packet seen twice (at one hook, or as two authentic datagrams: a copy
// passes the MAC too) has no stamps one can trust, whichever came first:
// the tuple it belongs to never reaches a window usable, in any class, and
// the duplicate is counted. Each case below on its own sequence numbers.
TEST_F(StampMergeTest, APacketSeenTwiceSpoilsItsTuple) {
  Harness h;
  std::set<uint64_t> spoiled_seqs;
  // Records that were the second at their hook, per node; forward pairs
  // node 2 must leave unanswered; authentic datagrams node 2 got twice.
  uint64_t copies_at_2 = 0, copies_at_1 = 0, pairs_spoiled_at_2 = 0, datagram_copies = 0;
  h.before_rx = [&](Harness& hh, const Datagram& d, const ProbeMessage& m, int64_t arrive) {
    ProbeEngine& rx = *hh.engines.at(d.to);
    ProbeEngine& tx = *hh.engines.at(d.from);
    if (m.type == MessageType::kForward && m.index == 0 && m.seq % 8 == 1) {
      // A copy reaches node 2's XDP half a microsecond before the original.
      Harness::Tap(rx, CHRONOLINK_HOOK_XDP, d.bytes, arrive - 1'500);
      spoiled_seqs.insert(m.seq);
      ++copies_at_2;
      ++pairs_spoiled_at_2;
    }
    if (m.type == MessageType::kForward && m.index == 1 && m.seq % 8 == 7) {
      // Node 1's driver hook sees its own probe leave twice.
      Harness::Tap(tx, CHRONOLINK_HOOK_DEV_XMIT, d.bytes, hh.now + 800);
      Harness::Tap(tx, CHRONOLINK_HOOK_DEV_XMIT, d.bytes, hh.now + 30'000);
      spoiled_seqs.insert(m.seq);
      ++copies_at_1;
    }
    if (m.type == MessageType::kReverse && m.index == 0 && m.seq % 8 == 6) {
      // Node 2's reverse probe leaves twice (tc egress).
      Harness::Tap(tx, CHRONOLINK_HOOK_TC_EGRESS, d.bytes, hh.now + 20'000);
      spoiled_seqs.insert(m.seq);
      ++copies_at_2;
    }
  };
  h.after_rx = [&](Harness& hh, const Datagram& d, const ProbeMessage& m, int64_t arrive) {
    ProbeEngine& rx = *hh.engines.at(d.to);
    if (m.type == MessageType::kForward && m.index == 0 && m.seq % 8 == 3) {
      // An exact copy 20 us later: its hooks, then its datagram.
      Harness::Tap(rx, CHRONOLINK_HOOK_XDP, d.bytes, arrive + 19'000);
      Harness::Tap(rx, CHRONOLINK_HOOK_TC_INGRESS, d.bytes, arrive + 20'400);
      rx.OnDatagram(d.bytes, Harness::Local(arrive + 20'000), arrive + 23'000, kFromListedAddress);
      spoiled_seqs.insert(m.seq);
      copies_at_2 += 2;
      ++pairs_spoiled_at_2;
      ++datagram_copies;
    }
    if (m.type == MessageType::kReverse && m.index == 1 && m.seq % 8 == 5) {
      // A copy of a reverse probe reaches node 1's XDP after its datagram was read.
      Harness::Tap(rx, CHRONOLINK_HOOK_XDP, d.bytes, arrive + 30'000);
      spoiled_seqs.insert(m.seq);
      ++copies_at_1;
    }
  };
  h.RunPair(StampSource::kNone, 8000);  // 400 ms: about 400 pairs
  ASSERT_GT(h.tuples.size(), 300u);
  int spoiled_seen = 0, clean_usable = 0;
  for (const FullTuple& t : h.tuples) {
    PtPrTuple k;
    if (spoiled_seqs.count(t.seq) != 0) {
      ++spoiled_seen;
      EXPECT_NE(ClassifyTuple(t), TupleOutcome::kComplete) << "seq " << t.seq;
      EXPECT_FALSE(t.Project(SourceClass::kKernel, &k)) << "seq " << t.seq;
      EXPECT_FALSE(t.Project(SourceClass::kUserspace, &k)) << "seq " << t.seq;
    } else if (t.seq % 8 == 0 || t.seq % 8 == 2 || t.seq % 8 == 4) {
      clean_usable += t.Project(SourceClass::kKernel, &k);
    }
  }
  EXPECT_GE(spoiled_seen, 200);
  EXPECT_GE(clean_usable, 120);
  const EngineCounters& c1 = h.engines[1]->counters();
  const EngineCounters& c2 = h.engines[2]->counters();
  EXPECT_EQ(c2.tap_duplicates, copies_at_2);
  EXPECT_EQ(c1.tap_duplicates, copies_at_1);
  EXPECT_EQ(c2.duplicate_datagrams, datagram_copies);
  EXPECT_GE(h.engines[1]->peer_counters().at(2).tuples_spoiled, copies_at_1);
  EXPECT_EQ(h.engines[2]->peer_counters().at(1).forward_pairs_spoiled, pairs_spoiled_at_2);
}

}  // namespace
}  // namespace chronolink
