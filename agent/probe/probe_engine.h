// The probe protocol (docs/protocol.md): as prober it sends coded forward
// pairs to each probed peer and assembles Pt/Pr tuples; as responder it
// answers every forward pair with a reverse pair that echoes the RX stamps,
// and delivers its own TX stamps interleaved in the next pair or in a
// follow-up. It never touches a socket or a file: datagrams go out through a
// ProbeTransport, finalised tuples through callbacks.
//
// What it trusts: a datagram only after the MAC (the codec), a peer's
// session only while it is the newest (PeerSessions: a retired one is a
// replay), an eBPF stamp only when it is bound to an authentic packet by
// key and MAC and comes from a hook of the right direction (TapStampBook).
// A packet seen twice spoils the stamps it gave: the tuple still counts,
// but never reaches an estimate. Single-threaded (the agent loop).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <span>
#include <vector>

#include "agent/capture/packet_key.h"
#include "agent/pair/tuple_assembler.h"
#include "agent/probe/peer_sessions.h"
#include "agent/probe/probe_settings.h"
#include "agent/probe/probe_transport.h"
#include "agent/probe/tap_stamp_book.h"
#include "agent/probe/tx_stamp_need.h"
#include "agent/wire/probe_codec.h"

namespace chronolink {

struct PeerCounters {
  uint64_t packets_sent = 0;
  uint64_t bytes_sent = 0;
  uint64_t packets_received = 0;
  uint64_t bytes_received = 0;
  uint64_t pairs_sent = 0;
  uint64_t reverse_pairs_sent = 0;
  uint64_t followups_sent = 0;
  // Pilots (kPilotWireSize bytes each) are not in the packet and byte counts
  // above, which count probe messages. Received ones are attributed by
  // their unauthenticated sender id.
  uint64_t pilots_sent = 0;
  uint64_t pilots_received = 0;
  uint64_t late_tx_dropped = 0;           // late TX stamps given up (queue full)
  // Probes sent without asking the socket for TX stamps: the tap stamped
  // their predecessors better (tx_stamp_need.h).
  uint64_t probes_without_socket_tx = 0;
  uint64_t stamps_unmatched = 0;          // stamps for tuples no longer (or never) pending
  uint64_t stamps_wrong_domain = 0;       // stamps on the wrong clock, refused
  uint64_t send_errors = 0;
  uint64_t forward_pairs_incomplete = 0;  // a forward pair arrived without its probe 0
  uint64_t forward_pairs_spoiled = 0;     // not answered: a probe of it was seen twice
  // The peer's tuples made whole here (its forward pair echoed our receive
  // stamps of our answer to its previous pair): its session, mirrored.
  uint64_t peer_tuples_mirrored = 0;
  uint64_t tuples_spoiled = 0;            // ours, made unusable: a packet of it was seen twice
  uint64_t tuples_stepped = 0;            // ours, made unusable: a clock stepped while it was pending
  uint64_t peer_clock_steps = 0;          // the peer said its clock stepped (kFlagClockStepped)
  uint64_t peer_clock_remaps = 0;         // the peer's fit clock took a new rate (ClockRemap; copies once)
  uint64_t clock_remaps_sent = 0;         // ClockRemap datagrams of ours (every copy)
  uint64_t peer_restarts = 0;
  // While the peer's address was not yet confirmed: pairs sent (slowly),
  // and its forward pairs not answered (they came from elsewhere).
  uint64_t pairs_sent_unconfirmed = 0;
  uint64_t forwards_unanswered_unconfirmed = 0;
  bool address_confirmed = true;
};

struct EngineCounters {
  DecodeStats decode;
  // Stamps that reached the engine, by direction (0 rx, 1 tx) and source,
  // and the packets they could stamp: coverage per source.
  uint64_t stamps[2][kNumStampSources] = {};
  uint64_t packets[2] = {};
  uint64_t stamps_refused_by_policy = 0;  // a forced source is configured
  // eBPF tap records not used, by reason (docs/bpf-tap.md):
  uint64_t tap_stamps_unrouted = 0;  // neither sent by us nor addressed to us by a member
  uint64_t tap_rx_own_sender = 0;    // receive hook, claiming to come from us: never a send stamp
  uint64_t tap_tx_not_sent = 0;      // send hook, our id, but a key and MAC we did not send
  uint64_t tap_rx_unverified = 0;    // receive hook, no authentic datagram with its key and MAC came
  uint64_t tap_rx_late = 0;          // receive hook, after its datagram was read
  uint64_t tap_duplicates = 0;       // the packet was already seen at this hook and device
  uint64_t tap_bucket_full = 0;      // a new id whose bucket in the book was full (keyed hash: flood)
  uint64_t duplicate_datagrams = 0;  // authentic datagrams received twice (copies, replays)
  uint64_t not_for_us = 0;          // authentic, but addressed to another node
  uint64_t unknown_sender = 0;      // authentic, from a node not in the cluster
  uint64_t retired_session = 0;     // authentic, from an earlier session of the peer
  uint64_t stale_session = 0;       // answers an earlier epoch of ours
  uint64_t stale_sequence = 0;      // older than the pair in progress
  uint64_t tx_stamps = 0;
  uint64_t tx_stamps_unmatched = 0; // id not (or no longer) known
  uint64_t pilots_received = 0;     // from any sender (pilots are not authenticated)
};

struct ProbeEngineOptions {
  uint32_t node_id = 0;
  uint32_t cluster_id = 0;
  uint64_t epoch = 0;                // random per start
  std::vector<uint32_t> probed_peers;
  std::set<uint32_t> members;        // every node allowed to talk to us
  ProbeSettings probe;
  // kNone: every kernel source, best by SourceRank; else only this one.
  StampSource forced_source = StampSource::kNone;
  // Ask the socket for TX stamps of every probe even where another source
  // ranks above them (the stamp log shows every source).
  bool every_socket_stamp = false;
};

class ProbeEngine {
 public:
  using TupleSink = std::function<void(uint32_t peer, const FullTuple&)>;
  // A tuple of the peer's session, whole here once its next forward pair
  // echoed its receive stamps of our reverse pair, in our frame: our reverse
  // pair as the "forward" half, its forward pair as the "reverse" half
  // (MirrorPeerTuple). Stamps on each clock as in our own tuples.
  using MirrorSink = TupleSink;
  using PairSentSink = std::function<void(uint32_t peer, int64_t node_ns)>;
  // Sees every stamp bound to a packet of ours or to an authentic received
  // one, before the source policy (diagnostics).
  using StampObserver =
      std::function<void(const PacketKey& key, bool transmitted, const ProbeStamp& stamp)>;

