// The collector's lifecycle: backend choice, the sampler thread, the bounded
// activity store, the clock page, and export.
#include "collector/api/collector.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "common/quoted_text.h"
#include "collector/device/backend_registry.h"
#include "trace/exporters/xspace_writer.h"
#include "trace/model/xplane_edit.h"

namespace chronolink::collector {
namespace {

// The read granularity a bound must include: one tick of the device's
// counter (a 100 MHz counter is only known to 10 ns) plus the host clock's
// nanosecond.
DeviceClockMapOptions MapOptions(const CollectorOptions& o, const GpuDeviceInfo& device) {
  DeviceClockMapOptions m;
  m.max_bracket_ns = o.max_bracket_ns;
  m.max_knots = static_cast<size_t>(o.max_knots);
  const uint64_t hz = device.counter_hz == 0 ? 1'000'000'000 : device.counter_hz;
  m.read_granularity_ns = static_cast<int64_t>((1'000'000'000 + hz - 1) / hz) + 1;
  return m;
}

NodeClock MakeClock(const CollectorOptions& o) {
  return o.test_mode ? NodeClock(o.virtual_clock) : NodeClock();
}

}  // namespace

Collector::Collector(const CollectorOptions& options)
    : options_(options), clock_(MakeClock(options)), page_reader_(ClockPageOwners{options.clock_page_owner_uid}) {}

Collector::~Collector() {
  Stop();
  if (backend_) backend_->Close();
}

std::unique_ptr<Collector> Collector::Create(const CollectorOptions& options, std::string* error) {
  std::unique_ptr<Collector> c(new Collector(options));
  if (options.test_mode && !options.virtual_clock_state_file.empty()) {
    // The test bed's node clock, as that node's agent reads it.
    auto testbed = std::make_shared<TestbedNodeClock>();
    if (!testbed->Open(options.virtual_clock_state_file, error)) {
      *error = "--virtual-clock-state: " + *error;
      return nullptr;
    }
    c->clock_ = NodeClock(std::move(testbed));
  }
  if (!c->OpenBackend(error)) return nullptr;
  if (!options.clock_page.empty()) {
    std::lock_guard<std::mutex> lock(c->sample_mu_);
    if (!c->OpenClockPage()) {
      spdlog::warn("collector: clock page {} {}; exporting host time only, align with offsets.jsonl later",
                   QuotedText(options.clock_page), c->page_refusal_.empty() ? "is absent" : c->page_refusal_);
      c->last_logged_refusal_ = c->page_refusal_;  // said once, until what is found there changes
    }
  }
  return c;
}

bool Collector::OpenBackend(std::string* error) {
  BackendOptions bo;
  bo.devices = options_.devices;
  bo.settings = options_.backend_settings;
  bo.max_pending_activity = static_cast<size_t>(options_.max_activity_records);
  bo.host_clock = &clock_;
  std::vector<std::string> tried;
  for (const BackendEntry& entry : Backends()) {
    const bool wanted = options_.backend == "auto" ? entry.name != "simulated" : entry.name == options_.backend;
    if (!wanted) continue;
    std::unique_ptr<GpuBackend> b = entry.create();
    std::vector<GpuDeviceInfo> devices;
    std::string why;
    const BackendStatus st = b->Open(bo, &devices, &why);
    if (st == BackendStatus::kReady) {
      backend_ = std::move(b);
      backend_name_ = std::string(entry.name);
      backend_status_ = st;
      devices_ = std::move(devices);
      for (const GpuDeviceInfo& d : devices_) {
        maps_.push_back(std::make_unique<DeviceClockMap>(MapOptions(options_, d)));
      }
      spdlog::info("collector: backend {} with {} device(s)", backend_name_, devices_.size());
      return true;
    }
    backend_status_ = st;
    tried.push_back(std::string(entry.name) + ": " + std::string(BackendStatusName(st)) + " (" + why + ")");
    if (st == BackendStatus::kFailed && options_.backend != "auto") break;
  }
  backend_message_.clear();
  for (const std::string& t : tried) backend_message_ += (backend_message_.empty() ? "" : "; ") + t;
  if (tried.empty()) backend_message_ = "no backend named '" + options_.backend + "'";
  if (options_.fail_without_gpu || backend_status_ == BackendStatus::kFailed) {
    *error = "no GPU to collect from: " + backend_message_;
    return false;
  }
  // Said once, here; the collector then runs without GPU data.
  spdlog::warn("collector: no GPU data will be collected: {}", backend_message_);
  return true;
}

bool Collector::Start(std::string* error) {
  std::lock_guard<std::mutex> run(run_mu_);
  if (running_) return true;
  if (backend_) {
    if (!backend_->StartActivity(error)) return false;
    activity_started_ = true;
  }
  {
    std::lock_guard<std::mutex> w(wake_mu_);
    stop_requested_ = false;
  }
  stopped_at_ns_ = 0;
  running_ = true;
  sampler_ = std::thread([this] { SamplerLoop(); });
  return true;
}

void Collector::Stop() {
  std::lock_guard<std::mutex> run(run_mu_);
  if (!running_) return;
  {
    std::lock_guard<std::mutex> w(wake_mu_);
    stop_requested_ = true;
  }
  wake_.notify_all();
  if (sampler_.joinable()) sampler_.join();
  running_ = false;
  if (backend_ && activity_started_) {
    backend_->StopActivity();
    activity_started_ = false;
  }
  std::lock_guard<std::mutex> lock(sample_mu_);
  SampleAllDevices();  // a pair after the last activity, so it interpolates
  DrainActivity();
  stopped_at_ns_ = clock_.Now();  // after that pair: the profile holds all of it
}

int64_t Collector::stopped_at_ns() const { return stopped_at_ns_; }

Collector::StopMapping Collector::ReadStopMapping() {
  const int64_t stop = stopped_at_ns_;
  std::lock_guard<std::mutex> lock(sample_mu_);
  ReadClockPage();
  // Nothing will come: no page, never a mapping, or an agent that stopped.
  if (stop == 0 || page_mappings_.empty() || page_state_ == "stale" || page_state_ == "absent" ||
      page_state_ == "none") {
    return {};
  }
  const int64_t newest = page_mappings_.recorded().mappings.back().ref_ns;
  if (newest >= stop) return {StopMapping::kMapped, 0};
  return {StopMapping::kPending, stop - newest};
}

void Collector::SamplerLoop() {
  const auto period = std::chrono::nanoseconds(options_.sample_period_ns);
  while (true) {
    {
      std::lock_guard<std::mutex> lock(sample_mu_);
      SampleAllDevices();
      DrainActivity();
      ReadClockPage();
    }
    std::unique_lock<std::mutex> w(wake_mu_);
    if (wake_.wait_for(w, period, [this] { return stop_requested_; })) return;
  }
}

void Collector::SampleAllDevices() {
  if (!backend_) return;
  std::vector<SnapshotReading> reads(static_cast<size_t>(options_.reads_per_sample));
  for (size_t i = 0; i < devices_.size(); ++i) {
    size_t got = 0;
    for (size_t k = 0; k < reads.size(); ++k) {
      std::string why;
      if (backend_->ReadSnapshot(devices_[i].ordinal, clock_, &reads[got], &why)) {
        ++got;
        continue;
      }
      ++read_failures_;
      if (last_read_failure_ != why) spdlog::warn("collector: device {}: {}", devices_[i].ordinal, why);
      last_read_failure_ = why;
    }
    if (got > 0) maps_[i]->AddSample(std::span<const SnapshotReading>(reads.data(), got));
  }
}

void Collector::DrainActivity() {
  if (!backend_) return;
  std::vector<GpuActivity> fresh;
  backend_->DrainActivity(&fresh);
  const size_t room = static_cast<size_t>(options_.max_activity_records) - std::min(
      activity_.size(), static_cast<size_t>(options_.max_activity_records));
  const size_t keep = std::min(room, fresh.size());
  activity_.insert(activity_.end(), std::make_move_iterator(fresh.begin()),
                   std::make_move_iterator(fresh.begin() + static_cast<std::ptrdiff_t>(keep)));
  activity_dropped_store_ += fresh.size() - keep;
}

bool Collector::OpenClockPage() {
  const ClockPageOpen opened = page_reader_.Open(options_.clock_page);
  page_open_ = static_cast<bool>(opened);
  if (page_open_) {
    page_state_ = "ok";
    page_refusal_.clear();
  } else if (opened.state == ClockPageOpen::kRefused) {
    // Something is at the path that the agent did not leave: nothing from
    // it is trusted (include/chronolink/clock_mapping_page.h ClockPageOwners).
    page_state_ = "refused";
    page_refusal_ = opened.why;
    ++page_refusals_;
  } else {
    page_state_ = "absent";
    page_refusal_.clear();
  }
  return page_open_;
}

void Collector::ReadClockPage() {
  if (options_.clock_page.empty()) return;
  if (!page_open_) {
    const std::string was = page_state_;
    if (!OpenClockPage()) {  // the agent may start later
      if (page_state_ == "refused" && (was != "refused" || page_refusal_ != last_logged_refusal_)) {
        spdlog::warn("collector: clock page {} {}: refused, not read", QuotedText(options_.clock_page),
                     page_refusal_);
        last_logged_refusal_ = page_refusal_;
      }
      return;
    }
  }
  ClockMapping m;
  std::string state;
  const bool read = page_reader_.Read(&m);
  // Read together, after the page: the step check compares the two.
  const NodeClock::WithMonotonic read_at = clock_.NowWithMonotonic();
  const int64_t now = read_at.node_ns;
  const int64_t monotonic_now = read_at.monotonic_ns;
  if (!read) {
    state = "busy";
  } else if (!m.valid) {
    state = "invalid";
  } else if (now > m.valid_until_ns) {
    state = "stale";
  } else if (m.ClockSteppedSince(now, monotonic_now)) {
    state = "clock stepped";  // the agent withdraws it within a loop turn
  } else {
    state = "ok";
    page_mappings_.Add(m, now);
  }
  if (state != page_state_) {
    if (state == "ok") {
      spdlog::info("collector: clock page {}: mapping to cluster time available", QuotedText(options_.clock_page));
    } else {
      spdlog::warn("collector: clock page {}: {} (not recorded; align with offsets.jsonl instead)",
                   QuotedText(options_.clock_page), state);
    }
  }
  page_state_ = state;
  if (state == "ok") page_ok_ = true;
  if (state != "ok") {
    if (page_ok_) ++page_lapses_;  // a mapping read "ok" is gone
    // Nothing stale or torn is recorded; what was read "ok" stays: each
    // mapping held at its own instant.
    page_ok_ = false;
    // A restarted agent may have made a new page file: map it afresh next time.
    page_reader_.Close();
    page_open_ = false;
  }
}

int Collector::DeviceIndex(uint32_t ordinal) const {
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (devices_[i].ordinal == ordinal) return static_cast<int>(i);
  }
  return -1;
}

bool Collector::ExportTo(trace::HostTrace* trace, DeviceExportStats* stats, std::string* error) {
  std::lock_guard<std::mutex> lock(sample_mu_);
  const int64_t stopped_at = stopped_at_ns_;
  // So activity up to now is bracketed by pairs; a stopped run's maps end
  // with the pair Stop took.
  if (stopped_at == 0) SampleAllDevices();
  DrainActivity();
  ReadClockPage();
  std::vector<DeviceExport> devices(devices_.size());
  for (size_t i = 0; i < devices_.size(); ++i) {
    devices[i].info = devices_[i];
    devices[i].map = maps_[i].get();
  }
  for (const GpuActivity& a : activity_) {
    const int idx = DeviceIndex(a.device);
    if (idx >= 0) devices[static_cast<size_t>(idx)].activity.push_back(a);
  }
  DeviceExportOptions eo;
  eo.backend = backend_name_.empty() ? "none" : backend_name_;
  eo.cluster_mappings = page_mappings_.recorded();
  eo.stopped_at_ns = stopped_at;
  if (trace->host.empty()) trace->host = options_.host;
  if (trace->space->hostnames_size() == 0) trace::SetHostnames(trace->space, {options_.host});
  if (!backend_message_.empty()) trace->space->add_warnings("chronolink collector: no GPU data: " + backend_message_);
  // A stopped run ends at its stop, however long after it the export comes
  // (a wait for the clock page to map the stop, docs/collector.md).
  if (stopped_at != 0 && !trace::ProfileStopTime(*trace->space)) {
    trace::SetProfileStopTime(trace->space, static_cast<uint64_t>(stopped_at));
  }
  return AppendDevicePlanes(devices, eo, trace, stats, error);
}

bool Collector::WriteRun(const std::filesystem::path& logdir, const std::string& run, std::filesystem::path* path,
                         DeviceExportStats* stats, std::string* error) {
  trace::HostTrace trace;
  trace.host = options_.host;
  const int64_t now = clock_.Now();
  if (!ExportTo(&trace, stats, error)) return false;
  if (!trace::ProfileStopTime(*trace.space)) trace::SetProfileStopTime(trace.space, static_cast<uint64_t>(now));
  const std::filesystem::path dir = logdir / "plugins" / "profile" / run;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    *error = "cannot create " + dir.string() + ": " + ec.message();
    return false;
  }
  *path = dir / (options_.host + ".xplane.pb");
  return trace::WriteXSpaceFile(trace, *path, error);
}

bool Collector::TimeHsaDispatch(const HsaDispatch& dispatch, std::string* why) {
  if (!backend_) {
    *why = "no GPU backend";
    return false;
  }
  HsaDispatchTimer* timer = backend_->hsa_dispatch_timer();
  if (timer == nullptr) {
    *why = "the " + std::string(backend_->name()) + " backend does not time HSA dispatches (rocm does)";
    return false;
  }
  return timer->TimeHsaDispatch(dispatch, why);
}

uint64_t Collector::BeginRegion(uint32_t device, void* stream, const std::string& name, std::string* why) {
  RegionTimer* t = backend_ ? backend_->region_timer() : nullptr;
  if (t == nullptr) {
    *why = backend_ ? "the " + backend_name_ + " backend does not time regions" : "no GPU backend";
    return 0;
  }
  return t->Begin(device, stream, name, why);
}

bool Collector::EndRegion(uint64_t region, std::string* why) {
  RegionTimer* t = backend_ ? backend_->region_timer() : nullptr;
  if (t == nullptr) {
    *why = "no region timer";
    return false;
  }
  return t->End(region, why);
}

ConvertedStamp Collector::DeviceToHost(uint32_t device, int64_t device_ns) const {
  std::lock_guard<std::mutex> lock(sample_mu_);
  const int idx = DeviceIndex(device);
  if (idx < 0) return {};
  return maps_[static_cast<size_t>(idx)]->ToHost(device_ns);
}

CollectorStatus Collector::Status() const {
  std::lock_guard<std::mutex> lock(sample_mu_);
  CollectorStatus s;
  s.backend = backend_name_;
  s.backend_status = backend_status_;
  s.backend_message = backend_message_;
  s.devices = devices_;
  for (const auto& m : maps_) s.maps.push_back(m->stats());
  if (backend_) s.activity = backend_->activity_counters();
  s.activity_kept = activity_.size();
  s.activity_dropped_store = activity_dropped_store_;
  s.snapshot_read_failures = read_failures_;
  s.last_read_failure = last_read_failure_;
  s.clock_page_state = page_state_;
  s.clock_page_refusal = page_refusal_;
  s.clock_page_refusals = page_refusals_;
  s.clock_page_lapses = page_lapses_;
  s.clock_page_mappings = page_mappings_.recorded().mappings.size();
  s.running = running_;
  return s;
}

std::vector<GpuActivity> Collector::ActivitySnapshot() const {
  std::lock_guard<std::mutex> lock(sample_mu_);
  return activity_;
}

}  // namespace chronolink::collector
