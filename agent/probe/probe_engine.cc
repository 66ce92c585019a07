#include "agent/probe/probe_engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

namespace chronolink {

namespace {

constexpr size_t kSentRingSize = 1 << 14;  // > packets in flight within the tuple timeout
constexpr int64_t kSilentAfterNs = 5'000'000'000;
constexpr int64_t kMaxBackoffNs = 5'000'000'000;
constexpr int64_t kFirstBackoffNs = 10'000'000;
constexpr size_t kMaxLatePairs = 16;
constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

}  // namespace

ProbeEngine::ProbeEngine(ProbeEngineOptions options, const ProbeCodec& codec,
                         ProbeTransport& transport, TupleSink on_tuple, PairSentSink on_pair_sent)
    : options_(std::move(options)), codec_(codec), transport_(transport),
      on_tuple_(std::move(on_tuple)), on_pair_sent_(std::move(on_pair_sent)),
      rng_(options_.epoch), sent_ring_(kSentRingSize) {
  for (uint32_t peer : options_.probed_peers) AddProber(peer);
}

void ProbeEngine::AddProber(uint32_t peer) {
  auto p = std::make_unique<Prober>(options_.probe.max_pending_tuples);
  p->peer = peer;
  p->interval_ns = options_.probe.interval_ns;
  p->next_pair_ns = -1;  // phase chosen on the first Poll
  probers_[peer] = std::move(p);
}

void ProbeEngine::SetMembership(std::set<uint32_t> members, const std::vector<uint32_t>& probed_peers,
                                int64_t now_ns) {
  options_.members = std::move(members);
  options_.probed_peers = probed_peers;
  const std::set<uint32_t> wanted(probed_peers.begin(), probed_peers.end());
  for (auto it = probers_.begin(); it != probers_.end();) {
    if (wanted.count(it->first) != 0) {
      ++it;
      continue;
    }
    // Hand over what was measured: every pending tuple goes to the sink now
    // (complete ones still make their window; the rest count as lost).
    const uint32_t peer = it->first;
    it->second->assembler.Finalize([](const FullTuple&) { return true; },
                                   [&](const FullTuple& t) { on_tuple_(peer, t); });
    it = probers_.erase(it);
  }
  for (uint32_t peer : probed_peers) {
    if (probers_.count(peer) == 0) AddProber(peer);
  }
  // Answering a node that left is pointless, and its datagrams are refused now.
  std::erase_if(responders_, [&](const auto& kv) { return options_.members.count(kv.first) == 0; });
  sessions_.KeepOnly(options_.members);
  std::erase_if(unconfirmed_, [&](uint32_t peer) { return options_.members.count(peer) == 0; });
  (void)now_ns;
}

int64_t ProbeEngine::IntervalFor(const Prober& p) {
  return AddressConfirmed(p.peer) ? NextInterval(p) : std::max(kUnconfirmedIntervalNs, NextInterval(p));
}

void ProbeEngine::SetInterval(uint32_t peer, int64_t interval_ns, int64_t now_ns) {
  auto it = probers_.find(peer);
  if (it == probers_.end() || interval_ns <= 0) return;
  Prober& p = *it->second;
  p.interval_ns = interval_ns;
  if (p.next_pair_ns > now_ns + interval_ns) p.next_pair_ns = now_ns + interval_ns;
}

int64_t ProbeEngine::IntervalOf(uint32_t peer) const {
  auto it = probers_.find(peer);
  return it == probers_.end() ? 0 : it->second->interval_ns;
}

void ProbeEngine::RequireAddressConfirmation(uint32_t peer) { unconfirmed_.insert(peer); }

void ProbeEngine::ConfirmAddress(uint32_t peer, int64_t now_ns) {
  if (unconfirmed_.erase(peer) == 0) return;
  spdlog::info("peer {}: its address is confirmed by an authentic probe from it; probing at the full rate", peer);
  // Probe at the configured rate from now on, not a slow interval later.
  auto it = probers_.find(peer);
  if (it != probers_.end() && it->second->next_pair_ns > now_ns + it->second->interval_ns) {
    it->second->next_pair_ns = now_ns + it->second->interval_ns;
  }
}

int64_t ProbeEngine::NextInterval(const Prober& p) {
  const double j = options_.probe.jitter_fraction;
  std::uniform_real_distribution<double> u(-j, j);
  return static_cast<int64_t>(static_cast<double>(p.interval_ns) * (1.0 + u(rng_)));
}

ProbeMessage ProbeEngine::BaseMessage(MessageType type, uint32_t to) const {
  ProbeMessage m;
  m.type = type;
  m.cluster_id = options_.cluster_id;
  m.sender_node = options_.node_id;
  m.receiver_node = to;
  m.sender_epoch = options_.epoch;
  if (step_notice_until_ns_ >= 0) m.flags |= kFlagClockStepped;
  return m;
}

TxStampNeed& ProbeEngine::TxNeedOf(uint32_t peer) {
  auto it = tx_need_.find(peer);
  if (it != tx_need_.end()) return it->second;
  const bool always = options_.every_socket_stamp || options_.forced_source == StampSource::kSocketSched ||
                      options_.forced_source == StampSource::kSocketSoftware;
  return tx_need_.emplace(peer, TxStampNeed(always)).first->second;
}

bool ProbeEngine::WantsTxStamps(uint32_t peer, PacketKind kind) {
  // Only probes' TX times are used (follow-ups only carry stamps), and only
  // while no better source stamps them.
  const bool probe = kind == PacketKind::kForward || kind == PacketKind::kReverse;
  return probe && TxNeedOf(peer).Wanted();
}

bool ProbeEngine::Transmit(uint32_t peer, const ProbeMessage& m, PacketKind kind,
                           SendOutcome* out) {
  std::array<uint8_t, kProbeWireSize> buf;
  codec_.Encode(m, buf);
  *out = transport_.Send(peer, buf, WantsTxStamps(peer, kind));
  return RecordSent(peer, m, kind, buf, *out);
}

void ProbeEngine::TransmitPair(uint32_t peer, const ProbeMessage (&m)[2], PacketKind kind, bool with_pilot,
                               SendOutcome (&out)[2]) {
  std::array<uint8_t, kPilotWireSize> pilot;
  std::array<std::array<uint8_t, kProbeWireSize>, 2> probes;
  std::array<ProbeTransport::BurstDatagram, 3> burst;
  size_t n = 0;
  if (with_pilot) {
    codec_.EncodePilot(options_.node_id, pilot);
    burst[n++] = {pilot, false};
  }
  const bool stamps = WantsTxStamps(peer, kind);
  for (int i = 0; i < 2; ++i) {
    codec_.Encode(m[i], probes[i]);
    burst[n++] = {probes[i], stamps};
  }
  std::array<SendOutcome, 3> sent;
  transport_.SendBurst(peer, std::span(burst.data(), n), std::span(sent.data(), n));
  size_t k = 0;
  if (with_pilot) AfterPilotSent(peer, sent[k++]);
  for (int i = 0; i < 2; ++i) {
    out[i] = sent[k++];
    RecordSent(peer, m[i], kind, probes[i], out[i]);
  }
}

bool ProbeEngine::RecordSent(uint32_t peer, const ProbeMessage& m, PacketKind kind,
                             std::span<const uint8_t> datagram, const SendOutcome& out) {
  PeerCounters& pc = peer_counters_[peer];
  if (!out.ok) {
    ++pc.send_errors;
    return false;
  }
  ++pc.packets_sent;
  pc.bytes_sent += datagram.size();
  // The eBPF send hooks' records of this packet count only with this MAC.
  tap_book_.ExpectSent(KeyOf(m), MacOfDatagram(datagram));
  if (kind == PacketKind::kForward || kind == PacketKind::kReverse) TxNeedOf(peer).OnProbeSent();
  if (out.stamped) sent_ring_[out.op_id % kSentRingSize] = SentPacket{out.op_id, kind, peer, m.seq, m.index};
  ++counters_.packets[1];
  Observe(KeyOf(m), true, ProbeStamp{out.user_tx_ns, StampSource::kUserspace});
  return true;
}

bool ProbeEngine::Accept(const ProbeStamp& s, bool transmitted) const {
  if (s.source == StampSource::kUserspace || options_.forced_source == StampSource::kNone) {
    return true;
  }
  // TX_SCHED exists only on transmit: forcing it means socket stamps with
  // the scheduling stamp on TX and RX_SOFTWARE, the only socket RX stamp.
  if (options_.forced_source == StampSource::kSocketSched && !transmitted) {
    return s.source == StampSource::kSocketSoftware;
  }
  return s.source == options_.forced_source;
}

void ProbeEngine::Observe(const PacketKey& key, bool tx, const ProbeStamp& s) {
  ++counters_.stamps[tx ? 1 : 0][static_cast<int>(s.source)];
  if (observer_) observer_(key, tx, s);
}

PacketKey ProbeEngine::SentKey(PacketKind kind, uint32_t peer, uint64_t seq, uint8_t index) const {
  PacketKey k;
  k.type = kind == PacketKind::kForward   ? MessageType::kForward
           : kind == PacketKind::kReverse ? MessageType::kReverse
                                          : MessageType::kFollowUp;
  k.sender = options_.node_id;
  k.receiver = peer;
  k.sender_epoch = options_.epoch;
  k.seq = seq;
  k.index = index;
  return k;
}

// ---- prober side -----------------------------------------------------------

void ProbeEngine::SendPilot(Prober& p) {
  p.pilot_sent = true;
  std::array<uint8_t, kPilotWireSize> buf;
  codec_.EncodePilot(options_.node_id, buf);
  AfterPilotSent(p.peer, transport_.Send(p.peer, buf, false));
}

void ProbeEngine::AfterPilotSent(uint32_t peer, const SendOutcome& out) {
  PeerCounters& pc = peer_counters_[peer];
  if (!out.ok) {
    ++pc.send_errors;  // the pair's own send reports and backs off
    return;
  }
  ++pc.pilots_sent;
  // With NIC stamping on, the pilot is stamped too: its stamps are known and
  // ignored rather than counted unmatched.
  if (out.stamped) sent_ring_[out.op_id % kSentRingSize] = SentPacket{out.op_id, PacketKind::kPilot, peer, 0, 0};
}

ProbeMessage ProbeEngine::ForwardMessage(const Prober& p, uint64_t seq, int index) const {
  ProbeMessage m = BaseMessage(MessageType::kForward, p.peer);
  m.seq = seq;
  m.index = static_cast<uint8_t>(index);
  m.echo_epoch = p.peer_epoch;
  if (const FullTuple* prev = p.assembler.Peek(seq - 1)) {
    m.flags |= kFlagHasPrevTx;
    m.prev_tx_seq = prev->seq;
    m.prev_tx[0] = prev->fwd_tx[0];
    m.prev_tx[1] = prev->fwd_tx[1];
    // Our receive stamps of the peer's answer to that pair: with them the
    // peer holds the whole tuple and fits its side of the edge on both
    // sessions. A spoiled tuple vouches for none of its stamps.
    if (options_.probe.echo_reverse_rx && !prev->spoiled &&
        (prev->rev_rx[0].user.present() || prev->rev_rx[1].user.present())) {
      m.flags |= kFlagHasEchoRx;
      m.echo_rx[0] = prev->rev_rx[0];
      m.echo_rx[1] = prev->rev_rx[1];
    }
  }
  return m;
}

void ProbeEngine::SendForward(Prober& p, int index, int64_t now_ns) {
  const uint64_t seq = index == 0 ? p.next_seq : p.next_seq - 1;
  SendOutcome out;
  Transmit(p.peer, ForwardMessage(p, seq, index), PacketKind::kForward, &out);
  AfterForwardSent(p, seq, index, out, now_ns);
}

void ProbeEngine::SendForwardPair(Prober& p, bool with_pilot, int64_t now_ns) {
  const uint64_t seq = p.next_seq;
  const ProbeMessage m[2] = {ForwardMessage(p, seq, 0), ForwardMessage(p, seq, 1)};
  SendOutcome out[2];
  TransmitPair(p.peer, m, PacketKind::kForward, with_pilot, out);
  AfterForwardSent(p, seq, 0, out[0], now_ns);
  if (out[0].ok) AfterForwardSent(p, seq, 1, out[1], now_ns);
}

void ProbeEngine::AfterForwardSent(Prober& p, uint64_t seq, int index, const SendOutcome& out, int64_t now_ns) {
  if (!out.ok) {
    p.backoff_ns = p.backoff_ns == 0 ? kFirstBackoffNs : std::min(2 * p.backoff_ns, kMaxBackoffNs);
    spdlog::warn("send to peer {} failed: {}; retrying in {} ms", p.peer, std::strerror(out.error),
                 p.backoff_ns / 1'000'000);
    p.second_due_ns = -1;
    p.next_pair_ns = now_ns + p.backoff_ns;
    return;
  }
  if (p.backoff_ns != 0 && index == 1) {
    spdlog::info("sending to peer {} works again", p.peer);
    p.backoff_ns = 0;
  }
  if (index == 0) {
    ++p.next_seq;
    ++peer_counters_[p.peer].pairs_sent;
    on_pair_sent_(p.peer, out.user_tx_ns);
    p.second_due_ns = now_ns + options_.probe.spacing_ns;
  } else {
    p.second_due_ns = -1;
  }
  p.assembler.OnForwardSent(seq, index, out.user_tx_ns);
}

void ProbeEngine::OnReverse(const ProbeMessage& m, const DualStamp& local_rx, bool spoiled,
                            int64_t now_ns) {
  auto it = probers_.find(m.sender_node);
  if (it == probers_.end()) {
    ++counters_.unknown_sender;  // we do not probe this node
    return;
  }
  if (m.echo_epoch != options_.epoch) {
    ++counters_.stale_session;
    return;
  }
  Prober& p = *it->second;
  // The peer's session was admitted (a retired one never gets here); its
  // restarts are counted there.
  p.peer_epoch = m.sender_epoch;
  if (p.silent_reported) spdlog::info("peer {} answers again", p.peer);
  p.silent_reported = false;
  p.last_answer_ns = now_ns;
  if (m.flags & kFlagHasEchoRx) p.assembler.OnEchoedRx(m.seq, m.echo_rx);
  if (!p.assembler.OnReverseRx(m.seq, m.index, local_rx)) ++counters_.duplicate_datagrams;
  if (spoiled) p.assembler.Spoil(m.seq);
  if (m.flags & kFlagHasPrevTx) p.assembler.OnReverseTx(m.prev_tx_seq, m.prev_tx);
}

void ProbeEngine::OnFollowUp(const ProbeMessage& m, int64_t now_ns) {
  auto it = probers_.find(m.sender_node);
  if (it == probers_.end()) {
    ++counters_.unknown_sender;
    return;
  }
  if (m.echo_epoch != options_.epoch) {
    ++counters_.stale_session;
    return;
  }
  if (m.flags & kFlagHasPrevTx) it->second->assembler.OnReverseTx(m.prev_tx_seq, m.prev_tx);
}

// ---- responder side --------------------------------------------------------

void ProbeEngine::OnForward(const ProbeMessage& m, const DualStamp& local_rx, bool spoiled,
                            int64_t now_ns) {
  // A node shutting down starts no exchange: the stamps of an answer sent
  // while it drains may never be collected, and no follow-up would carry them.
  if (shut_down_) return;
  Responder& r = responders_[m.sender_node];
  if (r.prober_epoch != m.sender_epoch) {
    // The session was admitted as the peer's newest: an earlier one never
    // gets here, so a replay cannot reset the pair in progress.
    if (r.prober_epoch != 0) {
      spdlog::info("prober {} started a new session {:x}", m.sender_node, m.sender_epoch);
    }
    r = Responder{};
    r.prober_epoch = m.sender_epoch;
  }
  if (m.seq < r.fwd_seq) {
    ++counters_.stale_sequence;
    return;
  }
  MirrorPeerTuple(m, r, now_ns);
  if (m.seq > r.fwd_seq) {
    r.fwd_seq = m.seq;
    r.have[0] = r.have[1] = false;
    r.spoiled = false;
    r.rx[0] = r.rx[1] = DualStamp{};
  }
  if (r.have[m.index]) {
    // An authentic copy (a replay, or the network duplicated it): which
    // of the two the prober sent is unknowable, so neither stamp counts.
    ++counters_.duplicate_datagrams;
    spoiled = true;
  }
  // A pair is answered once; a copy arriving after that changes nothing we
  // measured (the first copy arrived first, so after the prober sent it).
  if (r.Answered()) return;
  r.spoiled = r.spoiled || spoiled;
  if (!r.have[m.index]) {
    r.have[m.index] = true;
    r.rx[m.index] = local_rx;
  }
  if (m.index == 1) {
    if (!r.have[0]) {
      ++peer_counters_[m.sender_node].forward_pairs_incomplete;
    } else if (r.spoiled) {
      ++peer_counters_[m.sender_node].forward_pairs_spoiled;
    } else {
      StartReversePair(m.sender_node, r, now_ns);
    }
  }
}

void ProbeEngine::MirrorPeerTuple(const ProbeMessage& m, Responder& r, int64_t now_ns) {
  constexpr uint16_t kBoth = kFlagHasPrevTx | kFlagHasEchoRx;
  if ((m.flags & kBoth) != kBoth || !on_mirror_) return;
  // Across a clock step the halves are on different clocks; the windows
  // around it are discarded anyway.
  if ((m.flags & kFlagClockStepped) || (step_notice_until_ns_ >= 0 && now_ns < step_notice_until_ns_)) return;
  ReversePair* pair = nullptr;
  r.ForEachPair(m.prev_tx_seq, [&](ReversePair& p) { pair = &p; });
  if (pair == nullptr || pair->mirrored || pair->spoiled || !pair->tx[0].user.present()) return;
  pair->mirrored = true;
  for (int i = 0; i < 2; ++i) {
    if (!m.echo_rx[i].InDomain(ClockDomain::kPeerRealtime) || !m.prev_tx[i].InDomain(ClockDomain::kPeerRealtime)) {
      ++peer_counters_[m.sender_node].stamps_wrong_domain;
      return;
    }
  }
  FullTuple t;
  t.seq = pair->seq;
  t.created_ns = pair->tx[0].user.ns;  // our send of the reverse pair: the tuple's place in our windows
  for (int i = 0; i < 2; ++i) {
    t.fwd_tx[i] = pair->tx[i];       // ours, of our reverse probe
    t.fwd_rx[i] = m.echo_rx[i];      // the peer's receive stamp of it
    t.rev_tx[i] = m.prev_tx[i];      // the peer's send stamp of its forward probe
    t.rev_rx[i] = pair->echo_rx[i];  // our receive stamp of it
    t.sent[i] = true;
  }
  ++peer_counters_[m.sender_node].peer_tuples_mirrored;
  on_mirror_(m.sender_node, t);
}

void ProbeEngine::StartReversePair(uint32_t peer, Responder& r, int64_t now_ns) {
  if (r.second_due_ns >= 0) SendReverse(peer, r, 1);  // finish the pair in flight first
  if (r.previous.valid && !r.previous.carried_complete) {
    // Under load a burst of forward pairs can replace `previous` before its
    // TX stamps were read back: keep it for a follow-up instead of losing them.
    if (r.late.size() >= kMaxLatePairs) {
      r.late.pop_front();
      ++peer_counters_[peer].late_tx_dropped;
    }
    r.late.push_back(r.previous);
  }
  if (r.sending.valid) r.previous = r.sending;
  r.sending = ReversePair{};
  r.sending.valid = true;
  r.sending.seq = r.fwd_seq;
  r.sending.echo_rx[0] = r.rx[0];
  r.sending.echo_rx[1] = r.rx[1];
  // The pair starting now carries the predecessor's TX stamps: no follow-up needed.
  r.sending_delivered = true;
  r.followup_due_ns = -1;
  if (BurstPairs()) {
    SendReversePair(peer, r);
  } else {
    SendReverse(peer, r, 0);
    r.second_due_ns = now_ns + options_.probe.spacing_ns;
  }
  ++peer_counters_[peer].reverse_pairs_sent;
}

ProbeMessage ProbeEngine::ReverseMessage(uint32_t peer, const Responder& r, int index) const {
  ProbeMessage m = BaseMessage(MessageType::kReverse, peer);
  m.seq = r.sending.seq;
  m.index = static_cast<uint8_t>(index);
  m.echo_epoch = r.prober_epoch;
  m.flags |= kFlagHasEchoRx;
  m.echo_rx[0] = r.sending.echo_rx[0];
  m.echo_rx[1] = r.sending.echo_rx[1];
  if (r.previous.valid) {
    m.flags |= kFlagHasPrevTx;
    m.prev_tx_seq = r.previous.seq;
    m.prev_tx[0] = r.previous.TxToSend(0);
    m.prev_tx[1] = r.previous.TxToSend(1);
  }
  return m;
}

void ProbeEngine::SendReverse(uint32_t peer, Responder& r, int index) {
  SendOutcome out;
  Transmit(peer, ReverseMessage(peer, r, index), PacketKind::kReverse, &out);
  AfterReverseSent(r, index, out);
}

void ProbeEngine::SendReversePair(uint32_t peer, Responder& r) {
  const ProbeMessage m[2] = {ReverseMessage(peer, r, 0), ReverseMessage(peer, r, 1)};
  SendOutcome out[2];
  TransmitPair(peer, m, PacketKind::kReverse, options_.probe.reverse_pilot, out);
  AfterReverseSent(r, 0, out[0]);
  AfterReverseSent(r, 1, out[1]);
}

void ProbeEngine::AfterReverseSent(Responder& r, int index, const SendOutcome& out) {
  if (out.ok) {
    r.sending.tx[index].user = {out.user_tx_ns, StampSource::kUserspace};
    if (r.previous.valid && r.previous.TxComplete()) r.previous.carried_complete = true;
  }
  r.sending.sent_ns = out.user_tx_ns;
  if (index == 1) {
    r.second_due_ns = -1;
    r.sending_delivered = false;
    r.followup_due_ns = out.user_tx_ns + options_.probe.followup_delay_ns;
  }
}

void ProbeEngine::SendFollowUp(uint32_t peer, const Responder& r, const ReversePair& pair,
                               bool final) {
  ProbeMessage m = BaseMessage(MessageType::kFollowUp, peer);
  m.echo_epoch = r.prober_epoch;
  m.flags |= kFlagHasPrevTx | (final ? kFlagFinal : 0);
  m.prev_tx_seq = pair.seq;
  m.prev_tx[0] = pair.TxToSend(0);
  m.prev_tx[1] = pair.TxToSend(1);
  SendOutcome out;
  if (Transmit(peer, m, PacketKind::kFollowUp, &out)) ++peer_counters_[peer].followups_sent;
}

void ProbeEngine::SendDueFollowUps(uint32_t peer, Responder& r, int64_t now_ns, bool all) {
  const int64_t delay = options_.probe.followup_delay_ns;
  while (!r.late.empty() &&
         (all || r.late.front().TxComplete() || now_ns - r.late.front().sent_ns > delay)) {
    SendFollowUp(peer, r, r.late.front(), all);
    r.late.pop_front();
  }
  if (!r.sending_delivered && r.followup_due_ns >= 0 && (all || now_ns >= r.followup_due_ns)) {
    SendFollowUp(peer, r, r.sending, all);
    r.sending_delivered = true;
    r.followup_due_ns = -1;
  }
}

// ---- events ----------------------------------------------------------------

void ProbeEngine::OnDatagram(std::span<const uint8_t> bytes, const DualStamp& local_rx, int64_t now_ns,
                             const SourceCheck& from_listed_address) {
  uint32_t pilot_sender = 0;
  if (codec_.DecodePilot(bytes, &pilot_sender)) {
    OnPilot(pilot_sender);
    return;
  }
  ProbeMessage m;
  const DecodeResult res = codec_.Decode(bytes, &m);
  counters_.decode.Count(res);
  if (res != DecodeResult::kOk) return;
  if (m.receiver_node != options_.node_id) {
    ++counters_.not_for_us;
    return;
  }
  if (options_.members.count(m.sender_node) == 0 || m.sender_node == options_.node_id) {
    ++counters_.unknown_sender;
    return;
  }
  if (!AdmitSession(m, now_ns)) return;
  if (!AddressConfirmed(m.sender_node)) {
    if (from_listed_address(m.sender_node)) {
      ConfirmAddress(m.sender_node, now_ns);
    } else if (m.type == MessageType::kForward) {
      // Our answer would go to an address nobody has proved.
      ++peer_counters_[m.sender_node].forwards_unanswered_unconfirmed;
      return;
    }
  }
  PeerCounters& pc = peer_counters_[m.sender_node];
  ++pc.packets_received;
  pc.bytes_received += bytes.size();
  if (m.type == MessageType::kClockRemap) {  // no stamp of it is wanted
    OnPeerClockRemap(m, now_ns);
    return;
  }
  ++counters_.packets[0];

  // Every capture point's stamp of this packet: the socket's, and the eBPF
  // receive hooks' records bound to it by key and MAC.
  const PacketKey key = KeyOf(m);
  const TapStampBook::Received held = tap_book_.OnAuthenticDatagram(key, MacOfDatagram(bytes));
  counters_.tap_duplicates += held.duplicate_records;
  const DualStamp rx = ReceiveStamps(key, local_rx, held);
  switch (m.type) {
    case MessageType::kForward: OnForward(m, rx, held.duplicate, now_ns); break;
    case MessageType::kReverse: OnReverse(m, rx, held.duplicate, now_ns); break;
    case MessageType::kFollowUp: OnFollowUp(m, now_ns); break;
    case MessageType::kClockRemap:
      break;  // taken above
  }
  // After the message's stamps went in: a tuple they completed is spoiled too.
  if (m.flags & kFlagClockStepped) OnPeerClockStep(m.sender_node, now_ns);
}

void ProbeEngine::OnPeerClockStep(uint32_t peer, int64_t now_ns) {
  auto it = probers_.find(peer);
  if (it != probers_.end()) {
    Prober& p = *it->second;
    // One notice lasts kStepNoticeNs: its first datagram spoils what was pending.
    if (p.peer_step_seen_ns < 0 || now_ns - p.peer_step_seen_ns > 2 * kStepNoticeNs) {
      spdlog::warn("peer {} says its clock stepped: discarding this edge's windows around it", peer);
      ++peer_counters_[peer].peer_clock_steps;
      p.assembler.SpoilPending();
    }
    p.peer_step_seen_ns = now_ns;
  }
  if (on_peer_step_) on_peer_step_(peer, now_ns);
}

void ProbeEngine::AnnounceClockRemap(const FitClockRemap& remap, int64_t now_ns) {
  remap_notice_.remap = remap;
  ++remap_notice_.number;
  remap_notice_.copies_left = kRemapCopies;
  remap_notice_.next_ns = now_ns;
  SendRemapCopies(now_ns);
}

void ProbeEngine::SendRemapCopies(int64_t now_ns) {
  if (remap_notice_.copies_left <= 0 || now_ns < remap_notice_.next_ns) return;
  --remap_notice_.copies_left;
  remap_notice_.next_ns = now_ns + kRemapEveryNs;
  for (uint32_t peer : options_.members) {
    if (peer == options_.node_id || !AddressConfirmed(peer)) continue;
    ProbeMessage m = BaseMessage(MessageType::kClockRemap, peer);
    m.flags = 0;
    m.seq = remap_notice_.number;
    m.remap = remap_notice_.remap;
    std::array<uint8_t, kProbeWireSize> buf;
    codec_.Encode(m, buf);
    const SendOutcome out = transport_.Send(peer, buf, false);
    PeerCounters& pc = peer_counters_[peer];
    if (!out.ok) {
      ++pc.send_errors;
      continue;
    }
    ++pc.clock_remaps_sent;
    ++pc.packets_sent;
    pc.bytes_sent += buf.size();
  }
}

void ProbeEngine::OnPeerClockRemap(const ProbeMessage& m, int64_t now_ns) {
  auto& [epoch, last] = peer_remap_seen_[m.sender_node];
  if (epoch != m.sender_epoch) {  // a new session numbers its remaps from 1
    epoch = m.sender_epoch;
    last = 0;
  }
  if (m.seq <= last) return;  // a copy
  last = m.seq;
  ++peer_counters_[m.sender_node].peer_clock_remaps;
  spdlog::info(
      "peer {}'s fit clock took a new rate at {} (its F), {:+.3f} ppm from {:+.3f} ppm: its stamps before "
      "that go onto the new rate for the fits across it",
      m.sender_node, m.remap.at_fit_ns, static_cast<double>(m.remap.rate_after_fine) / 1e9,
      static_cast<double>(m.remap.rate_before_fine) / 1e9);
  if (on_peer_remap_) on_peer_remap_(m.sender_node, m.remap, now_ns);
}

void ProbeEngine::OnClockStep(int64_t step_ns, int64_t now_ns) {
  step_notice_until_ns_ = now_ns + kStepNoticeNs;
  auto shift = [step_ns](int64_t& t) {
    if (t >= 0) t += step_ns;
  };
  for (auto& [peer, pp] : probers_) {
    Prober& p = *pp;
    p.assembler.SpoilPending();
    shift(p.next_pair_ns);
    shift(p.second_due_ns);
    shift(p.last_answer_ns);
    shift(p.peer_step_seen_ns);
  }
  for (auto& [peer, r] : responders_) {
    shift(r.second_due_ns);
    shift(r.followup_due_ns);
    shift(r.sending.sent_ns);
    shift(r.previous.sent_ns);
    for (ReversePair& pair : r.late) shift(pair.sent_ns);
  }
}

bool ProbeEngine::AdmitSession(const ProbeMessage& m, int64_t now_ns) {
  switch (sessions_.Admit(m.sender_node, m.sender_epoch, now_ns)) {
    case PeerSessions::Admission::kRetired:
      ++counters_.retired_session;  // a replay, or a straggler from before a restart
      return false;
    case PeerSessions::Admission::kOlder:
      ++peer_counters_[m.sender_node].peer_restarts;
      spdlog::warn("peer {} silent for {} s; now speaks in an older session {:x} (its clock went back?)",
                   m.sender_node, PeerSessions::kSilenceBeforeOlderNs / 1'000'000'000, m.sender_epoch);
      return true;
    case PeerSessions::Admission::kRestart:
      ++peer_counters_[m.sender_node].peer_restarts;
      spdlog::info("peer {} restarted (new session {:x})", m.sender_node, m.sender_epoch);
      return true;
    case PeerSessions::Admission::kFirst:
    case PeerSessions::Admission::kCurrent: return true;
  }
  return true;
}

DualStamp ProbeEngine::ReceiveStamps(const PacketKey& key, const DualStamp& local_rx,
                                     const TapStampBook::Received& held) {
  DualStamp rx;
  rx.user = local_rx.user;
  Observe(key, false, local_rx.user);
  if (local_rx.kernel.present()) {
    Observe(key, false, local_rx.kernel);
    if (Accept(local_rx.kernel, false)) rx.kernel = local_rx.kernel;
    else ++counters_.stamps_refused_by_policy;
  }
  for (const ProbeStamp& s : held.stamps) {
    Observe(key, false, s);
    if (Accept(s, false)) rx.Merge(DualStamp{s, {}}, StampDirection::kReceive);
    else ++counters_.stamps_refused_by_policy;
  }
  return rx;
}

void ProbeEngine::OnPilot(uint32_t sender) {
  // Nothing to do but count: the pilot's work was done on the way here.
  ++counters_.pilots_received;
  if (options_.members.count(sender) == 0 || sender == options_.node_id) return;
  ++peer_counters_[sender].pilots_received;
}

void ProbeEngine::OnTapStamp(const TapStamp& t) {
  // The hook decides the direction, never the header: a packet that
  // reaches a receive hook is not one we sent, whatever id it claims.
  if (TapHookTransmits(t.hook)) OnTapSent(t);
  else OnTapReceived(t);
}

void ProbeEngine::OnTapSent(const TapStamp& t) {
  const PacketKey& key = t.key;
  if (key.sender != options_.node_id || key.sender_epoch != options_.epoch) {
    ++counters_.tap_stamps_unrouted;  // another node's packet on a shared device, or an old session of ours
    return;
  }
  switch (tap_book_.OnRecord(t)) {
    case TapStampBook::Verdict::kUse: break;
    case TapStampBook::Verdict::kDuplicate:
    case TapStampBook::Verdict::kDuplicateAfterRead:
      ++counters_.tap_duplicates;
      SpoilSent(key);
      return;
    case TapStampBook::Verdict::kNoRoom: ++counters_.tap_stamps_unrouted; return;
    default: ++counters_.tap_tx_not_sent; return;  // our header, not our MAC: a local forgery
  }
  Observe(key, true, t.stamp);
  if (!Accept(t.stamp, true)) {
    ++counters_.stamps_refused_by_policy;
    return;
  }
  const PacketKind kind = key.type == MessageType::kForward   ? PacketKind::kForward
                          : key.type == MessageType::kReverse ? PacketKind::kReverse
                                                              : PacketKind::kFollowUp;
  if (kind != PacketKind::kFollowUp) TxNeedOf(key.receiver).OnOtherStamp(t.stamp.source);
  RouteTxStamp(kind, key.receiver, key.seq, key.index, t.stamp);
}

void ProbeEngine::OnTapReceived(const TapStamp& t) {
  const PacketKey& key = t.key;
  if (key.sender == options_.node_id) {
    ++counters_.tap_rx_own_sender;  // a copy of ours sent back, or our own traffic on lo
    return;
  }
  if (key.receiver != options_.node_id || options_.members.count(key.sender) == 0) {
    ++counters_.tap_stamps_unrouted;  // another node's packet
    return;
  }
  switch (tap_book_.OnRecord(t)) {
    case TapStampBook::Verdict::kHeld: return;  // until its datagram passes the MAC
    case TapStampBook::Verdict::kLate:
      // Bound to an authentic packet (its key and MAC were read), just too
      // late to stamp it: seen by the observer, used by nothing.
      ++counters_.tap_rx_late;
      Observe(key, false, t.stamp);
      return;
    case TapStampBook::Verdict::kDuplicate: return;  // counted if an authentic datagram comes
    case TapStampBook::Verdict::kBucketFull: return;  // counted by the book
    case TapStampBook::Verdict::kDuplicateAfterRead:
      ++counters_.tap_duplicates;
      SpoilReceived(key);
      return;
    default: ++counters_.tap_stamps_unrouted; return;
  }
}

void ProbeEngine::SpoilSent(const PacketKey& key) {
  if (key.type == MessageType::kForward) {
    if (auto it = probers_.find(key.receiver); it != probers_.end()) {
      it->second->assembler.Spoil(key.seq);
    }
    return;
  }
  if (key.type != MessageType::kReverse) return;  // a follow-up's own stamps are never used
  auto it = responders_.find(key.receiver);
  if (it == responders_.end()) return;
  Responder& r = it->second;
  for (ReversePair* pair : {&r.sending, &r.previous}) {
    if (pair->valid && pair->seq == key.seq) pair->spoiled = true;
  }
  for (ReversePair& pair : r.late) {
    if (pair.seq == key.seq) pair.spoiled = true;
  }
}

void ProbeEngine::SpoilReceived(const PacketKey& key) {
  if (key.type == MessageType::kForward) {
    auto it = responders_.find(key.sender);
    if (it == responders_.end()) return;
    Responder& r = it->second;
    // Once answered, the echo is on its way; the stamps it carries are the
    // first copy's, which arrived after the prober sent it.
    if (r.prober_epoch == key.sender_epoch && r.fwd_seq == key.seq && !r.Answered()) {
      r.spoiled = true;
    }
    return;
  }
  if (key.type != MessageType::kReverse) return;
  auto it = probers_.find(key.sender);
  if (it != probers_.end() && it->second->peer_epoch == key.sender_epoch) {
    it->second->assembler.Spoil(key.seq);
  }
}

void ProbeEngine::OnTxStamp(uint32_t op_id, const ProbeStamp& kernel) {
  ++counters_.tx_stamps;
  const SentPacket& s = sent_ring_[op_id % kSentRingSize];
  if (s.kind == PacketKind::kNone || s.op_id != op_id) {
    ++counters_.tx_stamps_unmatched;
    return;
  }
  if (s.kind == PacketKind::kPilot) return;
  if (s.kind != PacketKind::kFollowUp && kernel.source != StampSource::kHardware) {
    TxNeedOf(s.peer).OnSocketStamp(kernel.source);
  }
  Observe(SentKey(s.kind, s.peer, s.seq, s.index), true, kernel);
  if (!Accept(kernel, true)) {
    ++counters_.stamps_refused_by_policy;
    return;
  }
  RouteTxStamp(s.kind, s.peer, s.seq, s.index, kernel);
}

void ProbeEngine::RouteTxStamp(PacketKind kind, uint32_t peer, uint64_t seq, uint8_t index,
                               const ProbeStamp& kernel) {
  if (kind == PacketKind::kForward) {
    auto it = probers_.find(peer);
    if (it != probers_.end()) it->second->assembler.OnForwardTxStamp(seq, index, kernel);
    return;
  }
  if (kind == PacketKind::kReverse) {
    auto it = responders_.find(peer);
    if (it == responders_.end()) return;
    it->second.ForEachPair(seq, [&](ReversePair& pair) {
      pair.tx[index].Merge(DualStamp{kernel, {}}, StampDirection::kTransmit);
    });
  }
}

int64_t ProbeEngine::Poll(int64_t now_ns) {
  int64_t next = kNever;
  if (step_notice_until_ns_ >= 0 && now_ns >= step_notice_until_ns_) step_notice_until_ns_ = -1;
  SendRemapCopies(now_ns);
  tap_book_.Expire(now_ns);
  for (auto& [peer, pp] : probers_) {
    Prober& p = *pp;
    if (p.next_pair_ns < 0) {
      // First run: a random phase so edges and nodes do not fire in step.
      std::uniform_int_distribution<int64_t> phase(0, options_.probe.interval_ns);
      p.next_pair_ns = now_ns + phase(rng_);
      p.last_answer_ns = now_ns;
    }
    if (p.second_due_ns >= 0 && now_ns >= p.second_due_ns) SendForward(p, 1, now_ns);
    // A late turn still sends the pilot, just before the pair.
    const bool pilot_due =
        options_.probe.pilot && AddressConfirmed(peer) && !p.pilot_sent && p.second_due_ns < 0;
    const bool pilot_in_burst = BurstPairs() && options_.probe.pilot_lead_ns == 0;
    if (pilot_due && !pilot_in_burst && now_ns >= p.next_pair_ns - options_.probe.pilot_lead_ns) SendPilot(p);
    if (p.second_due_ns < 0 && now_ns >= p.next_pair_ns) {
      // Never burst to catch up after a stall.
      p.next_pair_ns = std::max(p.next_pair_ns + IntervalFor(p), now_ns);
      p.pilot_sent = false;
      if (!AddressConfirmed(peer)) ++peer_counters_[peer].pairs_sent_unconfirmed;
      if (BurstPairs()) SendForwardPair(p, pilot_due && pilot_in_burst, now_ns);
      else SendForward(p, 0, now_ns);
    }
    if (!p.silent_reported && now_ns - p.last_answer_ns > kSilentAfterNs) {
      spdlog::warn("peer {} has not answered for {} s; still probing", p.peer,
                   (now_ns - p.last_answer_ns) / 1'000'000'000);
      p.silent_reported = true;
    }
    if (p.second_due_ns >= 0) {
      next = std::min(next, p.second_due_ns);
    } else {
      const bool pilot_pending = options_.probe.pilot && AddressConfirmed(peer) && !p.pilot_sent;
      next = std::min(next, p.next_pair_ns - (pilot_pending ? options_.probe.pilot_lead_ns : 0));
    }
  }
  for (auto& [peer, r] : responders_) {
    if (r.second_due_ns >= 0 && now_ns >= r.second_due_ns) SendReverse(peer, r, 1);
    SendDueFollowUps(peer, r, now_ns, false);
    if (r.second_due_ns >= 0) next = std::min(next, r.second_due_ns);
    if (!r.sending_delivered && r.followup_due_ns >= 0) next = std::min(next, r.followup_due_ns);
    if (!r.late.empty()) next = std::min(next, r.late.front().sent_ns + options_.probe.followup_delay_ns);
  }
  if (remap_notice_.copies_left > 0) next = std::min(next, remap_notice_.next_ns);
  return next;
}

void ProbeEngine::FinalizeTuples(int64_t now_ns, int64_t before_ns) {
  const int64_t timeout = options_.probe.tuple_timeout_ns;
  for (auto& [peer, pp] : probers_) {
    const uint32_t id = peer;
    pp->assembler.Finalize(
        [&](const FullTuple& t) {
          return t.created_ns < before_ns || now_ns - t.created_ns > timeout ||
                 ClassifyTuple(t) == TupleOutcome::kComplete;
        },
        [&](const FullTuple& t) { on_tuple_(id, t); });
  }
}

EngineCounters ProbeEngine::counters() const {
  EngineCounters c = counters_;
  c.tap_rx_unverified = tap_book_.unverified_dropped();
  c.tap_bucket_full = tap_book_.bucket_full();
  return c;
}

std::map<uint32_t, PeerCounters> ProbeEngine::peer_counters() const {
  std::map<uint32_t, PeerCounters> out = peer_counters_;
  for (const auto& [peer, p] : probers_) {
    out[peer].stamps_unmatched = p->assembler.unmatched();
    out[peer].stamps_wrong_domain += p->assembler.wrong_domain();  // plus the mirrored tuples' refused
    out[peer].tuples_spoiled = p->assembler.spoiled();
    out[peer].tuples_stepped = p->assembler.stepped();
  }
  for (uint32_t peer : unconfirmed_) out[peer].address_confirmed = false;
  for (const auto& [peer, need] : tx_need_) out[peer].probes_without_socket_tx = need.sent_without();
  return out;
}

void ProbeEngine::Shutdown(int64_t now_ns) {
  shut_down_ = true;
  for (auto& [peer, r] : responders_) {
    if (r.second_due_ns >= 0) SendReverse(peer, r, 1);
    if (r.previous.valid && !r.previous.carried_complete) SendFollowUp(peer, r, r.previous, true);
    if (r.sending.valid) r.sending_delivered = false;
    SendDueFollowUps(peer, r, now_ns, true);
  }
}

}  // namespace chronolink