  ProbeEngine(ProbeEngineOptions options, const ProbeCodec& codec, ProbeTransport& transport,
              TupleSink on_tuple, PairSentSink on_pair_sent);

  // A datagram from the socket, with our receive stamps (node clock).
  // Whether a datagram came from the listed address of the member it
  // authenticates as (the caller knows addresses; the engine does not).
  using SourceCheck = std::function<bool(uint32_t sender)>;
  // A datagram from the socket, with our receive stamps (node clock).
  void OnDatagram(std::span<const uint8_t> bytes, const DualStamp& local_rx, int64_t now_ns,
                  const SourceCheck& from_listed_address);
  // A TX stamp from the error queue, already on the node clock.
  void OnTxStamp(uint32_t op_id, const ProbeStamp& kernel);
  // A record of the eBPF tap, its stamp already on the node clock. Records
  // of send hooks go straight to the packet we sent with that key and MAC;
  // records of receive hooks normally arrive before their datagram (the
  // ring is read before the socket) and wait for it to pass the MAC.
  void OnTapStamp(const TapStamp& t);

  void SetStampObserver(StampObserver observer) { observer_ = std::move(observer); }
  void SetMirrorSink(MirrorSink sink) { on_mirror_ = std::move(sink); }

  // This edge's cadence from now on (adaptive cadence); the next pair comes
  // no later than one new interval from now.
  void SetInterval(uint32_t peer, int64_t interval_ns, int64_t now_ns);
  int64_t IntervalOf(uint32_t peer) const;

