// The coordination load bench's simulated nodes split over processes of
// their own (docs/PERFORMANCE.md §15). A process has a file descriptor
// limit (20 000 on the development VM, not raisable without
// CAP_SYS_RESOURCE) and each simulated node holds two (its socket and its
// hub's epoll set), so 10 000 nodes do not fit in one.
//
// Each share is the bench's own binary started with --simulate-share: it
// runs SimulatedAgents over every P-th node and writes one JSON report line
// to its stdout every 100 ms (its totals, the deliveries since the last
// report, the solutions it holds by leader, the leader it follows). It
// stops, revoking its leases, when its stdin closes: when this object stops
// it, or when the bench dies.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/coordination/simulated_agents.h"

namespace chronolink::bench {

// What a share needs to rebuild its part of the bench: its nodes are the
// simulated ids (3..nodes) whose index is `share` modulo `shares`.
struct SimulatedShareOptions {
  int share = 0, shares = 1;
  int nodes = 0;  // in all, the two real agents included
  std::string etcd_url;
  std::string key_file;                       // the cluster key, hex
  std::map<uint32_t, uint16_t> leader_ports;  // real agent id -> coordination port
  int threads = 2;
  int registrations_per_second = 2000;  // this share's pace
  double fit_span_max_s = DefaultFitSpanMaxS();  // the nodes' longest fit span: when they send a window (RecordLagNs)
};

// The arguments that start a share, after the binary's path.
std::vector<std::string> SimulatedShareArguments(const SimulatedShareOptions& options);
// Parses "1=7400,2=7401" into leader_ports; false when malformed.
bool ParseLeaderPorts(const std::string& text, std::map<uint32_t, uint16_t>* out);
// A share's main: returns the process's exit status.
int RunSimulatedShare(const SimulatedShareOptions& options);

class SimulatedAgentProcesses : public SimulatedNodes {
 public:
  // `binary`: this bench's own executable; one process per share.
  SimulatedAgentProcesses(std::string binary, SimulatedShareOptions options);
  ~SimulatedAgentProcesses() override;

  bool Start(std::string* error) override;
  void Stop() override;
  SimulatedAgentsTotals Totals() const override;
  std::map<int64_t, std::vector<int64_t>> TakeDeliveries() override;
  std::map<uint32_t, size_t> HoldingCounts() const override;
  std::optional<LeaderClaim> leader() const override;

 private:
  struct Share {
    pid_t pid = -1;
    int to_child = -1, from_child = -1;
    std::thread reader;
    // Under mutex_:
    bool started = false, ended = false;
    std::string error;
    SimulatedAgentsTotals totals;
    std::map<uint32_t, size_t> holding;
    std::optional<LeaderClaim> leader;
  };
  void Read(Share* share);
  void Report(Share* share, const std::string& line);

  std::string binary_;
  SimulatedShareOptions options_;
  std::vector<std::unique_ptr<Share>> shares_;

  mutable std::mutex mutex_;
  std::map<int64_t, std::vector<int64_t>> deliveries_;
};

}  // namespace chronolink::bench
