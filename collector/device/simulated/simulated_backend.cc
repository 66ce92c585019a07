// The simulated GPU backend (see the header): devices, snapshots, the
// workload thread, regions and the bounded pending buffer.
#include "collector/device/simulated/simulated_backend.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>
#include <sstream>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "collector/clock/device_counter.h"
#include "collector/device/simulated/simulated_clock.h"
#include "collector/device/simulated/simulated_settings.h"
#include "collector/device/simulated/simulated_workload.h"

namespace chronolink::collector {
namespace {

constexpr int64_t kSpinBelowNs = 100'000;             // shorter waits spin, longer ones sleep
constexpr int64_t kStopFlushLimitNs = 1'000'000'000;  // longest wait for work in flight at stop
constexpr size_t kMaxOpenRegions = 4096;
constexpr uintptr_t kMaxRegionStream = 1024;

// Waits `ns` on CLOCK_MONOTONIC, so a stepped REALTIME cannot stretch it.
void WaitNs(int64_t ns) {
  if (ns <= 0) return;
  if (ns >= kSpinBelowNs) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(ns));
    return;
  }
  const int64_t until = ReadClockNs(CLOCK_MONOTONIC) + ns;
  while (ReadClockNs(CLOCK_MONOTONIC) < until) {
  }
}

std::string DescribeClock(const SimulatedClockParams& c) {
  std::ostringstream s;
  s << "simulated counter: " << c.rate_hz << " Hz nominal, " << c.bits << " bits, rate error "
    << c.rate_error_ppm << " ppm, wander " << c.drift_ppm_per_s << " ppm/s";
  return s.str();
}

struct Device {
  Device(GpuDeviceInfo device_info, const SimulatedClockParams& params, uint64_t read_seed)
      : info(std::move(device_info)),
        clock(params),
        counter(params.rate_hz, params.bits),
        read_rng(read_seed) {}

  const GpuDeviceInfo info;
  const SimulatedClock clock;
  std::mutex mu;  // guards counter and read_rng
  DeviceCounter counter;
  std::mt19937_64 read_rng;
};

struct OpenRegion {
  uint32_t ordinal = 0;
  uint32_t stream = 0;
  std::string name;
  int64_t begin_true_ns = 0;  // real CLOCK_REALTIME
  uint32_t begin_thread = 0;
};

class SimulatedBackend final : public GpuBackend, private RegionTimer {
 public:
  ~SimulatedBackend() override { Close(); }

  std::string_view name() const override { return "simulated"; }

  BackendStatus Open(const BackendOptions& options, std::vector<GpuDeviceInfo>* devices,
                     std::string* why) override;
  void Close() override;
  bool ReadSnapshot(uint32_t ordinal, const NodeClock& host, SnapshotReading* out, std::string* why) override;
  bool StartActivity(std::string* why) override;
  size_t DrainActivity(std::vector<GpuActivity>* out) override;
  void StopActivity() override;
  ActivityCounters activity_counters() const override;
  RegionTimer* region_timer() override { return open_ ? this : nullptr; }

 private:
  uint64_t Begin(uint32_t ordinal, void* stream, std::string_view name, std::string* why) override;
  bool End(uint64_t region, std::string* why) override;

  Device* FindDevice(uint32_t ordinal);
  bool SelectDevices(const SimulatedSettings& s, const std::vector<uint32_t>& wanted,
                     std::vector<uint32_t>* ordinals, std::string* why) const;
  bool TakeDeviceTimes(GpuActivity* activity);
  void Deliver(std::vector<GpuActivity>* finished);
  void WorkloadLoop();
  void FinishInFlight(SimulatedWorkload* workload);

  bool open_ = false;
  SimulatedSettings settings_;
  std::vector<std::unique_ptr<Device>> devices_;
  NodeClock real_host_clock_;  // when Open is given no host clock
  const NodeClock* host_clock_ = &real_host_clock_;
  size_t max_pending_ = 0;

  std::mutex pending_mu_;
  std::vector<GpuActivity> pending_;
  std::atomic<uint64_t> records_{0};
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> invalid_{0};

  std::thread worker_;
  std::mutex worker_mu_;
  std::condition_variable worker_cv_;
  bool stop_requested_ = false;  // guarded by worker_mu_

  std::mutex regions_mu_;
  std::unordered_map<uint64_t, OpenRegion> regions_;
  uint64_t next_region_ = 1;
};

bool SimulatedBackend::SelectDevices(const SimulatedSettings& s, const std::vector<uint32_t>& wanted,
                                     std::vector<uint32_t>* ordinals, std::string* why) const {
  if (wanted.empty()) {
    for (uint32_t i = 0; i < s.devices; ++i) ordinals->push_back(i);
    return true;
  }
  for (uint32_t ordinal : wanted) {
    if (ordinal >= s.devices) {
      *why =
          "no simulated device " + std::to_string(ordinal) + " (devices=" + std::to_string(s.devices) + ")";
      return false;
    }
    if (std::find(ordinals->begin(), ordinals->end(), ordinal) == ordinals->end())
      ordinals->push_back(ordinal);
  }
  return true;
}

