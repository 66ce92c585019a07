// The CUDA backend (cuda_backend.h).
#include "collector/device/cuda/cuda_backend.h"

#include <time.h>

#include <memory>
#include <mutex>
#include <vector>

#include "collector/clock/device_counter.h"
#include "collector/device/backend_settings.h"
#include "collector/device/cuda/cuda_driver_api.h"
#include "collector/device/cuda/cupti_activity_session.h"
#include "collector/device/cuda/cupti_api.h"

namespace chronolink::collector {

namespace {

constexpr uint64_t kCuptiClockHz = 1'000'000'000;  // CUPTI timestamps are ns
constexpr int kCuptiClockBits = 64;

struct CudaSettings {
  std::string timestamp = "raw";
  int64_t buffers = 8;
  int64_t buffer_kib = 1024;
};

bool ParseCudaSettings(std::span<const std::string> settings, CudaSettings* s, std::string* why) {
  return ParseBackendSettings("cuda", settings,
                              {{"buffers", 1, 1024, &s->buffers}, {"buffer_kib", 4, 65'536, &s->buffer_kib}},
                              {{"timestamp", {"raw", "cupti"}, &s->timestamp}}, why);
}

// CUPTI's clock when timestamp=raw: registered before any kind is enabled.
uint64_t CUPTIAPI MonotonicRawTimestamp() { return static_cast<uint64_t>(ReadClockNs(CLOCK_MONOTONIC_RAW)); }

struct CudaDevice {
  explicit CudaDevice(uint32_t o) : ordinal(o), counter(kCuptiClockHz, kCuptiClockBits) {}
  uint32_t ordinal;
  std::mutex mu;
  DeviceCounter counter;  // guarded by mu
};

class CudaBackend final : public GpuBackend {
 public:
  ~CudaBackend() override { Close(); }

  std::string_view name() const override { return "cuda"; }

  BackendStatus Open(const BackendOptions& options, std::vector<GpuDeviceInfo>* devices,
                     std::string* why) override {
    Close();
    if (!ParseCudaSettings(options.settings, &settings_, why)) return BackendStatus::kFailed;
    host_clock_ = options.host_clock != nullptr ? options.host_clock : &default_clock_;
    max_pending_ = options.max_pending_activity;
    if (!cupti_.Load(why) || !driver_.Load(why)) return BackendStatus::kNoLibrary;
    int count = 0;
    BackendStatus s = InitDriver(&count, why);
    if (s != BackendStatus::kReady) return s;
    const std::string clock = ChooseTimestampClock();
    s = OpenDevices(options.devices, count, clock, devices, why);
    if (s != BackendStatus::kReady) Close();
    return s;
  }

  void Close() override {
    StopActivity();
    devices_.clear();
  }

  bool ReadSnapshot(uint32_t ordinal, const NodeClock& host, SnapshotReading* out,
                    std::string* why) override {
    CudaDevice* d = Find(ordinal);
    if (d == nullptr) {
      *why = "cuda: device " + std::to_string(ordinal) + " is not open";
      return false;
    }
    // The clock is read outside the device's mutex: CUPTI's thread takes that
    // mutex inside its buffer callback, and cuptiGetTimestamp must not wait
    // on it. Only the sampler reads, so reads still reach the counter in order.
    uint64_t raw = 0;
    const int64_t before = host.Now();
    const bool read = ReadCuptiClock(&raw, why);
    const int64_t after = host.Now();
    if (!read) return false;
    int64_t device_ns = 0;
    std::lock_guard<std::mutex> lock(d->mu);
    if (!d->counter.ExtendRead(raw, &device_ns, why)) return false;
    *out = SnapshotReading{before, device_ns, after};
    return true;
  }

  bool StartActivity(std::string* why) override {
    if (devices_.empty()) {
      *why = "cuda: backend is not open";
      return false;
    }
    if (session_ != nullptr) return true;
    auto session = std::make_unique<CuptiActivitySession>(cupti_);
    auto sink = [this](const CuptiRecordFields& f) { OnRecord(f); };
    if (!session->Start(static_cast<size_t>(settings_.buffers),
                        static_cast<size_t>(settings_.buffer_kib) * 1024, sink, why)) {
      return false;
    }
    session_ = std::move(session);
    return true;
  }

  size_t DrainActivity(std::vector<GpuActivity>* out) override {
    if (session_ != nullptr) session_->Flush(/*forced=*/false);
    std::lock_guard<std::mutex> lock(pending_mu_);
    const size_t n = pending_.size();
    for (GpuActivity& a : pending_) out->push_back(std::move(a));
    pending_.clear();
    counters_.records += n;
    return n;
  }

  void StopActivity() override {
    if (session_ == nullptr) return;
    session_->Stop();
    const CuptiSessionCounters c = session_->counters();
    session_.reset();
    std::lock_guard<std::mutex> lock(pending_mu_);
    counters_.dropped += c.dropped_by_cupti + c.incomplete;
  }

  ActivityCounters activity_counters() const override {
    // The session's counters first: its mutex is taken before pending_mu_
    // on CUPTI's thread (OnRecord), never after it.
    CuptiSessionCounters s;
    if (session_ != nullptr) s = session_->counters();
    std::lock_guard<std::mutex> lock(pending_mu_);
    ActivityCounters c = counters_;
    c.dropped += s.dropped_by_cupti + s.incomplete;
    return c;
  }

 private:
  BackendStatus InitDriver(int* count, std::string* why) {
    CUresult r = driver_.Init(0);
    if (r == CUDA_SUCCESS) r = driver_.DeviceGetCount(count);
    if (r == CUDA_ERROR_NO_DEVICE || (r == CUDA_SUCCESS && *count <= 0)) {
      *why =
          "CUDA sees no device (" +
          (r == CUDA_SUCCESS ? std::string("cuDeviceGetCount: 0") : "cuInit: " + CudaResultText(driver_, r)) +
          ")";
      return BackendStatus::kNoDevice;
    }
    if (r != CUDA_SUCCESS) {
      *why = "the NVIDIA driver would not start (cuInit: " + CudaResultText(driver_, r) + ")";
      return BackendStatus::kFailed;
    }
    return BackendStatus::kReady;
  }

  // Registers MONOTONIC_RAW as CUPTI's clock when asked and possible; says
  // which clock the records will carry.
  std::string ChooseTimestampClock() {
    snapshot_via_cupti_ = true;
    const char* interpolated = ", GPU times interpolated by CUPTI";
    if (settings_.timestamp == "raw" && cupti_.ActivityRegisterTimestampCallback != nullptr &&
        cupti_.ActivityRegisterTimestampCallback(&MonotonicRawTimestamp) == CUPTI_SUCCESS) {
      // Snapshots read cuptiGetTimestamp when it follows the registered
      // clock (then a callback another profiler registers later is followed
      // too), else the raw clock itself.
      snapshot_via_cupti_ = CuptiTimestampFollowsRaw();
      return std::string("CUPTI timestamps on CLOCK_MONOTONIC_RAW (registered callback; snapshots read ") +
             (snapshot_via_cupti_ ? "cuptiGetTimestamp" : "the raw clock") + ")" + interpolated;
    }
    return std::string("CUPTI timestamps on CUPTI's default clock (CLOCK_REALTIME on Linux)") +
           (settings_.timestamp == "raw" ? ", the raw-clock callback being unavailable" : "") + interpolated;
  }

  // Whether cuptiGetTimestamp now returns MONOTONIC_RAW: read between two
  // raw reads (a generous 1 ms of slack for a slow call).
  bool CuptiTimestampFollowsRaw() const {
    uint64_t t = 0;
    const uint64_t before = MonotonicRawTimestamp();
    const CUptiResult r = cupti_.GetTimestamp(&t);
    const uint64_t after = MonotonicRawTimestamp();
    return r == CUPTI_SUCCESS && t + 1'000'000 >= before && t <= after + 1'000'000;
  }

  bool ReadCuptiClock(uint64_t* raw, std::string* why) const {
    if (!snapshot_via_cupti_) {
      *raw = MonotonicRawTimestamp();
      return true;
    }
    CUptiResult r = cupti_.GetTimestamp(raw);
    if (r != CUPTI_SUCCESS) {
      *why = "cuptiGetTimestamp: " + CuptiResultText(cupti_, r);
      return false;
    }
    return true;
  }

  BackendStatus OpenDevices(const std::vector<uint32_t>& wanted, int count, const std::string& clock,
                            std::vector<GpuDeviceInfo>* devices, std::string* why) {
    std::vector<uint32_t> ordinals = wanted;
    if (ordinals.empty()) {
      for (int i = 0; i < count; ++i) ordinals.push_back(static_cast<uint32_t>(i));
    }
    for (uint32_t ordinal : ordinals) {
      if (ordinal >= static_cast<uint32_t>(count)) {
        *why = "cuda: device " + std::to_string(ordinal) + " requested, CUDA sees " + std::to_string(count);
        return BackendStatus::kFailed;
      }
      GpuDeviceInfo info;
      if (!DescribeDevice(ordinal, clock, &info, why)) return BackendStatus::kFailed;
      devices_.push_back(std::make_unique<CudaDevice>(ordinal));
      SnapshotReading first;  // starts the device's unwrap, as later records need
      if (!ReadSnapshot(ordinal, *host_clock_, &first, why)) return BackendStatus::kFailed;
      devices->push_back(info);
    }
    return BackendStatus::kReady;
  }

  bool DescribeDevice(uint32_t ordinal, const std::string& clock, GpuDeviceInfo* info, std::string* why) {
    CUdevice dev = 0;
    char name[256] = {};
    CUresult r = driver_.DeviceGet(&dev, static_cast<int>(ordinal));
    if (r == CUDA_SUCCESS) r = driver_.DeviceGetName(name, sizeof(name) - 1, dev);
    if (r != CUDA_SUCCESS) {
      *why = "cuda: device " + std::to_string(ordinal) + ": " + CudaResultText(driver_, r);
      return false;
    }
    info->ordinal = ordinal;
    info->name = name;
    info->vendor = "NVIDIA";
    info->clock = clock;
    info->counter_hz = kCuptiClockHz;
    info->counter_bits = kCuptiClockBits;
    return true;
  }

  CudaDevice* Find(uint32_t ordinal) const {
    for (const auto& d : devices_) {
      if (d->ordinal == ordinal) return d.get();
    }
    return nullptr;
  }

  // On CUPTI's thread, under the session's mutex.
  void OnRecord(const CuptiRecordFields& f) {
    GpuActivity a;
    if (!ToActivity(f, &a)) {
      std::lock_guard<std::mutex> lock(pending_mu_);
      ++counters_.invalid;
      return;
    }
    std::lock_guard<std::mutex> lock(pending_mu_);
    if (pending_.size() >= max_pending_) {
      ++counters_.dropped;
      return;
    }
    pending_.push_back(std::move(a));
  }

  bool ToActivity(const CuptiRecordFields& f, GpuActivity* a) {
    CudaDevice* d = Find(f.device);
    if (d == nullptr || f.end_raw < f.start_raw) return false;
    std::string why;
    std::lock_guard<std::mutex> lock(d->mu);
    if (!d->counter.ExtendNear(f.start_raw, &a->start_device_ns, &why) ||
        !d->counter.ExtendNear(f.end_raw, &a->end_device_ns, &why)) {
      return false;
    }
    a->kind = f.kind;
    a->device = f.device;
    a->stream = f.stream;
    a->correlation_id = f.correlation_id;
    a->name = f.name;
    a->details = f.details;
    a->bytes = f.bytes;
    return true;
  }

  CuptiApi cupti_;
  CudaDriverApi driver_;
  CudaSettings settings_;
  NodeClock default_clock_;
  const NodeClock* host_clock_ = &default_clock_;
  bool snapshot_via_cupti_ = true;  // snapshots read cuptiGetTimestamp, else MONOTONIC_RAW
  std::vector<std::unique_ptr<CudaDevice>> devices_;
  std::unique_ptr<CuptiActivitySession> session_;

  mutable std::mutex pending_mu_;
  size_t max_pending_ = 1 << 20;
  std::vector<GpuActivity> pending_;
  ActivityCounters counters_;
};

}  // namespace

std::unique_ptr<GpuBackend> CreateCudaBackend() { return std::make_unique<CudaBackend>(); }

}  // namespace chronolink::collector
