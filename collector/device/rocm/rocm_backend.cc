// The ROCm backend (rocm_backend.h): open = libraries, amdkfd, HIP
// devices matched to KFD nodes, a checked counter rate per device.
#include "collector/device/rocm/rocm_backend.h"

#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "collector/device/backend_settings.h"
#include "collector/device/rocm/hip_api.h"
#include "collector/device/rocm/hip_region_timer.h"
#include "collector/device/rocm/hsa_api.h"
#include "collector/device/rocm/hsakmt_api.h"
#include "collector/device/rocm/kfd_topology.h"
#include "collector/device/rocm/rocm_device_clock.h"

namespace chronolink::collector {

namespace {

constexpr int64_t kNsPerMs = 1'000'000;
// HIP's nominal counter rate is kept when the measurement at Open agrees
// within this; the measurement itself is good to ~100 ppm over 20 ms.
constexpr int64_t kRateAgreementPpm = 2'000;
// How long StopActivity waits for regions that ended but are still queued.
constexpr int64_t kStopTimeoutNs = 1'000'000'000;

struct RocmSettings {
  int64_t anchor_period_ms = 50;
  int64_t rate_tolerance_ppm = 100;
  int64_t event_clock_error_ns = 1000;
  int64_t rate_check_ms = 20;
};

bool ParseRocmSettings(std::span<const std::string> settings, RocmSettings* s, std::string* why) {
  return ParseBackendSettings("rocm", settings,
                              {{"anchor_period_ms", 1, 60'000, &s->anchor_period_ms},
                               {"rate_tolerance_ppm", 0, 10'000, &s->rate_tolerance_ppm},
                               {"event_clock_error_ns", 0, 1'000'000, &s->event_clock_error_ns},
                               {"rate_check_ms", 0, 1'000, &s->rate_check_ms}},
                              {}, why);
}

std::string RateText(uint64_t hz) {
  if (hz % 1'000'000 == 0) return std::to_string(hz / 1'000'000) + " MHz";
  return std::to_string(hz / 1000) + " kHz";
}

class RocmBackend final : public GpuBackend, public HsaDispatchTimer {
 public:
  ~RocmBackend() override { Close(); }

  std::string_view name() const override { return "rocm"; }

  BackendStatus Open(const BackendOptions& options, std::vector<GpuDeviceInfo>* devices,
                     std::string* why) override {
    Close();
    if (!ParseRocmSettings(options.settings, &settings_, why)) return BackendStatus::kFailed;
    host_clock_ = options.host_clock != nullptr ? options.host_clock : &default_clock_;
    max_pending_ = options.max_pending_activity;
    if (!hsakmt_.Load(why) || !hip_.Load(why)) return BackendStatus::kNoLibrary;
    BackendStatus s = OpenKfdAndDevices(options.devices, devices, why);
    if (s != BackendStatus::kReady) Close();
    return s;
  }

  void Close() override {
    StopActivity();
    timer_.reset();
    clocks_.clear();
    if (kfd_open_) hsakmt_.CloseKFD();
    kfd_open_ = false;
  }

  bool ReadSnapshot(uint32_t ordinal, const NodeClock& host, SnapshotReading* out,
                    std::string* why) override {
    RocmDeviceClock* clock = ClockOf(ordinal);
    if (clock == nullptr) {
      *why = "rocm: device " + std::to_string(ordinal) + " is not open";
      return false;
    }
    return clock->ReadSnapshot(host, out, why);
  }

  bool StartActivity(std::string* why) override {
    if (clocks_.empty()) {
      *why = "rocm: backend is not open";
      return false;
    }
    if (timer_ != nullptr) return true;
    HipRegionTimerOptions o;
    o.anchor_period_ns = settings_.anchor_period_ms * kNsPerMs;
    o.timing.rate_tolerance_ppm = settings_.rate_tolerance_ppm;
    o.timing.event_clock_error_ns = settings_.event_clock_error_ns;
    auto reader = [this](uint32_t ordinal, int64_t* device_ns, std::string* w) {
      RocmDeviceClock* c = ClockOf(ordinal);
      return c != nullptr && c->ReadDeviceNs(device_ns, w);
    };
    auto timer = std::make_unique<HipRegionTimer>(hip_, reader, *host_clock_, o);
    std::vector<uint32_t> ordinals;
    for (const auto& [ordinal, clock] : clocks_) ordinals.push_back(ordinal);
    if (!timer->Start(ordinals, why)) return false;
    timer_ = std::move(timer);
    return true;
  }

  size_t DrainActivity(std::vector<GpuActivity>* out) override {
    std::vector<GpuActivity> fresh;
    if (timer_ != nullptr) timer_->Drain(&fresh);
    std::lock_guard<std::mutex> lock(mu_);
    const size_t before = out->size();
    for (GpuActivity& a : flushed_) out->push_back(std::move(a));
    flushed_.clear();
    for (GpuActivity& a : fresh) out->push_back(std::move(a));
    const size_t n = out->size() - before;
    counters_.records += n;
    return n;
  }

  void StopActivity() override {
    if (timer_ == nullptr) return;
    std::vector<GpuActivity> last;
    timer_->Stop(kStopTimeoutNs, &last);
    std::lock_guard<std::mutex> lock(mu_);
    for (GpuActivity& a : last) {
      if (flushed_.size() < max_pending_) {
        flushed_.push_back(std::move(a));
      } else {
        ++counters_.dropped;
      }
    }
    counters_.dropped += timer_->dropped();
    counters_.invalid += timer_->invalid();
    timer_.reset();
  }

  ActivityCounters activity_counters() const override {
    std::lock_guard<std::mutex> lock(mu_);
    ActivityCounters c = counters_;
    if (timer_ != nullptr) {
      c.dropped += timer_->dropped();
      c.invalid += timer_->invalid();
    }
    return c;
  }

  RegionTimer* region_timer() override { return timer_.get(); }
  HsaDispatchTimer* hsa_dispatch_timer() override { return this; }

  bool TimeHsaDispatch(const HsaDispatch& d, std::string* why) override {
    RocmDeviceClock* clock = ClockOf(d.device);
    if (clock == nullptr) {
      *why = "rocm: device " + std::to_string(d.device) + " is not open";
      return false;
    }
    GpuActivity a;
    if (!TimeDispatchOnDevice(d, clock, &a, why)) return false;  // the caller is told why
    std::lock_guard<std::mutex> lock(mu_);
    if (flushed_.size() >= max_pending_) {
      ++counters_.dropped;
      *why = "rocm: activity buffer full (" + std::to_string(max_pending_) + " records): dispatch dropped";
      return false;
    }
    flushed_.push_back(std::move(a));
    return true;
  }

 private:
  // The dispatch's BOOTTIME times from HSA, moved onto the device counter.
  bool TimeDispatchOnDevice(const HsaDispatch& d, RocmDeviceClock* clock, GpuActivity* a, std::string* why) {
    int64_t start_boot = 0, end_boot = 0, start_err = 0, end_err = 0;
    {
      std::lock_guard<std::mutex> lock(hsa_mu_);
      if (!hsa_.library.loaded() && !hsa_.Load(why)) return false;
      if (hsa_clock_ == nullptr) hsa_clock_ = std::make_unique<HsaDispatchClock>(hsa_);
      if (!hsa_clock_->DispatchTime(d.agent_handle, d.signal_handle, &start_boot, &end_boot, why)) return false;
    }
    a->kind = ActivityKind::kKernel;
    a->device = d.device;
    a->stream = d.queue;
    a->name = d.name;
    if (!clock->BootToDevice(start_boot, &a->start_device_ns, &start_err, why) ||
        !clock->BootToDevice(end_boot, &a->end_device_ns, &end_err, why)) {
      return false;
    }
    // ROCr's own GPU -> system interpolation error comes on top of ours.
    a->device_error_ns = std::max(start_err, end_err) + settings_.event_clock_error_ns;
    return true;
  }

  BackendStatus OpenKfdAndDevices(const std::vector<uint32_t>& wanted, std::vector<GpuDeviceInfo>* devices,
                                  std::string* why) {
    BackendStatus s = OpenKfd(why);
    if (s != BackendStatus::kReady) return s;
    int count = 0;
    s = InitHip(&count, why);
    if (s != BackendStatus::kReady) return s;
    std::vector<KfdNode> nodes;
    if (!ReadKfdNodes(&nodes, why)) return BackendStatus::kFailed;
    return OpenDevices(wanted, count, nodes, devices, why);
  }

  BackendStatus OpenKfd(std::string* why) {
    HSAKMT_STATUS s = hsakmt_.OpenKFD();
    if (s == HSAKMT_STATUS_SUCCESS) {
      kfd_open_ = true;
      return BackendStatus::kReady;
    }
    const bool node_exists = access("/dev/kfd", F_OK) == 0;
    *why = "amdkfd not usable (hsaKmtOpenKFD: " + HsakmtStatusText(s) + "): " +
           (node_exists ? "/dev/kfd exists but cannot be opened (permissions: the render/video group?)"
                        : "no /dev/kfd, so no AMD GPU or the amdgpu driver is not loaded");
    return node_exists ? BackendStatus::kFailed : BackendStatus::kNoDevice;
  }

  BackendStatus InitHip(int* count, std::string* why) {
    hipError_t e = hip_.Init(0);
    if (e == hipSuccess) e = hip_.GetDeviceCount(count);
    if (e != hipSuccess || *count <= 0) {
      *why = "HIP sees no device (" +
             std::string(e != hipSuccess ? "hipInit/hipGetDeviceCount: " + HipErrorText(hip_, e)
                                         : "hipGetDeviceCount: 0") +
             ")";
      return BackendStatus::kNoDevice;
    }
    return BackendStatus::kReady;
  }

  bool ReadKfdNodes(std::vector<KfdNode>* nodes, std::string* why) {
    HsaSystemProperties sys{};
    HSAKMT_STATUS s = hsakmt_.AcquireSystemProperties(&sys);
    if (s != HSAKMT_STATUS_SUCCESS) {
      *why = "hsaKmtAcquireSystemProperties: " + HsakmtStatusText(s);
      return false;
    }
    bool ok = true;
    for (uint32_t i = 0; i < sys.NumNodes && ok; ++i) {
      KfdNode n;
      ok = ReadKfdNode(hsakmt_, i, &n, why);
      if (ok) nodes->push_back(n);
    }
    hsakmt_.ReleaseSystemProperties();
    return ok;
  }

  BackendStatus OpenDevices(const std::vector<uint32_t>& wanted, int count, const std::vector<KfdNode>& nodes,
                            std::vector<GpuDeviceInfo>* devices, std::string* why) {
    std::vector<uint32_t> ordinals = wanted;
    if (ordinals.empty()) {
      for (int i = 0; i < count; ++i) ordinals.push_back(static_cast<uint32_t>(i));
    }
    for (uint32_t ordinal : ordinals) {
      if (ordinal >= static_cast<uint32_t>(count)) {
        *why = "rocm: device " + std::to_string(ordinal) + " requested, HIP sees " + std::to_string(count);
        return BackendStatus::kFailed;
      }
      GpuDeviceInfo info;
      if (!OpenDevice(ordinal, nodes, &info, why)) return BackendStatus::kFailed;
      devices->push_back(info);
    }
    return BackendStatus::kReady;
  }

  bool OpenDevice(uint32_t ordinal, const std::vector<KfdNode>& nodes, GpuDeviceInfo* info,
                  std::string* why) {
    HipDeviceFacts facts;
    if (!ReadHipDevice(hip_, static_cast<int>(ordinal), &facts, why)) return false;
    PciLocation where;
    const KfdNode* node = ParsePciBusId(facts.pci_bus_id, &where) ? FindKfdNode(nodes, where) : nullptr;
    if (node == nullptr) {
      *why = "rocm: HIP device " + std::to_string(ordinal) + " (" + facts.name + ", PCI " + facts.pci_bus_id +
             ") matches no amdkfd GPU node";
      return false;
    }
    uint64_t hz = facts.clock_instruction_hz;
    std::string note = "nominal rate from HIP, not checked";
    if (settings_.rate_check_ms > 0) {
      uint64_t measured = 0;
      if (!MeasureKfdCounterRate(hsakmt_, node->node_id, settings_.rate_check_ms * kNsPerMs, &measured,
                                 why)) {
        return false;
      }
      hz = ChooseCounterRate(facts.clock_instruction_hz, measured, kRateAgreementPpm, &note);
    }
    if (hz == 0) {
      *why = "rocm: HIP reports no counter rate for device " + std::to_string(ordinal) +
             " and rate_check_ms=0 forbids measuring it";
      return false;
    }
    auto clock = std::make_unique<RocmDeviceClock>(hsakmt_, node->node_id, hz);
    SnapshotReading first;
    if (!clock->ReadSnapshot(*host_clock_, &first, why)) return false;  // starts the unwrap
    clocks_.emplace_back(ordinal, std::move(clock));
    info->ordinal = ordinal;
    info->name = facts.name.empty() ? node->marketing_name : facts.name;
    info->vendor = "AMD";
    info->clock = "amdkfd GPU clock counter (KFD node " + std::to_string(node->node_id) + "), " +
                  RateText(hz) + ", " + note;
    info->counter_hz = hz;
    info->counter_bits = kKfdCounterBits;
    return true;
  }

  RocmDeviceClock* ClockOf(uint32_t ordinal) const {
    for (const auto& [o, clock] : clocks_) {
      if (o == ordinal) return clock.get();
    }
    return nullptr;
  }

  HsakmtApi hsakmt_;
  HipApi hip_;
  RocmSettings settings_;
  NodeClock default_clock_;
  const NodeClock* host_clock_ = &default_clock_;
  bool kfd_open_ = false;
  std::vector<std::pair<uint32_t, std::unique_ptr<RocmDeviceClock>>> clocks_;
  std::unique_ptr<HipRegionTimer> timer_;

  std::mutex hsa_mu_;  // the HSA runtime, loaded on the first dispatch timed
  HsaApi hsa_;
  std::unique_ptr<HsaDispatchClock> hsa_clock_;

  mutable std::mutex mu_;
  size_t max_pending_ = 1 << 20;
  std::vector<GpuActivity> flushed_;  // StopActivity's and timed dispatches, until drained
  ActivityCounters counters_;
};

}  // namespace

std::unique_ptr<GpuBackend> CreateRocmBackend() { return std::make_unique<RocmBackend>(); }

}  // namespace chronolink::collector
