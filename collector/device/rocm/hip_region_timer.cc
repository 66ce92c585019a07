// HIP-event regions anchored to the GPU counter (hip_region_timer.h).
#include "collector/device/rocm/hip_region_timer.h"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <thread>

namespace chronolink::collector {

namespace {

constexpr int64_t kUnknownFloor = std::numeric_limits<int64_t>::min();
// Polling an anchor: spin this long (an idle stream completes a marker in
// tens of microseconds), then sleep between queries.
constexpr int64_t kSpinNs = 2'000'000;
constexpr auto kPollSleep = std::chrono::microseconds(100);

int64_t MonoNow() { return ReadClockNs(CLOCK_MONOTONIC); }

uint32_t ThreadId() { return static_cast<uint32_t>(syscall(SYS_gettid)); }

}  // namespace

HipRegionTimer::HipRegionTimer(const HipApi& hip, DeviceNsReader read_device_ns, const NodeClock& host,
                               const HipRegionTimerOptions& options)
    : hip_(hip), read_device_ns_(std::move(read_device_ns)), host_(host), options_(options) {}

HipRegionTimer::~HipRegionTimer() {
  std::lock_guard<std::mutex> lock(mu_);
  FreeAll();
}

bool HipRegionTimer::Start(std::span<const uint32_t> ordinals, std::string* why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (started_) return true;
    for (uint32_t ordinal : ordinals) {
      HipDeviceGuard guard(hip_, static_cast<int>(ordinal));
      Device d;
      d.ordinal = ordinal;
      hipError_t e = guard.ok() ? hip_.StreamCreateWithFlags(&d.anchor_stream, hipStreamNonBlocking)
                                : hipErrorInvalidDevice;
      if (e != hipSuccess) {
        *why = "HIP device " + std::to_string(ordinal) +
               ": cannot create the anchor stream: " + HipErrorText(hip_, e);
        FreeAll();
        return false;
      }
      devices_.push_back(std::move(d));
    }
    started_ = true;
  }
  for (Device& d : devices_) {
    if (!TakeAnchor(&d, why)) {
      *why = "HIP device " + std::to_string(d.ordinal) + ": first anchor failed: " + *why;
      std::lock_guard<std::mutex> lock(mu_);
      FreeAll();
      return false;
    }
  }
  return true;
}

HipRegionTimer::Device* HipRegionTimer::FindDevice(uint32_t ordinal) {
  for (Device& d : devices_) {
    if (d.ordinal == ordinal) return &d;
  }
  return nullptr;
}

bool HipRegionTimer::TakeEvents(Device* d, hipEvent_t* a, hipEvent_t* b, std::string* why) {
  hipEvent_t* wanted[2] = {a, b};
  for (hipEvent_t* slot : wanted) {
    if (slot == nullptr) continue;
    if (!d->free_events.empty()) {
      *slot = d->free_events.back();
      d->free_events.pop_back();
      continue;
    }
    HipDeviceGuard guard(hip_, static_cast<int>(d->ordinal));
    hipError_t e = guard.ok() ? hip_.EventCreateWithFlags(slot, hipEventDefault) : hipErrorInvalidDevice;
    if (e != hipSuccess) {
      *why = "hipEventCreateWithFlags: " + HipErrorText(hip_, e);
      if (slot == b && *a != nullptr) d->free_events.push_back(*a);
      return false;
    }
  }
  return true;
}

void HipRegionTimer::RecycleEvents(Device* d, hipEvent_t a, hipEvent_t b) {
  if (a != nullptr) d->free_events.push_back(a);
  if (b != nullptr) d->free_events.push_back(b);
}

uint32_t HipRegionTimer::StreamLabel(Device* d, hipStream_t stream) {
  if (stream == nullptr) return 0;  // the default stream
  auto it = d->stream_labels.find(stream);
  if (it != d->stream_labels.end()) return it->second;
  const uint32_t label = static_cast<uint32_t>(d->stream_labels.size()) + 1;
  d->stream_labels.emplace(stream, label);
  return label;
}

uint64_t HipRegionTimer::Begin(uint32_t ordinal, void* stream, std::string_view name, std::string* why) {
  std::lock_guard<std::mutex> lock(mu_);
  Device* d = started_ ? FindDevice(ordinal) : nullptr;
  if (d == nullptr) {
    *why = started_ ? "device " + std::to_string(ordinal) + " is not collected" : "activity is not started";
    return 0;
  }
  if (regions_.size() >= options_.max_regions_in_flight) {
    ++dropped_;
    *why = "too many regions in flight (" + std::to_string(regions_.size()) + ")";
    return 0;
  }
  Region r;
  r.ordinal = ordinal;
  r.stream = static_cast<hipStream_t>(stream);
  r.name = std::string(name);
  if (!TakeEvents(d, &r.begin, &r.end, why)) return 0;
  std::string floor_why;
  if (!read_device_ns_(ordinal, &r.floor_ns, &floor_why)) r.floor_ns = kUnknownFloor;
  hipError_t e = hip_.EventRecord(r.begin, r.stream);
  if (e != hipSuccess) {
    RecycleEvents(d, r.begin, r.end);
    *why = "hipEventRecord(begin): " + HipErrorText(hip_, e);
    return 0;
  }
  r.stream_label = StreamLabel(d, r.stream);
  r.host_begin_ns = host_.Now();
  r.thread = ThreadId();
  const uint64_t id = next_region_++;
  regions_.emplace(id, std::move(r));
  return id;
}