  // Runs everything due by now; returns the next instant (node clock) it
  // needs to run again.
  int64_t Poll(int64_t now_ns);

  // Finalises every pending tuple created before `before_ns` (the window
  // closer calls this), plus complete or timed-out ones.
  void FinalizeTuples(int64_t now_ns, int64_t before_ns);

  // Last words: follow-ups with every undelivered TX stamp (flag final).
  // From then on no forward probe is answered.
  void Shutdown(int64_t now_ns);

  // Our clock stepped by step_ns (now_ns already reads after it): pending
  // tuples are spoiled, every deadline moves with the clock, and for
  // kStepNoticeNs every datagram we send says so (kFlagClockStepped), so
  // that each peer discards its own windows around the step.
  static constexpr int64_t kStepNoticeNs = 1'000'000'000;
  void OnClockStep(int64_t step_ns, int64_t now_ns);
  // Called for every datagram of a peer that says its clock stepped.
  using PeerStepSink = std::function<void(uint32_t peer, int64_t now_ns)>;
  void SetPeerStepSink(PeerStepSink sink) { on_peer_step_ = std::move(sink); }

  // Our fit clock took a new rate without a step (fit_clock_remap.h): every
  // member whose address is confirmed gets a ClockRemap datagram now and
  // kRemapCopies − 1 more, kRemapEveryNs apart (one lost copy must not
  // bend its fits; a dozen are a few kB once per agent start).
  static constexpr int kRemapCopies = 10;
  static constexpr int64_t kRemapEveryNs = 100'000'000;
  void AnnounceClockRemap(const FitClockRemap& remap, int64_t now_ns);
  // Called once per remap of a peer, at its first copy.
  using PeerRemapSink = std::function<void(uint32_t peer, const FitClockRemap& remap, int64_t now_ns)>;
  void SetPeerRemapSink(PeerRemapSink sink) { on_peer_remap_ = std::move(sink); }

  // A membership change from the coordination layer: who may talk to us and
  // whom we probe. A dropped prober's pending tuples are finalised through
  // the tuple sink first; a new one starts at a random phase.
  void SetMembership(std::set<uint32_t> members, const std::vector<uint32_t>& probed_peers,
                     int64_t now_ns);
  const std::vector<uint32_t>& probed_peers() const { return options_.probed_peers; }

  // An address learned from a source that cannot vouch for it (etcd): until
  // an authentic datagram of the peer comes from that very address, pairs
  // go to it at most once per kUnconfirmedIntervalNs and without a pilot,
  // and its forward pairs are not answered, so that an address nobody
  // proved draws one pair a second, not the configured rate.
  static constexpr int64_t kUnconfirmedIntervalNs = 1'000'000'000;
  void RequireAddressConfirmation(uint32_t peer);
  bool AddressConfirmed(uint32_t peer) const { return unconfirmed_.count(peer) == 0; }

  EngineCounters counters() const;
  std::map<uint32_t, PeerCounters> peer_counters() const;
  uint64_t epoch() const { return options_.epoch; }

 private:
  enum class PacketKind : uint8_t { kNone, kForward, kReverse, kFollowUp, kPilot };
  struct SentPacket {
    uint32_t op_id = 0;
    PacketKind kind = PacketKind::kNone;
    uint32_t peer = 0;
    uint64_t seq = 0;
    uint8_t index = 0;
  };

