// A GPU backend, in the shape of chrony's refclock drivers: a small driver
// (Open, ReadSnapshot, activity Start/Drain/Stop), chosen at run time by
// name from one table (device/backend_registry.h). A backend only talks to
// its vendor library; it knows nothing of maps, XSpace or options files.
//
// Threading: Open/Close/StartActivity/StopActivity from the owner's thread;
// ReadSnapshot from the sampler thread; DrainActivity from any one thread.
// Implementations make ReadSnapshot and DrainActivity safe against each
// other.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "clock/clock_reader.h"
#include "collector/clock/snapshot_reading.h"
#include "collector/device/gpu_activity.h"

namespace chronolink::collector {

struct GpuDeviceInfo {
  uint32_t ordinal = 0;         // 0.., the XSpace plane id of /device:GPU:<ordinal>
  std::string name;             // "AMD Instinct MI250X", "NVIDIA H100", "simulated GPU 0"
  std::string vendor;           // "AMD", "NVIDIA", "simulated"
  std::string clock;            // what the counter is ("amdkfd GPU clock counter, 100 MHz")
  uint64_t counter_hz = 0;      // nominal counter rate
  int counter_bits = 64;        // the raw counter wraps at 2^bits
};

// Why Open() found nothing to collect from, so callers can say it once and
// then exit or go on without GPU data, as the options ask.
enum class BackendStatus : uint8_t {
  kReady = 0,         // at least one device
  kNotCompiledIn = 1, // this build has no such backend
  kNoLibrary = 2,     // the vendor library is not installed / not loadable
  kNoDevice = 3,      // the library loaded but sees no device
  kFailed = 4,        // a device exists but the backend could not use it
};
std::string_view BackendStatusName(BackendStatus s);

struct BackendOptions {
  // Devices to use (ordinals); empty: all.
  std::vector<uint32_t> devices;
  // Activity buffer bound: records kept between drains, beyond which new
  // ones are dropped and counted.
  size_t max_pending_activity = 1 << 20;
  // Backend-specific settings as "key=value" (the simulated GPU's rate,
  // drift, ...); unknown keys are an error.
  std::vector<std::string> settings;
  // The collector's host clock (node CLOCK_REALTIME, or the test-mode virtual
  // clock), for host-side stamps such as launch events. Outlives the backend.
  const NodeClock* host_clock = nullptr;
};

struct ActivityCounters {
  uint64_t records = 0;   // handed out by DrainActivity
  uint64_t dropped = 0;   // lost to a full buffer (or reported lost by the vendor library)
  uint64_t invalid = 0;   // refused: end before start, unknown device, counter gone backwards
};

// Regions the application times on a device queue through the library's
// helpers (HIP events around a stream region on ROCm): each finished region
// comes back from DrainActivity as an ActivityKind::kMarker record. `stream`
// is the vendor's stream handle (hipStream_t, cudaStream_t; nullptr for the
// default stream). Returns a region id (> 0) for End, or 0 with *why.
class RegionTimer {
 public:
  virtual ~RegionTimer() = default;
  virtual uint64_t Begin(uint32_t ordinal, void* stream, std::string_view name, std::string* why) = 0;
  virtual bool End(uint64_t region, std::string* why) = 0;
};

// A kernel dispatch the application submitted through HSA itself, on a
// queue with profiling enabled (hsa_amd_profiling_set_profiler_enabled),
// reported once its completion signal has completed. Handles are the
// `.handle` of hsa_agent_t and hsa_signal_t.
struct HsaDispatch {
  uint32_t device = 0;  // ordinal, as in GpuDeviceInfo
  uint64_t agent_handle = 0;
  uint64_t signal_handle = 0;
  uint32_t queue = 0;   // the line it is drawn on (Stream #<queue>)
  std::string name;     // the kernel's name
};

// ROCm's extension: times dispatches the application submitted through HSA
// itself (the generic interface above knows nothing of HSA; a backend that
// offers this returns it from hsa_dispatch_timer(), as chrony's refclock
// drivers keep their extras out of the one driver interface). The record
// comes back from DrainActivity. False with *why.
class HsaDispatchTimer {
 public:
  virtual ~HsaDispatchTimer() = default;
  virtual bool TimeHsaDispatch(const HsaDispatch& dispatch, std::string* why) = 0;
};

class GpuBackend {
 public:
  virtual ~GpuBackend() = default;

  virtual std::string_view name() const = 0;  // "rocm", "cuda", "simulated"

  // Loads the vendor library and enumerates devices. On anything but
  // kReady, *why is one line a user can act on ("libhsakmt.so.1 not found:
  // install libhsakmt1", "HIP sees no device (hipGetDeviceCount: 100)").
  virtual BackendStatus Open(const BackendOptions& options, std::vector<GpuDeviceInfo>* devices,
                             std::string* why) = 0;
  virtual void Close() = 0;

  // One bracketed read of device `ordinal`'s counter: host clock (the
  // collector's node clock) before, counter, host clock after, as close
  // together as the library allows. False with *why when the read failed
  // or the counter went backwards (never a made-up reading).
  virtual bool ReadSnapshot(uint32_t ordinal, const NodeClock& host, SnapshotReading* out,
                            std::string* why) = 0;

  // Activity collection. A backend without activity support returns true
  // and never yields records (says so in docs).
  virtual bool StartActivity(std::string* why) = 0;
  // Appends completed records to *out; returns how many.
  virtual size_t DrainActivity(std::vector<GpuActivity>* out) = 0;
  // Flushes what the vendor library still holds, then stops.
  virtual void StopActivity() = 0;
  virtual ActivityCounters activity_counters() const = 0;

  // Region timing, where the backend offers it (nullptr otherwise). Owned
  // by the backend; valid between Open and Close.
  virtual RegionTimer* region_timer() { return nullptr; }

  // The HSA dispatch timer, where the backend offers it (ROCm; nullptr
  // otherwise). Owned by the backend; valid between Open and Close.
  virtual HsaDispatchTimer* hsa_dispatch_timer() { return nullptr; }
};

}  // namespace chronolink::collector
