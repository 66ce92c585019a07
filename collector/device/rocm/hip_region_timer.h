// RegionTimer on ROCm: HIP events around a stream region the application
// marks (Begin/End), turned into ActivityKind::kMarker records on the GPU
// counter's clock by anchoring them (hip_region_math.h). Each record's
// GpuActivity::device_error_ns carries the anchoring bound, which the
// export adds to the map's.
//
// What it does on the device: one idle stream per device of its own, and on
// it an anchor event every anchor_period (only while Drain is called), each
// between two clock-counter ioctls, polled to completion with a timeout.
// Begin/End cost one hipEventRecord each plus, at Begin, one ioctl (the
// floor the begin event cannot precede). Events are pooled.
//
// Threading: Begin/End from any application thread; Start/Stop from the
// owner's; Drain from one thread. One mutex guards the region table and
// the anchors list; waits for an anchor happen outside it.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "clock/clock_reader.h"
#include "collector/device/gpu_activity.h"
#include "collector/device/gpu_backend.h"
#include "collector/device/rocm/hip_api.h"
#include "collector/device/rocm/hip_region_math.h"

namespace chronolink::collector {

struct HipRegionTimerOptions {
  int64_t anchor_period_ns = 50'000'000;    // a fresh anchor at most this often, per device
  int anchor_tries = 3;                     // the narrowest bracket of these is kept
  int64_t anchor_timeout_ns = 100'000'000;  // an anchor event not complete by then is abandoned
  size_t max_regions_in_flight = 65'536;    // Begin refuses beyond this
  size_t max_anchors = 4'096;               // per device
  EventTimingModel timing;
};

// Reads device `ordinal`'s counter now (kGpuDevice ns).
using DeviceNsReader = std::function<bool(uint32_t ordinal, int64_t* device_ns, std::string* why)>;

class HipRegionTimer : public RegionTimer {
 public:
  HipRegionTimer(const HipApi& hip, DeviceNsReader read_device_ns, const NodeClock& host,
                 const HipRegionTimerOptions& options);
  ~HipRegionTimer() override;

  // Creates the anchor streams and the first anchors. False with *why.
  bool Start(std::span<const uint32_t> ordinals, std::string* why);
  // Waits (up to timeout_ns) for ended regions to complete and appends
  // them; regions never ended are dropped; then frees every HIP object.
  void Stop(int64_t timeout_ns, std::vector<GpuActivity>* out);

  uint64_t Begin(uint32_t ordinal, void* stream, std::string_view name, std::string* why) override;
  bool End(uint64_t region, std::string* why) override;

  // Appends the regions that completed since the last call.
  size_t Drain(std::vector<GpuActivity>* out);

  uint64_t dropped() const;  // refused at Begin, never ended, or lost to a HIP error
  uint64_t invalid() const;  // failed the plausibility checks
  uint64_t anchor_failures() const;

 private:
  struct Region {
    uint32_t ordinal = 0;
    hipStream_t stream = nullptr;
    uint32_t stream_label = 0;
    std::string name;
    hipEvent_t begin = nullptr;
    hipEvent_t end = nullptr;
    bool ended = false;
    int64_t floor_ns = 0;       // kGpuDevice, read before the begin record (INT64_MIN: unknown)
    int64_t host_begin_ns = 0;  // kNodeRealtime, at Begin
    int64_t host_end_ns = 0;    // kNodeRealtime, at End
    uint32_t thread = 0;
  };
  struct Device {
    uint32_t ordinal = 0;
    hipStream_t anchor_stream = nullptr;
    std::vector<RegionAnchor> anchors;             // seq order
    std::map<uint64_t, hipEvent_t> anchor_events;  // seq -> event
    std::vector<hipEvent_t> free_events;
    std::map<hipStream_t, uint32_t> stream_labels;
    int64_t last_anchor_mono_ns = 0;  // CLOCK_MONOTONIC
  };
  struct Completed {
    uint64_t id = 0;
    Region region;
  };

  Device* FindDevice(uint32_t ordinal);
  bool TakeEvents(Device* d, hipEvent_t* a, hipEvent_t* b, std::string* why);  // mu_ held
  void RecycleEvents(Device* d, hipEvent_t a, hipEvent_t b);                   // mu_ held
  uint32_t StreamLabel(Device* d, hipStream_t stream);                         // mu_ held
  bool TakeAnchor(Device* d, std::string* why);                                // mu_ not held
  bool TryAnchor(Device* d, hipEvent_t event, RegionAnchor* out, std::string* why);
  bool WaitComplete(hipEvent_t event, int64_t timeout_ns);
  void CollectCompleted(std::vector<Completed>* done);  // takes mu_
  bool PlaceRegion(const Device& d, const Completed& c, int64_t ceiling_ns, GpuActivity* out);
  void PruneAnchors(Device* d);  // mu_ held
  void FreeAll();

  const HipApi& hip_;
  DeviceNsReader read_device_ns_;
  const NodeClock& host_;
  HipRegionTimerOptions options_;

  mutable std::mutex mu_;
  std::atomic<bool> started_{false};
  std::deque<Device> devices_;  // stable addresses
  std::map<uint64_t, Region> regions_;
  uint64_t next_region_ = 1;
  uint64_t next_anchor_seq_ = 1;
  uint64_t dropped_ = 0;
  uint64_t invalid_ = 0;
  uint64_t anchor_failures_ = 0;
};

}  // namespace chronolink::collector
