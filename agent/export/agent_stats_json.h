// agent_stats.json (docs/formats.md "agent_stats.json"): the agent's
// counters in one JSON object, rendered from one snapshot the runtime hands
// over, as the Prometheus families are (agent_metrics.h). The sections
// other parts own (the tap, hardware stamping, the cluster) come rendered.
#pragma once

#include <cstdint>
#include <map>

#include <nlohmann/json.hpp>

#include "agent/probe/probe_engine.h"
#include "clock/fit_clock.h"

namespace chronolink {

struct AgentStatsSnapshot {
  uint32_t node_id = 0;
  uint64_t session_epoch = 0;
  bool final = false;  // written at shutdown
  double uptime_s = 0;
  double cpu_user_s = 0, cpu_system_s = 0;
  int64_t windows_written = 0;
  int64_t windows_estimated = 0;
  uint64_t clock_steps = 0;
  // Fits whose pruned floors' line differed from every bound's at its end
  // check (FloorCandidateMismatches; 0 unless the pruning is wrong).
  int64_t floor_candidate_mismatches = 0;
  EngineCounters counters;
  uint64_t socket_receive_errors = 0, socket_receive_calls = 0, socket_error_queue_calls = 0;
  std::map<uint32_t, PeerCounters> peers;
  std::map<uint32_t, int64_t> probe_interval_ns;  // per peer
  nlohmann::ordered_json ebpf_tap, hardware_timestamping, cluster, fit_clock;
};

nlohmann::ordered_json AgentStatsJson(const AgentStatsSnapshot& s);
// The fit clock's section: what it is and how its stamps were mapped.
nlohmann::ordered_json FitClockJson(const FitClock& clock);

}  // namespace chronolink
