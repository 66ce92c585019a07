// Builds one fixture host's planes (tools/trace_fixture/xspace_fixture.h
// describes the run): lays every event out on true time and stamps it with
// the host's virtual clock. Internal to the fixture library.
//
// One builder per host and thread.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include "tools/trace_fixture/xspace_fixture.h"

namespace chronolink::trace {

// XLA/TensorFlow's plane id for /host:CPU; the GPUs' planes are numbered below it.
constexpr int64_t kFixtureHostPlaneId = 49;

// Deterministic jitter in [0, max_ns] from (seed, host, gpu, step, collective, which).
int64_t FixtureJitterNs(uint64_t seed, int host, int gpu, int step, int collective, int which,
                        int64_t max_ns);

class FixtureHostBuilder {
 public:
  FixtureHostBuilder(const XSpaceFixtureOptions& options, const FixtureHost& host, const NodeClock& clock,
                     int host_index, HostTrace* out);
  void Build();

 private:
  // A plane being filled: its event metadata ids by name.
  struct PlaneState {
    xspace::XPlane* plane;
    std::unordered_map<std::string, int64_t> event_ids;
    std::unordered_map<std::string, int64_t> stat_ids;
  };
  int64_t StatId(PlaneState* state, const std::string& name);
  // Appends an event [true_start, true_end) to `line` with stats added by the caller.
  xspace::XEvent* AddEvent(PlaneState* state, xspace::XLine* line, const std::string& name,
                           int64_t true_start, int64_t true_end);
  xspace::XLine* NewLine(xspace::XPlane* plane, int64_t id, const std::string& name);
  void AddStr(PlaneState* state, xspace::XEvent* event, const char* stat, const std::string& value);
  void AddInt(PlaneState* state, xspace::XEvent* event, const char* stat, int64_t value);
  void AddUint(PlaneState* state, xspace::XEvent* event, const char* stat, uint64_t value);
  void AddRef(PlaneState* state, xspace::XEvent* event, const char* stat, const std::string& value);

  void BuildHostPlane();
  void BuildGpuPlane(int gpu);
  void BuildTaskEnvironment();

  int64_t StepStart(int step) const { return options_.true_start_ns + step * options_.step_ns; }
  int64_t CollectiveBase(int step, int c) const;
  int64_t CollectiveSlot() const;
  // True start and end of collective c's kernel on `gpu` in `step`.
  int64_t CollectiveKernelStart(int step, int c, int gpu) const;
  int64_t CollectiveKernelEnd(int step, int c, int gpu) const;

  const XSpaceFixtureOptions& options_;
  const FixtureHost& host_;
  const int host_index_;
  HostTrace* out_;
  const NodeClock& clock_;
  int64_t line_base_v_;  // virtual ns line timestamps are relative to (0 when absolute)
  uint64_t next_correlation_id_ = 1;
};

}  // namespace chronolink::trace