  struct Prober {
    uint32_t peer = 0;
    uint64_t next_seq = 1;
    int64_t next_pair_ns = 0;
    int64_t second_due_ns = -1;   // probe 1 of the pair in progress
    uint64_t peer_epoch = 0;      // last epoch seen from the peer
    int64_t last_answer_ns = 0;
    bool silent_reported = false;
    int64_t backoff_ns = 0;
    bool pilot_sent = false;      // for the pair due at next_pair_ns
    int64_t interval_ns = 0;      // this edge's cadence (SetInterval)
    int64_t peer_step_seen_ns = -1;  // the last datagram saying the peer's clock stepped
    TupleAssembler assembler;
    explicit Prober(size_t max_pending) : assembler(max_pending) {}
  };

  struct ReversePair {
    uint64_t seq = 0;
    bool valid = false;
    bool carried_complete = false;  // a packet has carried both kernel TX stamps
    int64_t sent_ns = 0;
    DualStamp echo_rx[2];
    DualStamp tx[2];
    bool spoiled = false;  // a probe of it left twice: its TX stamps are sent as absent
    bool mirrored = false;  // the prober's echo of it came: handed to the mirror sink
    bool TxComplete() const {
      return spoiled || (tx[0].kernel.present() && tx[1].kernel.present());
    }
    // The TX stamps this pair can vouch for.
    DualStamp TxToSend(int i) const { return spoiled ? DualStamp{} : tx[i]; }
  };

  struct Responder {
    uint64_t prober_epoch = 0;
    uint64_t fwd_seq = 0;
    bool have[2] = {false, false};
    bool spoiled = false;        // a probe of pair fwd_seq was seen twice: no answer
    DualStamp rx[2];
    ReversePair sending;         // the pair being (or last) sent
    ReversePair previous;        // its predecessor, whose TX stamps ride along
    std::deque<ReversePair> late;  // replaced before their TX stamps rode along complete
    int64_t second_due_ns = -1;  // reverse probe 1 of `sending`
    int64_t followup_due_ns = -1;
    bool sending_delivered = true;
    bool Answered() const { return sending.valid && sending.seq == fwd_seq; }
    // Every pair kept that answered forward pair `seq` (at most one).
    template <class F>
    void ForEachPair(uint64_t seq, F f) {
      for (ReversePair* p : {&sending, &previous}) {
        if (p->valid && p->seq == seq) f(*p);
      }
      for (ReversePair& p : late) {
        if (p.valid && p.seq == seq) f(p);
      }
    }
  };

  void AddProber(uint32_t peer);
  // A pair's probes go `spacing` apart, or with spacing 0 back to back in
  // one system call (and the pilot with them when its lead is 0).
  bool BurstPairs() const { return options_.probe.spacing_ns == 0; }
  ProbeMessage ForwardMessage(const Prober& p, uint64_t seq, int index) const;
  void SendForward(Prober& p, int index, int64_t now_ns);
  void SendForwardPair(Prober& p, bool with_pilot, int64_t now_ns);
  void AfterForwardSent(Prober& p, uint64_t seq, int index, const SendOutcome& out, int64_t now_ns);
  void SendPilot(Prober& p);
  void AfterPilotSent(uint32_t peer, const SendOutcome& out);
  void OnPilot(uint32_t sender);
  ProbeMessage ReverseMessage(uint32_t peer, const Responder& r, int index) const;
  void SendReverse(uint32_t peer, Responder& r, int index);
  void SendReversePair(uint32_t peer, Responder& r);
  void AfterReverseSent(Responder& r, int index, const SendOutcome& out);
  void SendFollowUp(uint32_t peer, const Responder& r, const ReversePair& pair, bool final);
  void SendDueFollowUps(uint32_t peer, Responder& r, int64_t now_ns, bool all);
  bool Transmit(uint32_t peer, const ProbeMessage& m, PacketKind kind, SendOutcome* out);
  // Both probes of a pair in one burst, the pilot first if asked.
  void TransmitPair(uint32_t peer, const ProbeMessage (&m)[2], PacketKind kind, bool with_pilot,
                    SendOutcome (&out)[2]);
  bool WantsTxStamps(uint32_t peer, PacketKind kind);
  bool RecordSent(uint32_t peer, const ProbeMessage& m, PacketKind kind, std::span<const uint8_t> datagram,
                  const SendOutcome& out);
  TxStampNeed& TxNeedOf(uint32_t peer);

