// The simulated application's launches and completions (see the header).
#include "collector/device/simulated/simulated_workload.h"

#include <algorithm>
#include <string>

namespace chronolink::collector {
namespace {

// From the end of the launch call to the earliest start on the device.
constexpr int64_t kQueueDelayNs = 2'000;
constexpr uint64_t kCopyBytes = uint64_t{1} << 20;

std::string KernelDetails(uint64_t index) {
  return "regs:" + std::to_string(32 + (index % 4) * 16) + " grid:" + std::to_string(128 << (index % 3)) +
         ",1,1 block:256,1,1";
}

}  // namespace

SimulatedWorkload::SimulatedWorkload(const SimulatedWorkloadSpec& spec, std::vector<uint32_t> device_ordinals,
                                     uint64_t seed)
    : spec_(spec),
      devices_(std::move(device_ordinals)),
      launched_(devices_.size(), 0),
      streams_(devices_.size(), std::vector<StreamState>(std::max<uint32_t>(spec.streams, 1))),
      rng_(seed ^ 0x5DEECE66DULL) {}

GpuActivity SimulatedWorkload::NextOperation(uint32_t device, uint64_t index) {
  GpuActivity op;
  op.device = device;
  op.stream = static_cast<uint32_t>(index % std::max<uint32_t>(spec_.streams, 1));
  op.correlation_id = next_correlation_id_++;
  switch (index % 4) {
    case 1:
      op.kind = ActivityKind::kMemcpyHtoD;
      op.name = "simulated_copy_in";
      op.bytes = kCopyBytes;
      break;
    case 3:
      op.kind = ActivityKind::kMemcpyDtoH;
      op.name = "simulated_copy_out";
      op.bytes = kCopyBytes;
      break;
    default:
      op.kind = ActivityKind::kKernel;
      op.name = "simulated_kernel_" + std::to_string(index % 3);
      op.details = KernelDetails(index);
      break;
  }
  return op;
}

void SimulatedWorkload::Schedule(size_t device_position, GpuActivity op, int64_t launched_true_ns) {
  StreamState& stream = streams_[device_position][op.stream];
  std::uniform_real_distribution<double> spread(0.75, 1.25);
  const double nominal = op.kind == ActivityKind::kKernel ? static_cast<double>(spec_.kernel_ns)
                                                          : static_cast<double>(spec_.kernel_ns) / 2;
  const auto duration = std::max<int64_t>(1, static_cast<int64_t>(nominal * spread(rng_)));
  op.sim_true_start_ns = std::max(launched_true_ns + kQueueDelayNs, stream.busy_until_true_ns);
  op.sim_true_end_ns = op.sim_true_start_ns + duration;
  stream.busy_until_true_ns = op.sim_true_end_ns;
  ++stream.in_flight;
  in_flight_.push_back({std::move(op), device_position});
}

void SimulatedWorkload::Launch(const NodeClock& host, uint32_t thread) {
  for (size_t p = 0; p < devices_.size(); ++p) {
    const uint64_t index = launched_[p]++;
    const auto stream = static_cast<uint32_t>(index % streams_[p].size());
    if (streams_[p][stream].in_flight >= kMaxInFlightPerStream) continue;  // the app waits
    // The launch call, stamped around its real work (building the operation).
    const int64_t call_start_true_ns = ReadClockNs(CLOCK_REALTIME);
    GpuActivity op = NextOperation(devices_[p], index);
    const int64_t call_end_true_ns = ReadClockNs(CLOCK_REALTIME);
    op.launch_host_start_ns = host.Ingest(call_start_true_ns);
    op.launch_host_end_ns = host.Ingest(call_end_true_ns);
    op.launch_thread = thread;
    Schedule(p, std::move(op), call_end_true_ns);
  }
}

void SimulatedWorkload::TakeFinished(int64_t now_true_ns, std::vector<GpuActivity>* done) {
  // Still running first, finished after, each in launch order.
  const auto first_finished =
      std::stable_partition(in_flight_.begin(), in_flight_.end(),
                            [now_true_ns](const InFlight& f) { return f.op.sim_true_end_ns > now_true_ns; });
  for (auto it = first_finished; it != in_flight_.end(); ++it) {
    --streams_[it->device_position][it->op.stream].in_flight;
    done->push_back(std::move(it->op));
  }
  in_flight_.erase(first_finished, in_flight_.end());
}

int64_t SimulatedWorkload::last_true_end_ns() const {
  int64_t last = 0;
  for (const InFlight& f : in_flight_) last = std::max(last, f.op.sim_true_end_ns);
  return last;
}

size_t SimulatedWorkload::DropInFlight() {
  const size_t n = in_flight_.size();
  in_flight_.clear();
  for (auto& device : streams_) {
    for (StreamState& s : device) s.in_flight = 0;
  }
  return n;
}

}  // namespace chronolink::collector