bool HipRegionTimer::End(uint64_t region, std::string* why) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = regions_.find(region);
  if (it == regions_.end()) {
    *why = "no region " + std::to_string(region) + " in flight";
    return false;
  }
  if (it->second.ended) {
    *why = "region " + std::to_string(region) + " already ended";
    return false;
  }
  hipError_t e = hip_.EventRecord(it->second.end, it->second.stream);
  if (e != hipSuccess) {
    *why = "hipEventRecord(end): " + HipErrorText(hip_, e);
    return false;
  }
  it->second.ended = true;
  it->second.host_end_ns = host_.Now();
  return true;
}

bool HipRegionTimer::WaitComplete(hipEvent_t event, int64_t timeout_ns) {
  const int64_t start = MonoNow();
  for (;;) {
    hipError_t e = hip_.EventQuery(event);
    if (e == hipSuccess) return true;
    if (e != hipErrorNotReady) return false;
    const int64_t waited = MonoNow() - start;
    if (waited > timeout_ns) return false;
    if (waited > kSpinNs) std::this_thread::sleep_for(kPollSleep);
  }
}

bool HipRegionTimer::TryAnchor(Device* d, hipEvent_t event, RegionAnchor* out, std::string* why) {
  int64_t before = 0, after = 0;
  if (!read_device_ns_(d->ordinal, &before, why)) return false;
  hipError_t e = hip_.EventRecord(event, d->anchor_stream);
  if (e != hipSuccess) {
    *why = "hipEventRecord(anchor): " + HipErrorText(hip_, e);
    return false;
  }
  if (!WaitComplete(event, options_.anchor_timeout_ns)) {
    *why =
        "anchor event not complete within " + std::to_string(options_.anchor_timeout_ns / 1'000'000) + " ms";
    return false;
  }
  if (!read_device_ns_(d->ordinal, &after, why)) return false;
  out->device_ns = before + (after - before) / 2;
  out->half_width_ns = (after - before + 1) / 2;
  out->bracket_end_ns = after;
  return true;
}

bool HipRegionTimer::TakeAnchor(Device* d, std::string* why) {
  hipEvent_t events[2] = {nullptr, nullptr};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!TakeEvents(d, &events[0], &events[1], why)) return false;
  }
  // Keep the narrower of successive tries; its event stays as the anchor.
  int best = -1;
  RegionAnchor anchor, candidate;
  for (int i = 0; i < options_.anchor_tries; ++i) {
    const int slot = best == 0 ? 1 : 0;
    if (!TryAnchor(d, events[slot], &candidate, why)) continue;
    if (best < 0 || candidate.half_width_ns < anchor.half_width_ns) {
      anchor = candidate;
      best = slot;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  d->last_anchor_mono_ns = MonoNow();
  if (best < 0) {
    ++anchor_failures_;
    RecycleEvents(d, events[0], events[1]);
    return false;
  }
  anchor.seq = next_anchor_seq_++;
  d->anchors.push_back(anchor);
  d->anchor_events.emplace(anchor.seq, events[best]);
  RecycleEvents(d, events[1 - best], nullptr);
  PruneAnchors(d);
  return true;
}

void HipRegionTimer::PruneAnchors(Device* d) {
  // Keep the newest anchor that precedes every region still in flight on
  // this device, and all newer ones; at most max_anchors.
  int64_t oldest_floor = std::numeric_limits<int64_t>::max();
  for (const auto& [id, r] : regions_) {
    if (r.ordinal == d->ordinal) oldest_floor = std::min(oldest_floor, r.floor_ns);
  }
  const RegionAnchor* keep_from = AnchorBefore(d->anchors, oldest_floor);
  size_t first = keep_from != nullptr ? static_cast<size_t>(keep_from - d->anchors.data()) : 0;
  if (d->anchors.size() - first > options_.max_anchors) first = d->anchors.size() - options_.max_anchors;
  for (size_t i = 0; i < first; ++i) {
    auto it = d->anchor_events.find(d->anchors[i].seq);
    if (it != d->anchor_events.end()) {
      d->free_events.push_back(it->second);
      d->anchor_events.erase(it);
    }
  }
  d->anchors.erase(d->anchors.begin(), d->anchors.begin() + static_cast<std::ptrdiff_t>(first));
}

void HipRegionTimer::CollectCompleted(std::vector<Completed>* done) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = regions_.begin(); it != regions_.end();) {
    Region& r = it->second;
    if (!r.ended) {
      ++it;
      continue;
    }
    hipError_t e = hip_.EventQuery(r.end);
    if (e == hipErrorNotReady) {
      ++it;
      continue;
    }
    if (e == hipSuccess) e = hip_.EventQuery(r.begin);
    if (e == hipSuccess) {
      done->push_back(Completed{it->first, r});
    } else {
      ++dropped_;  // a HIP error on a region's events: its times are lost
      RecycleEvents(FindDevice(r.ordinal), r.begin, r.end);
    }
    it = regions_.erase(it);
  }
}