  bool AdmitSession(const ProbeMessage& m, int64_t now_ns);
  void ConfirmAddress(uint32_t peer, int64_t now_ns);
  DualStamp ReceiveStamps(const PacketKey& key, const DualStamp& local_rx,
                          const TapStampBook::Received& held);
  void OnForward(const ProbeMessage& m, const DualStamp& local_rx, bool spoiled, int64_t now_ns);
  void OnReverse(const ProbeMessage& m, const DualStamp& local_rx, bool spoiled, int64_t now_ns);
  void OnFollowUp(const ProbeMessage& m, int64_t now_ns);
  void OnPeerClockStep(uint32_t peer, int64_t now_ns);
  // The forward pair m echoes the prober's receive stamps of our reverse
  // pair m.prev_tx_seq, whose forward TX stamps it carries too: that
  // tuple of the prober's session is whole here.
  void MirrorPeerTuple(const ProbeMessage& m, Responder& r, int64_t now_ns);
  void StartReversePair(uint32_t peer, Responder& r, int64_t now_ns);

  int64_t NextInterval(const Prober& p);
  // NextInterval, or the slow cadence of a peer whose address is unconfirmed.
  int64_t IntervalFor(const Prober& p);
  void OnTapSent(const TapStamp& t);
  void OnTapReceived(const TapStamp& t);
  // A packet seen twice: spoil what its stamps went into.
  void SpoilSent(const PacketKey& key);
  void SpoilReceived(const PacketKey& key);
  bool Accept(const ProbeStamp& s, bool transmitted) const;
  void Observe(const PacketKey& key, bool tx, const ProbeStamp& s);
  void RouteTxStamp(PacketKind kind, uint32_t peer, uint64_t seq, uint8_t index,
                    const ProbeStamp& kernel);
  PacketKey SentKey(PacketKind kind, uint32_t peer, uint64_t seq, uint8_t index) const;
  ProbeMessage BaseMessage(MessageType type, uint32_t to) const;

  ProbeEngineOptions options_;
  const ProbeCodec& codec_;
  ProbeTransport& transport_;
  TupleSink on_tuple_;
  PairSentSink on_pair_sent_;
  std::mt19937_64 rng_;

  std::map<uint32_t, std::unique_ptr<Prober>> probers_;
  std::map<uint32_t, Responder> responders_;
  bool shut_down_ = false;  // Shutdown ran: no forward probe is answered
  std::vector<SentPacket> sent_ring_;  // stamped sends, indexed by op_id % size
  std::map<uint32_t, TxStampNeed> tx_need_;  // by peer
  EngineCounters counters_;
  StampObserver observer_;
  MirrorSink on_mirror_;
  PeerStepSink on_peer_step_;
  PeerRemapSink on_peer_remap_;
  struct RemapNotice {
    FitClockRemap remap;
    uint64_t number = 0;  // ours, 1 up: the seq of its datagrams
    int copies_left = 0;
    int64_t next_ns = 0;
  };
  RemapNotice remap_notice_;
  void SendRemapCopies(int64_t now_ns);
  void OnPeerClockRemap(const ProbeMessage& m, int64_t now_ns);
  // The last remap number taken from each peer, by its session.
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> peer_remap_seen_;
  int64_t step_notice_until_ns_ = -1;  // our datagrams carry kFlagClockStepped until then
  TapStampBook tap_book_;
  PeerSessions sessions_;
  std::map<uint32_t, PeerCounters> peer_counters_;
  std::set<uint32_t> unconfirmed_;  // peers whose address no authentic datagram has confirmed
};

}  // namespace chronolink