BackendStatus SimulatedBackend::Open(const BackendOptions& options, std::vector<GpuDeviceInfo>* devices,
                                     std::string* why) {
  devices->clear();
  if (open_) {
    *why = "the simulated backend is already open";
    return BackendStatus::kFailed;
  }
  SimulatedSettings settings;
  if (!ParseSimulatedSettings(options.settings, &settings, why)) return BackendStatus::kFailed;
  if (settings.devices == 0) {
    *why = "the simulated backend is configured with devices=0";
    return BackendStatus::kNoDevice;
  }
  std::vector<uint32_t> ordinals;
  if (!SelectDevices(settings, options.devices, &ordinals, why)) return BackendStatus::kNoDevice;

  const int64_t open_true_ns = ReadClockNs(CLOCK_REALTIME);
  for (uint32_t ordinal : ordinals) {
    const SimulatedClockParams params = ClockParamsFromOpen(settings.device[ordinal], open_true_ns);
    GpuDeviceInfo info;
    info.ordinal = ordinal;
    info.name = "simulated GPU " + std::to_string(ordinal);
    info.vendor = "simulated";
    info.clock = DescribeClock(params);
    info.counter_hz = params.rate_hz;
    info.counter_bits = params.bits;
    devices->push_back(info);
    const uint64_t read_seed = settings.seed ^ (0xD1B54A32D192ED03ULL * (ordinal + 1));
    devices_.push_back(std::make_unique<Device>(std::move(info), params, read_seed));
  }
  settings_ = settings;
  host_clock_ = options.host_clock != nullptr ? options.host_clock : &real_host_clock_;
  max_pending_ = options.max_pending_activity;
  {
    std::lock_guard lock(pending_mu_);
    pending_.clear();
  }
  records_ = dropped_ = invalid_ = 0;
  open_ = true;
  return BackendStatus::kReady;
}

void SimulatedBackend::Close() {
  StopActivity();
  {
    std::lock_guard lock(regions_mu_);
    regions_.clear();
  }
  devices_.clear();
  open_ = false;
}

Device* SimulatedBackend::FindDevice(uint32_t ordinal) {
  for (auto& d : devices_) {
    if (d->info.ordinal == ordinal) return d.get();
  }
  return nullptr;
}

bool SimulatedBackend::ReadSnapshot(uint32_t ordinal, const NodeClock& host, SnapshotReading* out,
                                    std::string* why) {
  Device* device = FindDevice(ordinal);
  if (device == nullptr) {
    *why = "no open simulated device " + std::to_string(ordinal);
    return false;
  }
  std::lock_guard lock(device->mu);
  const SimulatedReadDelays delays = device->clock.DrawReadDelays(&device->read_rng);
  SnapshotReading reading;
  reading.host_before_ns = host.Now();
  WaitNs(delays.before_ns);
  const uint64_t raw = device->clock.RawAt(ReadClockNs(CLOCK_REALTIME));
  WaitNs(delays.after_ns);
  reading.host_after_ns = host.Now();
  std::string counter_why;
  if (!device->counter.ExtendRead(raw, &reading.device_ns, &counter_why)) {
    *why = device->info.name + ": " + counter_why;
    return false;
  }
  *out = reading;
  return true;
}

// The device times of a finished operation, from the counter at its true
// instants, placed against a fresh read (the counter's newest value).
bool SimulatedBackend::TakeDeviceTimes(GpuActivity* activity) {
  Device* device = FindDevice(activity->device);
  if (device == nullptr) return false;
  std::lock_guard lock(device->mu);
  std::string why;  // a refused record is counted as invalid, as a vendor one would be
  int64_t now_device_ns = 0;
  const SimulatedClock& clock = device->clock;
  return device->counter.ExtendRead(clock.RawAt(ReadClockNs(CLOCK_REALTIME)), &now_device_ns, &why) &&
         device->counter.ExtendNear(clock.RawAt(activity->sim_true_start_ns), &activity->start_device_ns,
                                    &why) &&
         device->counter.ExtendNear(clock.RawAt(activity->sim_true_end_ns), &activity->end_device_ns, &why) &&
         activity->end_device_ns >= activity->start_device_ns;
}

void SimulatedBackend::Deliver(std::vector<GpuActivity>* finished) {
  for (GpuActivity& activity : *finished) {
    if (!TakeDeviceTimes(&activity)) {
      ++invalid_;
      continue;
    }
    std::lock_guard lock(pending_mu_);
    if (pending_.size() >= max_pending_) {
      ++dropped_;
      continue;
    }
    pending_.push_back(std::move(activity));
  }
  finished->clear();
}

