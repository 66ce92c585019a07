// The agent's event loop: one thread, one UDP socket, one signalfd. It wires
// capture -> probe engine -> tuple windows -> estimator -> edges.jsonl, and
// owns nothing of the protocol or the maths itself.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "agent/capture/timestamping_socket.h"
#include "agent/config/agent_config.h"
#include "agent/estimate/edge_windows.h"
#include "agent/estimate/probe_cadence.h"
#include "agent/export/edges_jsonl_writer.h"
#include "agent/export/timebase_jsonl_writer.h"
#include "agent/export/metrics_http_server.h"
#include "agent/export/packet_stamp_log.h"
#include "agent/probe/probe_engine.h"
#include "agent/runtime/cluster_service.h"
#include "agent/runtime/hardware_stamps.h"
#include "agent/runtime/run_as.h"
#include "agent/runtime/socket_transport.h"
#include "agent/runtime/tap_capture.h"
#include "clock/clock_reader.h"
#include "clock/clock_step_detector.h"
#include "clock/fit_clock.h"
#include "clock/timebase_knots.h"

namespace chronolink {

class AgentRuntime {
 public:
  explicit AgentRuntime(AgentConfig config);
  ~AgentRuntime();

  // Attaches the tap, binds the socket, drops the privileges, opens the
  // outputs and starts the threads; a clear message on failure.
  bool Start(std::string* error);
  // Runs until SIGINT/SIGTERM or the configured duration; returns the exit code.
  int Run();

 private:
  // Start's steps, in order (agent_runtime.cc).
  bool StartPrivileged(RunAsPlan* run_as, std::string* error);
  bool BuildEngine(std::string* error);
  bool HandOverAndDrop(const RunAsPlan& run_as, std::string* error);
  bool StartUnprivileged(const RunAsPlan& run_as, std::string* error);
  // The fit clock of the window starting at `window_start_ns` (F).
  std::optional<FitWindowClock> WindowClock(int64_t window_start_ns) const;
  void CloseWindows(int64_t now_ns, bool shutting_down);
  void LogSpanChange(const EdgeWindowRecord& r);
  void AdaptCadence(const EdgeWindowRecord& r, int64_t now_ns);
  void EnsureWindows(uint32_t peer);
  void ApplyMembership(const Membership& membership, int64_t now_ns);
  void WriteStats(bool final);
  void WriteTimebase();
  // A sample of REALTIME and RAW for the fit clock and the knots, at most one a millisecond.
  void SampleClock(int64_t monotonic_ns);
  std::string RenderMetrics() const;
  void LogProgress(int64_t now_ns);

  AgentConfig config_;
  FitClock clock_;
  ClockStepDetector step_detector_;
  int64_t last_now_ = 0;       // the fit clock at the previous loop turn
  int64_t last_realtime_ = 0;  // REALTIME then
  uint64_t clock_steps_ = 0;   // steps of our REALTIME seen
  // REALTIME stepped: windows around the step (in the fit clock) are spoiled,
  // the clock page (REALTIME) is withdrawn.
  void OnClockStep(int64_t before, int64_t after, int64_t realtime_before, int64_t realtime_after);
  void OnFitClockRemap(const FitClockRemap& remap);
  // The windows around a step of F from `before` to `after` are discarded
  // and the peers told; the engine's deadlines move by `step_ns`.
  void DiscardAroundStep(int64_t before, int64_t after, int64_t step_ns);
  uint64_t epoch_ = 0;
  TimestampingSocket socket_;
  std::unique_ptr<ProbeCodec> codec_;
  std::unique_ptr<SocketTransport> transport_;
  std::unique_ptr<ProbeEngine> engine_;
  std::map<uint32_t, std::unique_ptr<EdgeWindows>> windows_;
  std::map<uint32_t, ProbeCadence> cadence_;  // by probed peer, adaptive cadence only
  EdgesJsonlWriter writer_;
  // This node's REALTIME over its MONOTONIC_RAW, sampled by the fit clock
  // and written as knots (docs/clocks.md "Disciplined clocks").
  TimebaseKnots timebase_knots_;
  int64_t last_sample_raw_ns_ = 0;
  TimebaseJsonlWriter timebase_writer_;
  PacketStampLog stamp_log_;
  TapCapture tap_;
  MetricsHttpServer metrics_;
  // The latest closed window per (peer, source class), for the metrics.
  std::map<std::pair<uint32_t, SourceClass>, EdgeWindowRecord> last_records_;
  HardwareStamps hardware_;
  ClusterService cluster_;
  int signal_fd_ = -1;
  int64_t start_monotonic_ns_ = 0;
  int64_t windows_written_ = 0;
  int64_t windows_estimated_ = 0;
  bool write_failed_ = false;
};

}  // namespace chronolink
