#include "agent/export/agent_stats_json.h"

#include <string>

namespace chronolink {

nlohmann::ordered_json AgentStatsJson(const AgentStatsSnapshot& s) {
  const EngineCounters& c = s.counters;
  nlohmann::ordered_json j;
  j["schema"] = "chronolink.agent_stats.v1";
  j["node"] = s.node_id;
  j["session"] = std::to_string(s.session_epoch);
  j["final"] = s.final;
  j["uptime_s"] = s.uptime_s;
  j["cpu_user_s"] = s.cpu_user_s;
  j["cpu_system_s"] = s.cpu_system_s;
  j["windows_written"] = s.windows_written;
  j["clock_steps"] = s.clock_steps;
  j["windows_estimated"] = s.windows_estimated;
  j["floor_candidate_mismatches"] = s.floor_candidate_mismatches;
  if (!s.fit_clock.is_null()) j["fit_clock"] = s.fit_clock;
  nlohmann::ordered_json decode;
  for (size_t i = 0; i < c.decode.counts.size(); ++i) {
    decode[std::string(DecodeResultName(static_cast<DecodeResult>(i)))] = c.decode.counts[i];
  }
  j["decode"] = decode;
  j["not_for_us"] = c.not_for_us;
  j["unknown_sender"] = c.unknown_sender;
  j["retired_session"] = c.retired_session;
  j["stale_session"] = c.stale_session;
  j["stale_sequence"] = c.stale_sequence;
  j["duplicate_datagrams"] = c.duplicate_datagrams;
  j["tx_stamps"] = c.tx_stamps;
  j["tx_stamps_unmatched"] = c.tx_stamps_unmatched;
  j["pilots_received"] = c.pilots_received;
  j["socket_receive_errors"] = s.socket_receive_errors;
  j["socket_receive_calls"] = s.socket_receive_calls;
  j["socket_error_queue_calls"] = s.socket_error_queue_calls;
  j["stamps_refused_by_policy"] = c.stamps_refused_by_policy;
  // eBPF records the engine did not use, by reason (docs/bpf-tap.md).
  j["tap_records"] = {{"unrouted", c.tap_stamps_unrouted},  {"rx_own_sender", c.tap_rx_own_sender},
                      {"tx_not_sent", c.tap_tx_not_sent},   {"rx_unverified", c.tap_rx_unverified},
                      {"rx_late", c.tap_rx_late},           {"duplicates", c.tap_duplicates},
                      {"bucket_full", c.tap_bucket_full}};
  // Coverage: per direction, packets and how many got a stamp from each source.
  for (int dir = 0; dir < 2; ++dir) {
    nlohmann::ordered_json cov;
    cov["packets"] = c.packets[dir];
    for (int src = 1; src < kNumStampSources; ++src) {
      cov[std::string(StampSourceName(static_cast<StampSource>(src)))] = c.stamps[dir][src];
    }
    j[dir == 0 ? "rx_stamp_coverage" : "tx_stamp_coverage"] = cov;
  }
  j["ebpf_tap"] = s.ebpf_tap;
  j["hardware_timestamping"] = s.hardware_timestamping;
  nlohmann::ordered_json peers = nlohmann::ordered_json::object();
  for (const auto& [peer, pc] : s.peers) {
    peers[std::to_string(peer)] = {
        {"packets_sent", pc.packets_sent},
        {"bytes_sent", pc.bytes_sent},
        {"packets_received", pc.packets_received},
        {"bytes_received", pc.bytes_received},
        {"pairs_sent", pc.pairs_sent},
        {"reverse_pairs_sent", pc.reverse_pairs_sent},
        {"followups_sent", pc.followups_sent},
        {"send_errors", pc.send_errors},
        {"pilots_sent", pc.pilots_sent},
        {"pilots_received", pc.pilots_received},
        {"late_tx_dropped", pc.late_tx_dropped},
        {"probe_interval_us", s.probe_interval_ns.count(peer) ? s.probe_interval_ns.at(peer) / 1000 : 0},
        {"probes_without_socket_tx", pc.probes_without_socket_tx},
        {"stamps_unmatched", pc.stamps_unmatched},
        {"stamps_wrong_domain", pc.stamps_wrong_domain},
        {"forward_pairs_incomplete", pc.forward_pairs_incomplete},
        {"forward_pairs_spoiled", pc.forward_pairs_spoiled},
        {"peer_tuples_mirrored", pc.peer_tuples_mirrored},
        {"tuples_spoiled", pc.tuples_spoiled},
        {"tuples_stepped", pc.tuples_stepped},
        {"peer_clock_steps", pc.peer_clock_steps},
        {"peer_clock_remaps", pc.peer_clock_remaps},
        {"clock_remaps_sent", pc.clock_remaps_sent},
        {"peer_restarts", pc.peer_restarts},
        {"address_confirmed", pc.address_confirmed},
        {"pairs_sent_unconfirmed", pc.pairs_sent_unconfirmed},
        {"forwards_unanswered_unconfirmed", pc.forwards_unanswered_unconfirmed}};
  }
  j["peers"] = peers;
  j["cluster"] = s.cluster;
  return j;
}

nlohmann::ordered_json FitClockJson(const FitClock& clock) {
  nlohmann::ordered_json j;
  j["clock"] = clock.mode() == FitClockMode::kRaw ? "raw" : "realtime";
  if (const std::optional<FitAnchor> a = clock.anchor()) {  // the newest
    j["anchor"] = {{"raw_ns", a->raw_ns}, {"realtime_ns", a->realtime_ns}, {"rate_fine", a->rate_fine}};
  }
  const FitTimebaseStats st = clock.stats();
  j["samples"] = st.samples;
  j["samples_on_demand"] = st.on_demand;
  j["stamps_extrapolated"] = st.extrapolated;
  j["stamps_unmapped"] = st.unmapped;
  j["realtime_steps"] = st.steps;
  j["reanchors"] = st.reanchors;
  return j;
}

}  // namespace chronolink
