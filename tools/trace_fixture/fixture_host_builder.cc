#include "tools/trace_fixture/fixture_host_builder.h"

#include <algorithm>

#include "trace/model/xplane_edit.h"

namespace chronolink::trace {
namespace {

constexpr int64_t kMainThreadLineId = 1;
constexpr int64_t kLaunchLineIdBase = 100;
constexpr int64_t kComputeStreamId = 13;
constexpr int64_t kNcclStreamId = 14;
constexpr int kFusionNames = 64;
const char* const kModule = "jit_train_step";

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string KernelDetails(int k) {
  return "regs:" + std::to_string(32 + (k % 4) * 16) + " static_shared:0 dynamic_shared:" +
         std::to_string((k % 3) * 1024) + " grid:" + std::to_string(128 << (k % 3)) +
         ",1,1 block:256,1,1 occ_pct:50.0";
}

}  // namespace

int64_t FixtureJitterNs(uint64_t seed, int host, int gpu, int step, int collective, int which,
                        int64_t max_ns) {
  if (max_ns <= 0) return 0;
  uint64_t h = SplitMix64(seed);
  for (const int64_t v : {int64_t{host}, int64_t{gpu}, int64_t{step}, int64_t{collective}, int64_t{which}}) {
    h = SplitMix64(h ^ static_cast<uint64_t>(v));
  }
  return static_cast<int64_t>(h % static_cast<uint64_t>(max_ns + 1));
}

FixtureHostBuilder::FixtureHostBuilder(const XSpaceFixtureOptions& options, const FixtureHost& host,
                                       const NodeClock& clock, int host_index, HostTrace* out)
    : options_(options), host_(host), host_index_(host_index), out_(out), clock_(clock) {
  line_base_v_ = options.absolute_line_timestamps ? 0 : clock_.Ingest(options.true_start_ns);
}

int64_t FixtureHostBuilder::CollectiveSlot() const {
  return options_.step_ns * 35 / 100 / static_cast<int64_t>(FixtureCollectives().size());
}

int64_t FixtureHostBuilder::CollectiveBase(int step, int c) const {
  return StepStart(step) + options_.step_ns * 55 / 100 + c * CollectiveSlot();
}

int64_t FixtureHostBuilder::CollectiveKernelStart(int step, int c, int gpu) const {
  const int64_t j = options_.collective_jitter_ns;
  return CollectiveBase(step, c) + FixtureJitterNs(options_.seed, host_index_, gpu, step, c, 0, j);
}

int64_t FixtureHostBuilder::CollectiveKernelEnd(int step, int c, int gpu) const {
  // After the latest possible start on any host by at least slot / 2.
  const int64_t j = options_.collective_jitter_ns;
  return CollectiveBase(step, c) + j + CollectiveSlot() / 2 +
         FixtureJitterNs(options_.seed, host_index_, gpu, step, c, 1, j);
}

xspace::XLine* FixtureHostBuilder::NewLine(xspace::XPlane* plane, int64_t id, const std::string& name) {
  auto* line = plane->add_lines();
  line->set_id(id);
  line->set_display_id(id);
  line->set_name(name);
  return line;
}

xspace::XEvent* FixtureHostBuilder::AddEvent(PlaneState* state, xspace::XLine* line,
                                             const std::string& name, int64_t true_start,
                                             int64_t true_end) {
  const int64_t v_start = clock_.Ingest(true_start);
  const int64_t v_end = clock_.Ingest(true_end);
  // The line starts at its first event; later events are offsets from it.
  if (line->events().empty()) line->set_timestamp_ns(v_start - line_base_v_);
  const int64_t line_start_v = line->timestamp_ns() + line_base_v_;
  auto [it, inserted] = state->event_ids.try_emplace(name, 0);
  if (inserted) it->second = GetOrCreateEventMetadata(state->plane, name)->id();
  auto* event = line->add_events();
  event->set_metadata_id(it->second);
  event->set_offset_ps((v_start - line_start_v) * 1000);
  event->set_duration_ps((v_end - v_start) * 1000);
  return event;
}

int64_t FixtureHostBuilder::StatId(PlaneState* state, const std::string& name) {
  auto [it, inserted] = state->stat_ids.try_emplace(name, 0);
  if (inserted) it->second = GetOrCreateStatMetadata(state->plane, name)->id();
  return it->second;
}

void FixtureHostBuilder::AddStr(PlaneState* state, xspace::XEvent* event, const char* stat,
                                const std::string& value) {
  auto* s = event->add_stats();
  s->set_metadata_id(StatId(state, stat));
  s->set_str_value(value);
}

void FixtureHostBuilder::AddInt(PlaneState* state, xspace::XEvent* event, const char* stat,
                                int64_t value) {
  auto* s = event->add_stats();
  s->set_metadata_id(StatId(state, stat));
  s->set_int64_value(value);
}

void FixtureHostBuilder::AddUint(PlaneState* state, xspace::XEvent* event, const char* stat,
                                 uint64_t value) {
  auto* s = event->add_stats();
  s->set_metadata_id(StatId(state, stat));
  s->set_uint64_value(value);
}

void FixtureHostBuilder::AddRef(PlaneState* state, xspace::XEvent* event, const char* stat,
                                const std::string& value) {
  // XLA interns repeated strings: the value is a stat metadata entry's name.
  auto* s = event->add_stats();
  s->set_metadata_id(StatId(state, stat));
  s->set_ref_value(static_cast<uint64_t>(StatId(state, value)));
}

void FixtureHostBuilder::BuildHostPlane() {
  auto* plane = out_->space->add_planes();
  plane->set_id(kFixtureHostPlaneId);
  plane->set_name("/host:CPU");
  PlaneState st{plane, {}, {}};
  auto* main = NewLine(plane, kMainThreadLineId, "python3");
  std::vector<xspace::XLine*> launch;
  for (int g = 0; g < options_.gpus_per_host; ++g) {
    launch.push_back(NewLine(plane, kLaunchLineIdBase + g, "pjrt_gpu_" + std::to_string(g)));
  }
  const int64_t p = options_.step_ns;
  const int64_t slot = CollectiveSlot();
  const auto& collectives = FixtureCollectives();
  for (int s = 0; s < options_.steps; ++s) {
    const int64_t t = StepStart(s);
    auto* step = AddEvent(&st, main, "train_step", t + p / 100, t + p * 95 / 100);
    AddInt(&st, step, "step_num", s);
    AddInt(&st, step, "_r", 1);
    AddEvent(&st, main, "ExecuteProgram", t + p * 2 / 100, t + p * 93 / 100);
    for (int g = 0; g < options_.gpus_per_host; ++g) {
      auto* module = AddEvent(&st, launch[g], "XlaModule", t + p * 3 / 100, t + p * 92 / 100);
      AddStr(&st, module, "hlo_module", kModule);
      AddUint(&st, module, "program_id", 7);
      for (size_t c = 0; c < collectives.size(); ++c) {
        const int64_t base = CollectiveBase(s, static_cast<int>(c));
        const std::string op = collectives[c].hlo_op;
        auto* launched = AddEvent(&st, launch[g], op, base - slot / 8, base - slot / 16);
        AddStr(&st, launched, "hlo_op", op);
        AddStr(&st, launched, "hlo_module", kModule);
        if (!collectives[c].done_op) continue;
        // The `-done` half waits until this GPU's kernel has ended.
        const std::string done_op = collectives[c].done_op;
        const int64_t kernel_end = CollectiveKernelEnd(s, static_cast<int>(c), g);
        auto* done = AddEvent(&st, launch[g], done_op, base - slot / 32, kernel_end + slot / 64);
        AddStr(&st, done, "hlo_op", done_op);
        AddStr(&st, done, "hlo_module", kModule);
      }
    }
  }
}

void FixtureHostBuilder::BuildGpuPlane(int gpu) {
  auto* plane = out_->space->add_planes();
  plane->set_id(gpu);
  plane->set_name("/device:GPU:" + std::to_string(gpu));
  PlaneState st{plane, {}, {}};
  auto* compute = NewLine(plane, kComputeStreamId, "Stream #13(Compute)");
  auto* nccl = NewLine(plane, kNcclStreamId, "Stream #14(Compute,NCCL)");
  const int64_t p = options_.step_ns;
  const auto& collectives = FixtureCollectives();
  const int k_count = options_.kernels_per_step;
  for (int s = 0; s < options_.steps; ++s) {
    const int64_t region = StepStart(s) + p * 5 / 100;
    const int64_t k_slot = k_count > 0 ? p * 45 / 100 / k_count : 0;
    for (int k = 0; k < k_count; ++k) {
      const int64_t start = region + k * k_slot;
      const int name = k % kFusionNames;
      auto* e = AddEvent(&st, compute, "fusion_" + std::to_string(name), start,
                         start + std::max<int64_t>(1, k_slot * 3 / 4));
      AddUint(&st, e, "correlation_id", next_correlation_id_++);
      AddRef(&st, e, "kernel_details", KernelDetails(name));
      AddStr(&st, e, "hlo_op", "fusion." + std::to_string(name));
      AddStr(&st, e, "hlo_module", kModule);
    }
    for (size_t c = 0; c < collectives.size(); ++c) {
      const int ci = static_cast<int>(c);
      auto* e = AddEvent(&st, nccl, collectives[c].kernel, CollectiveKernelStart(s, ci, gpu),
                         CollectiveKernelEnd(s, ci, gpu));
      const std::string op = collectives[c].hlo_op;
      AddUint(&st, e, "correlation_id", next_correlation_id_++);
      AddRef(&st, e, "kernel_details", KernelDetails(ci));
      AddStr(&st, e, "hlo_op", op);
      AddStr(&st, e, "hlo_module", kModule);
    }
  }
}

void FixtureHostBuilder::BuildTaskEnvironment() {
  const int64_t stop = options_.true_start_ns + options_.steps * options_.step_ns;
  SetProfileStartTime(out_->space, static_cast<uint64_t>(clock_.Ingest(options_.true_start_ns)));
  SetProfileStopTime(out_->space, static_cast<uint64_t>(clock_.Ingest(stop)));
}

void FixtureHostBuilder::Build() {
  out_->host = host_.host;
  SetHostnames(out_->space, {host_.host});
  BuildHostPlane();
  for (int g = 0; g < options_.gpus_per_host; ++g) BuildGpuPlane(g);
  BuildTaskEnvironment();
  out_->line_base_ns = line_base_v_;
  out_->line_base_known = true;
}

}  // namespace chronolink::trace
