// A faithful multi-host XLA-like profile run, generated with exactly known
// truth: the XSpace producer for tests and benchmarks, since no XLA/JAX is
// installable here (docs/xspace.md, "Fixture generator").
//
// Every event is laid out on one TRUE timeline shared by all hosts, then
// stamped with its host's virtual clock, the same formula the agent's
// test clocks use (clock/virtual_clock.h):
//     v = t + offset_ns + llround(drift_ppm * 1e-6 * (t - t0_ns))
// so the true instant of any event is VirtualClock(host).Invert(stamp).
//
// Per host: a `/host:CPU` plane (id 49) with TraceMe-like lines (a step
// root `train_step` with `step_num` and `_r` = 1, `ExecuteProgram`,
// `XlaModule`, and one host event per collective thunk), `/device:GPU:<n>`
// planes (id n) with `Stream #<n>(<kinds>)` lines of kernels carrying
// `correlation_id`, `kernel_details` (a ref_value, as XLA interns it),
// `hlo_op` and `hlo_module`, and a `Task Environment` plane with
// `profile_start_time` / `profile_stop_time`; hostnames = {host}.
//
// Collectives: in each step, collective c starts on every GPU of every host
// at true C(s, c) + jitter, jitter in [0, collective_jitter_ns], and ends at
// C + jitter_ns + duration + jitter', jitter' in [0, collective_jitter_ns]:
// every end comes at least `duration` after every start, so skewed clocks
// show happens-before violations and aligned ones none. Jitters are a hash
// of (seed, host, gpu, step, collective): generation is deterministic and
// one host can be generated without the others.
//
// Stateless functions; a host's trace is built by one thread.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "clock/clock_reader.h"
#include "clock/virtual_clock.h"
#include "trace/model/host_trace.h"

namespace chronolink::trace {

struct FixtureHost {
  std::string host;
  VirtualClockParams clock;
  // Or the test bed's evolving node clock (docs/testbed.md "Clocks as
  // deployed"): the host stamps on this clock state file's REALTIME, as the
  // node's agent does, and `clock` is unused.
  std::string clock_state_file;
};

// A host's clock as the node's agent has it (NodeClock::Ingest maps a true
// instant to it): linear, or its state file's REALTIME.
bool OpenFixtureHostClock(const FixtureHost& host, NodeClock* clock, std::string* error);

struct XSpaceFixtureOptions {
  int hosts = 2;
  int gpus_per_host = 2;              // 0..48 (the host plane is id 49)
  int steps = 3;
  int kernels_per_step = 8;           // compute kernels per GPU per step
  int64_t true_start_ns = 1'795'320'926'000'000'000;  // profile start, true time
  int64_t step_ns = 20'000'000;
  int64_t collective_jitter_ns = 2'000;
  // Clocks: `clocks` when given (one per host, names from it), else drawn
  // from `seed`: offset uniform in +-max_offset_ns, drift in +-max_drift_ppm
  // (multiples of 0.001 ppm), t0 = true_start_ns, names host_prefix + index.
  std::vector<FixtureHost> clocks;
  int64_t max_offset_ns = 50'000'000;
  double max_drift_ppm = 100.0;
  std::string host_prefix = "host";
  uint64_t seed = 1;
  bool absolute_line_timestamps = false;  // default: relative to profile_start_time, like JAX
};

// The collectives every step runs, in order. An async one is an XLA
// `-start` / `-done` pair: the kernel's hlo_op is the start op, and the
// host's done event waits for the kernel to end.
struct FixtureCollective {
  const char* hlo_op;   // e.g. "all-reduce.1", "all-reduce-start.6"
  const char* done_op;  // "all-reduce-done.6" for an async pair, else nullptr
  const char* kernel;   // the NCCL kernel on the GPU's NCCL stream
};
const std::vector<FixtureCollective>& FixtureCollectives();

// Checks the options and resolves each host's name and clock.
bool ResolveFixtureHosts(const XSpaceFixtureOptions& options, std::vector<FixtureHost>* hosts,
                         std::string* error);

// One host's profile (host = one of ResolveFixtureHosts' entries).
bool GenerateFixtureHost(const XSpaceFixtureOptions& options, const FixtureHost& host,
                         HostTrace* out, std::string* error);

// The smallest gap between any end and any start of one collective (ns of
// true time): the happens-before margin an aligned trace keeps.
int64_t FixtureCollectiveMarginNs(const XSpaceFixtureOptions& options);

// Truth: {"schema", "formula", the generation parameters, "hosts": [{host,
// file, offset_ns, drift_ppm, t0_ns, profile_start_time}], "collectives"}.
nlohmann::json FixtureTruth(const XSpaceFixtureOptions& options, const std::vector<FixtureHost>& hosts);
// Reads the hosts' clocks back from a truth file.
bool LoadFixtureTruth(const std::filesystem::path& path, std::vector<FixtureHost>* hosts,
                      std::string* error);

struct FixtureRunSummary {
  std::filesystem::path run_dir;
  std::vector<std::filesystem::path> files;
  int64_t events = 0;
};

// Writes `<logdir>/plugins/profile/<run>/<host>.xplane.pb` for every host
// (one host in memory at a time) and the truth JSON at `truth_path`.
bool WriteFixtureRun(const XSpaceFixtureOptions& options, const std::filesystem::path& logdir,
                     const std::string& run_name, const std::filesystem::path& truth_path,
                     FixtureRunSummary* summary, std::string* error);

// Events in a trace (all planes, lines).
int64_t CountEvents(const xspace::XSpace& space);

}  // namespace chronolink::trace
