// The collector as a profiler embeds it (C++; the C API in
// include/chronolink/collector.h wraps this): create from options, Start,
// Stop, Export. Between Start and Stop a sampler thread takes a snapshot
// sample of every device each period (the device clock maps, clock/) and
// drains the backend's activity into a bounded store. Export works with or
// without Stop: it takes a fresh sample, drains what is complete, and
// writes a consistent picture (a profiler that never calls Stop still gets
// a bounded, consistent export).
//
// Thread-safe: every method may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "clock/clock_reader.h"
#include "collector/clock/cluster_mapping_series.h"
#include "collector/clock/device_clock_map.h"
#include "collector/clock/device_counter.h"
#include "collector/config/collector_options.h"
#include "collector/device/gpu_backend.h"
#include "collector/export/device_planes.h"
#include "include/chronolink/clock_mapping_page.h"
#include "trace/model/host_trace.h"

namespace chronolink::collector {

// What the collector can say about itself (the CLI's summary, the C API's
// status JSON).
struct CollectorStatus {
  std::string backend;             // the backend in use, or "" when none
  BackendStatus backend_status = BackendStatus::kNoDevice;
  std::string backend_message;     // why there is no GPU data, when there is none
  std::vector<GpuDeviceInfo> devices;
  std::vector<DeviceClockMapStats> maps;  // per device, same order
  ActivityCounters activity;
  uint64_t activity_kept = 0;
  uint64_t activity_dropped_store = 0;  // over max_activity_records
  uint64_t snapshot_read_failures = 0;
  std::string last_read_failure;
  // The agent's clock page: "none", "ok", "absent", "refused" (something
  // at the path the collector does not trust: clock_page_refusal says
  // what), "invalid" (no solved mapping yet), "stale" (agent stopped),
  // "busy" (writer died mid-update, or the page shrank).
  std::string clock_page_state = "none";
  std::string clock_page_refusal;   // why the page was last refused, while "refused"
  uint64_t clock_page_refusals = 0;  // times a file at the path was refused
  // Times the page went from "ok" to any other state: 0 while its agent runs.
  uint64_t clock_page_lapses = 0;
  // Mappings read "ok" and kept for the clock plane (one per solved instant).
  uint64_t clock_page_mappings = 0;
  bool running = false;
};

class Collector {
 public:
  // Resolves the backend and enumerates devices. Fails (nullptr, *error)
  // for bad options, or when no GPU is found and options say fail; with
  // no_device = continue it succeeds without devices and says why once.
  static std::unique_ptr<Collector> Create(const CollectorOptions& options, std::string* error);
  ~Collector();
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  bool Start(std::string* error);
  // Stops sampling and activity (bounded: at most a few sample periods).
  // Idempotent. The instant it stopped is the profile's stop in every export
  // after it.
  void Stop();
  int64_t stopped_at_ns() const;  // host clock; 0 until Stop

  // The page's newest mapping trails the host clock by the leader's solve
  // lag (docs/leader.md), so a run's last instants have none when it stops.
  // After Stop, reads the page now and says whether a mapping covers the
  // stop: a caller that wants those instants interpolated, not
  // extrapolated, asks again (every few hundred ms, bounded) while pending.
  struct StopMapping {
    enum State { kMapped, kPending, kNever } state = kNever;  // kNever: no page, no mapping, not stopped
    int64_t unmapped_ns = 0;  // the stop minus the newest mapping's instant, while pending
  };
  StopMapping ReadStopMapping();

  // Appends the device planes, host launch events and the clock plane to
  // *trace (a space the host profiler built, or an empty one). Sets the
  // host name and profile start/stop when the space has none.
  bool ExportTo(trace::HostTrace* trace, DeviceExportStats* stats, std::string* error);
  // Writes <logdir>/plugins/profile/<run>/<host>.xplane.pb (a new run
  // directory TensorBoard/XProf opens); *path is the file written.
  bool WriteRun(const std::filesystem::path& logdir, const std::string& run, std::filesystem::path* path,
                DeviceExportStats* stats, std::string* error);

  // Times a kernel the application dispatched through HSA itself, after its
  // completion signal completed (rocm: GpuBackend::hsa_dispatch_timer). The
  // record is exported with the other activity. False with *why.
  bool TimeHsaDispatch(const HsaDispatch& dispatch, std::string* why);

  // Region timing on a device queue (backends that offer it; see
  // GpuBackend::region_timer). 0 with *why when unsupported.
  uint64_t BeginRegion(uint32_t device, void* stream, const std::string& name, std::string* why);
  bool EndRegion(uint64_t region, std::string* why);

  // Host instant (node clock) -> device instant and back, through the
  // device's current map: for tests and for profilers that place markers.
  ConvertedStamp DeviceToHost(uint32_t device, int64_t device_ns) const;

  CollectorStatus Status() const;
  const CollectorOptions& options() const { return options_; }
  const NodeClock& host_clock() const { return clock_; }
  // The simulated backend's truth for exported records: every record
  // drained so far (copies), for tests.
  std::vector<GpuActivity> ActivitySnapshot() const;

 private:
  explicit Collector(const CollectorOptions& options);
  bool OpenBackend(std::string* error);
  void SamplerLoop();
  void SampleAllDevices();   // needs sample_mu_
  void DrainActivity();      // needs sample_mu_
  void ReadClockPage();      // needs sample_mu_
  bool OpenClockPage();      // needs sample_mu_; sets the page state
  int DeviceIndex(uint32_t ordinal) const;

  CollectorOptions options_;
  NodeClock clock_;
  std::unique_ptr<GpuBackend> backend_;
  std::string backend_name_;
  BackendStatus backend_status_ = BackendStatus::kNoDevice;
  std::string backend_message_;
  std::vector<GpuDeviceInfo> devices_;

  mutable std::mutex sample_mu_;  // maps, activity store, counters, page state
  std::vector<std::unique_ptr<DeviceClockMap>> maps_;
  std::vector<GpuActivity> activity_;
  uint64_t activity_dropped_store_ = 0;
  uint64_t read_failures_ = 0;
  std::string last_read_failure_;
  ClockMappingReader page_reader_;
  bool page_open_ = false;
  std::string page_state_ = "none";
  std::string page_refusal_;
  std::string last_logged_refusal_;
  uint64_t page_refusals_ = 0;
  uint64_t page_lapses_ = 0;
  bool page_ok_ = false;  // the last read was "ok"
  ClusterMappingSeries page_mappings_;

  std::mutex run_mu_;  // Start/Stop
  std::condition_variable wake_;
  std::mutex wake_mu_;
  bool stop_requested_ = false;
  std::thread sampler_;
  std::atomic<bool> running_{false};
  std::atomic<int64_t> stopped_at_ns_{0};
  bool activity_started_ = false;
};

}  // namespace chronolink::collector
