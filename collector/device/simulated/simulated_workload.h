// A simulated application's GPU work: at each tick it "launches" one
// operation per device on the next stream (kernels, with a host-to-device
// copy and a device-to-host copy among every four), and hands back the
// operations whose true end has passed. Times are true instants (real
// CLOCK_REALTIME, GpuActivity::sim_true_*) and host launch stamps on the
// collector's host clock; the device's counter times are the backend's job.
// Operations on one stream run one after another; a stream holds at most
// kMaxInFlightPerStream, beyond which the application "waits" (no launch).
// Not thread-safe: the backend's workload thread owns it.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "clock/clock_reader.h"
#include "collector/device/gpu_activity.h"
#include "collector/device/simulated/simulated_settings.h"

namespace chronolink::collector {

class SimulatedWorkload {
 public:
  static constexpr size_t kMaxInFlightPerStream = 8;

  SimulatedWorkload(const SimulatedWorkloadSpec& spec, std::vector<uint32_t> device_ordinals, uint64_t seed);

  // Launches one operation per device now; `thread` is the launching thread's id.
  void Launch(const NodeClock& host, uint32_t thread);
  // Moves the operations whose true end is at or before `now_true_ns` to *done.
  void TakeFinished(int64_t now_true_ns, std::vector<GpuActivity>* done);

  size_t in_flight() const { return in_flight_.size(); }
  int64_t last_true_end_ns() const;  // real CLOCK_REALTIME; 0 when nothing is in flight
  size_t DropInFlight();             // forgets what is in flight, returns how many

 private:
  struct StreamState {
    int64_t busy_until_true_ns = 0;  // real CLOCK_REALTIME
    size_t in_flight = 0;
  };
  struct InFlight {
    GpuActivity op;
    size_t device_position = 0;
  };
  GpuActivity NextOperation(uint32_t device, uint64_t index);
  void Schedule(size_t device_position, GpuActivity op, int64_t launched_true_ns);

  SimulatedWorkloadSpec spec_;
  std::vector<uint32_t> devices_;
  std::vector<uint64_t> launched_;                 // per device position: operations so far
  std::vector<std::vector<StreamState>> streams_;  // [device position][stream]
  std::vector<InFlight> in_flight_;
  uint64_t next_correlation_id_ = 1;
  std::mt19937_64 rng_;
};

}  // namespace chronolink::collector