bool HipRegionTimer::PlaceRegion(const Device& d, const Completed& c, int64_t ceiling_ns, GpuActivity* out) {
  const Region& r = c.region;
  auto place = [&](hipEvent_t event, int64_t floor_ns, PlacedInstant* p) {
    // First from the anchor before the floor, then from the newest anchor
    // certainly before that estimate: short, non-negative elapsed times.
    const RegionAnchor* a = floor_ns == kUnknownFloor ? (d.anchors.empty() ? nullptr : &d.anchors.front())
                                                      : AnchorBefore(d.anchors, floor_ns);
    for (int pass = 0; pass < 2 && a != nullptr; ++pass) {
      float ms = 0;
      auto ev = d.anchor_events.find(a->seq);
      if (ev == d.anchor_events.end() || hip_.EventElapsedTime(&ms, ev->second, event) != hipSuccess ||
          !PlaceEvent(*a, ms, options_.timing, p)) {
        return false;
      }
      const RegionAnchor* closer = AnchorBefore(d.anchors, p->device_ns - p->error_ns);
      if (closer == nullptr || closer->seq == a->seq) return true;
      a = closer;
    }
    return a != nullptr;
  };
  PlacedInstant begin, end;
  if (!place(r.begin, r.floor_ns, &begin)) return false;
  if (!place(r.end, begin.device_ns - begin.error_ns, &end)) return false;
  if (RegionImplausible(begin, end, r.floor_ns, ceiling_ns) != nullptr) return false;
  out->kind = ActivityKind::kMarker;
  out->device = r.ordinal;
  out->stream = r.stream_label;
  out->correlation_id = c.id;
  out->start_device_ns = begin.device_ns;
  out->end_device_ns = std::max(end.device_ns, begin.device_ns);
  out->device_error_ns = std::max(begin.error_ns, end.error_ns);
  out->name = r.name;
  out->details = "hip events, anchored";
  out->launch_host_start_ns = r.host_begin_ns;
  out->launch_host_end_ns = r.host_end_ns;
  out->launch_thread = r.thread;
  return true;
}

size_t HipRegionTimer::Drain(std::vector<GpuActivity>* out) {
  if (!started_) return 0;
  for (Device& d : devices_) {
    if (MonoNow() - d.last_anchor_mono_ns >= options_.anchor_period_ns) {
      std::string why;
      TakeAnchor(&d, &why);  // a failure is counted; regions wait for the next one
    }
  }
  std::vector<Completed> done;
  CollectCompleted(&done);
  if (done.empty()) return 0;
  size_t appended = 0;
  for (Device& d : devices_) {
    // Read after the queries saw the events complete: no end event is later.
    int64_t ceiling = std::numeric_limits<int64_t>::max();
    std::string why;
    if (!read_device_ns_(d.ordinal, &ceiling, &why)) ceiling = std::numeric_limits<int64_t>::max();
    std::lock_guard<std::mutex> lock(mu_);
    for (const Completed& c : done) {
      if (c.region.ordinal != d.ordinal) continue;
      GpuActivity a;
      if (PlaceRegion(d, c, ceiling, &a)) {
        out->push_back(std::move(a));
        ++appended;
      } else {
        ++invalid_;
      }
      RecycleEvents(&d, c.region.begin, c.region.end);
    }
    PruneAnchors(&d);
  }
  return appended;
}

void HipRegionTimer::Stop(int64_t timeout_ns, std::vector<GpuActivity>* out) {
  if (!started_) return;
  const int64_t deadline = MonoNow() + timeout_ns;
  for (;;) {
    Drain(out);
    bool ended_pending = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [id, r] : regions_) ended_pending = ended_pending || r.ended;
    }
    if (!ended_pending || MonoNow() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::lock_guard<std::mutex> lock(mu_);
  dropped_ += regions_.size();
  FreeAll();
}

void HipRegionTimer::FreeAll() {
  // Teardown: a failure to free leaves nothing to act on, so results are dropped.
  for (auto& [id, r] : regions_) {
    if (r.begin != nullptr) (void)hip_.EventDestroy(r.begin);
    if (r.end != nullptr) (void)hip_.EventDestroy(r.end);
  }
  regions_.clear();
  for (Device& d : devices_) {
    for (hipEvent_t e : d.free_events) (void)hip_.EventDestroy(e);
    for (auto& [seq, e] : d.anchor_events) (void)hip_.EventDestroy(e);
    if (d.anchor_stream != nullptr) (void)hip_.StreamDestroy(d.anchor_stream);
  }
  devices_.clear();
  started_ = false;
}

uint64_t HipRegionTimer::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

uint64_t HipRegionTimer::invalid() const {
  std::lock_guard<std::mutex> lock(mu_);
  return invalid_;
}

uint64_t HipRegionTimer::anchor_failures() const {
  std::lock_guard<std::mutex> lock(mu_);
  return anchor_failures_;
}

}  // namespace chronolink::collector