void SimulatedBackend::WorkloadLoop() {
  const auto thread = static_cast<uint32_t>(::gettid());
  std::vector<uint32_t> ordinals;
  for (const auto& d : devices_) ordinals.push_back(d->info.ordinal);
  SimulatedWorkload workload(settings_.workload, ordinals, settings_.seed);
  const auto interval = std::chrono::nanoseconds(settings_.workload.kernel_interval_ns);
  std::vector<GpuActivity> finished;
  std::unique_lock lock(worker_mu_);
  while (!stop_requested_) {
    lock.unlock();
    workload.Launch(*host_clock_, thread);
    workload.TakeFinished(ReadClockNs(CLOCK_REALTIME), &finished);
    Deliver(&finished);
    lock.lock();
    worker_cv_.wait_for(lock, interval, [this] { return stop_requested_; });
  }
  lock.unlock();
  FinishInFlight(&workload);
}

// At stop, as a vendor library's flush: wait (bounded) for what is in
// flight, deliver it, count what is still running as dropped.
void SimulatedBackend::FinishInFlight(SimulatedWorkload* workload) {
  const int64_t wait_ns = workload->last_true_end_ns() - ReadClockNs(CLOCK_REALTIME);
  WaitNs(std::min(wait_ns, kStopFlushLimitNs));
  std::vector<GpuActivity> finished;
  workload->TakeFinished(ReadClockNs(CLOCK_REALTIME), &finished);
  Deliver(&finished);
  dropped_ += workload->DropInFlight();
}

bool SimulatedBackend::StartActivity(std::string* why) {
  if (!open_) {
    *why = "the simulated backend is not open";
    return false;
  }
  if (worker_.joinable()) return true;
  {
    std::lock_guard lock(worker_mu_);
    stop_requested_ = false;
  }
  try {
    worker_ = std::thread([this] { WorkloadLoop(); });
  } catch (const std::system_error& e) {
    *why = std::string("cannot start the simulated workload thread: ") + e.what();
    return false;
  }
  return true;
}

void SimulatedBackend::StopActivity() {
  if (!worker_.joinable()) return;
  {
    std::lock_guard lock(worker_mu_);
    stop_requested_ = true;
  }
  worker_cv_.notify_all();
  worker_.join();
}

size_t SimulatedBackend::DrainActivity(std::vector<GpuActivity>* out) {
  std::lock_guard lock(pending_mu_);
  const size_t n = pending_.size();
  std::move(pending_.begin(), pending_.end(), std::back_inserter(*out));
  pending_.clear();
  records_ += n;
  return n;
}

ActivityCounters SimulatedBackend::activity_counters() const {
  ActivityCounters c;
  c.records = records_;
  c.dropped = dropped_;
  c.invalid = invalid_;
  return c;
}

uint64_t SimulatedBackend::Begin(uint32_t ordinal, void* stream, std::string_view name, std::string* why) {
  const auto stream_number = reinterpret_cast<uintptr_t>(stream);
  if (FindDevice(ordinal) == nullptr) {
    *why = "no open simulated device " + std::to_string(ordinal);
    return 0;
  }
  if (stream_number >= kMaxRegionStream) {
    *why = "a simulated stream is a small integer passed as the handle (below 1024)";
    return 0;
  }
  std::lock_guard lock(regions_mu_);
  if (regions_.size() >= kMaxOpenRegions) {
    *why = "too many open regions (" + std::to_string(kMaxOpenRegions) + "): End the ones begun";
    return 0;
  }
  const uint64_t id = next_region_++;
  regions_[id] = {ordinal, static_cast<uint32_t>(stream_number), std::string(name),
                  ReadClockNs(CLOCK_REALTIME), static_cast<uint32_t>(::gettid())};
  return id;
}

bool SimulatedBackend::End(uint64_t region, std::string* why) {
  const int64_t end_true_ns = ReadClockNs(CLOCK_REALTIME);
  OpenRegion open;
  {
    std::lock_guard lock(regions_mu_);
    auto it = regions_.find(region);
    if (it == regions_.end()) {
      *why = "region " + std::to_string(region) + " is not open";
      return false;
    }
    open = std::move(it->second);
    regions_.erase(it);
  }
  std::vector<GpuActivity> finished(1);
  GpuActivity& marker = finished.front();
  marker.kind = ActivityKind::kMarker;
  marker.device = open.ordinal;
  marker.stream = open.stream;
  marker.correlation_id = kRegionCorrelationBase + region;
  marker.name = std::move(open.name);
  marker.launch_host_start_ns = host_clock_->Ingest(open.begin_true_ns);
  marker.launch_host_end_ns = host_clock_->Ingest(end_true_ns);
  marker.launch_thread = open.begin_thread;
  marker.sim_true_start_ns = open.begin_true_ns;
  marker.sim_true_end_ns = end_true_ns;
  Deliver(&finished);
  return true;
}

}  // namespace

std::unique_ptr<GpuBackend> CreateSimulatedBackend() { return std::make_unique<SimulatedBackend>(); }

}  // namespace chronolink::collector
