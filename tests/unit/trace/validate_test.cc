// validate on hand-built traces: legacy PyTorch gloo hosts, XLA host and
// GPU planes, NCCL kernels with and without Kineto's args, async halves,
// send/recv, unmatched instances and the tolerance. Every expected figure
// follows from the constructed instants (see each test's comment).
#include "trace/validate/validate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "tests/unit/trace/validate_fixture.h"

namespace chronolink::trace {
namespace {

using testing::AddPlane;
using testing::LegacyGlooHost;
using testing::MakeHost;
using testing::PlaneBuilder;

constexpr int64_t kUs = 1'000'000;  // ps
constexpr int64_t kMs = 1'000'000'000;

std::vector<const HostTrace*> Ptrs(const std::vector<HostTrace>& hosts) {
  std::vector<const HostTrace*> out;
  for (const auto& h : hosts) out.push_back(&h);
  return out;
}

const FamilySummary& Family(const ValidationResult& r, const std::string& name) {
  const auto it = std::find_if(r.families.begin(), r.families.end(),
                               [&](const FamilySummary& f) { return f.family == name; });
  EXPECT_NE(it, r.families.end()) << name;
  static const FamilySummary kNone;
  return it == r.families.end() ? kNone : *it;
}

bool HasNote(const FamilySummary& f, const std::string& part) {
  return std::any_of(f.notes.begin(), f.notes.end(),
                     [&](const std::string& n) { return n.find(part) != std::string::npos; });
}

std::vector<HostTrace> GlooHosts(const std::vector<int64_t>& offsets_ns, int iterations = 4) {
  std::vector<HostTrace> hosts;
  for (size_t h = 0; h < offsets_ns.size(); ++h) {
    hosts.push_back(LegacyGlooHost("host" + std::to_string(h), static_cast<int>(h), offsets_ns[h], iterations));
  }
  return hosts;
}

// On one clock: gloo:all_reduce starts 0/10/20 us and ends 1000/1005/1010 us
// after T; c10d::allreduce_ starts -100/-70/-40 us, lasts 20 us.
TEST(ValidateTest, AlignedGlooHostsHaveNoViolationsAndExactSkews) {
  const auto hosts = GlooHosts({0, 0, 0});
  const auto r = ValidateTraces(Ptrs(hosts), {});
  EXPECT_EQ(r.hosts, (std::vector<std::string>{"host0", "host1", "host2"}));
  EXPECT_EQ(r.events, 24);
  EXPECT_EQ(r.matched_instances, 8);
  EXPECT_EQ(r.checked_instances, 4);  // gloo only: c10d::allreduce_ returns before the peers join
  EXPECT_EQ(r.unmatched_events, 0);
  EXPECT_EQ(r.violations_total, 0);

  const auto& gloo = Family(r, "gloo:all_reduce");
  EXPECT_EQ(gloo.dependency, Dependency::kAllRanks);
  EXPECT_EQ(gloo.matched_instances, 4);
  EXPECT_EQ(gloo.checked_instances, 4);
  EXPECT_EQ(gloo.start_skew.count, 4);
  EXPECT_EQ(gloo.start_skew.max_ps, 20 * kUs);
  EXPECT_EQ(gloo.end_skew.p50_ps, 10 * kUs);

  const auto& c10d = Family(r, "c10d::allreduce_");
  EXPECT_EQ(c10d.matched_instances, 4);
  EXPECT_EQ(c10d.checked_instances, 0);
  EXPECT_EQ(c10d.violations, 0);  // it would "violate" by 20 us if it were checked
  EXPECT_TRUE(HasNote(c10d, "launch or enqueue"));
  EXPECT_EQ(c10d.start_skew.p50_ps, 60 * kUs);

  // Over all 8 instances: starts {20 x4, 60 x4} us.
  EXPECT_EQ(r.start_skew.count, 8);
  EXPECT_EQ(r.start_skew.p50_ps, 20 * kUs);
  EXPECT_EQ(r.start_skew.p90_ps, 60 * kUs);
  EXPECT_EQ(r.start_skew.max_ps, 60 * kUs);
}

// Clocks +0, +5 ms, -3 ms: host1 starts last at T + 10 us + 5 ms, host2 ends
// first at T + 1010 us - 3 ms: every instance violated by exactly 7 ms.
TEST(ValidateTest, SkewedGlooHostsViolateByTheClockError) {
  const auto hosts = GlooHosts({0, 5'000'000, -3'000'000});
  const auto r = ValidateTraces(Ptrs(hosts), {});
  EXPECT_EQ(r.violations_total, 4);
  ASSERT_EQ(r.violations.size(), 4u);
  for (const auto& v : r.violations) {
    EXPECT_EQ(v.family, "gloo:all_reduce");
    EXPECT_EQ(v.by_ps, 7 * kMs);
    EXPECT_EQ(v.ended_first, "host2");
    EXPECT_EQ(v.started_last, "host1");
    EXPECT_EQ(v.participants, 3);
    EXPECT_FALSE(v.transfer);
    EXPECT_FALSE(v.seq);
  }
  EXPECT_EQ(r.violations[0].started_last_at.ns - r.violations[0].ended_first_at.ns, 7'000'000);
  const auto& gloo = Family(r, "gloo:all_reduce");
  EXPECT_EQ(gloo.violations, 4);
  EXPECT_EQ(gloo.start_skew.max_ps, 7990 * kUs);  // T+5010 us - (T+20 us-3 ms)
  EXPECT_EQ(gloo.end_skew.max_ps, 7995 * kUs);    // T+6005 us - (T+1010 us-3 ms)
  EXPECT_EQ(Family(r, "c10d::allreduce_").violations, 0);
}

TEST(ValidateTest, ToleranceAbsorbsViolationsUpToItsValue) {
  const auto hosts = GlooHosts({0, 5'000'000, -3'000'000});
  ValidateOptions options;
  options.tolerance_ns = 7'000'000;
  auto r = ValidateTraces(Ptrs(hosts), options);
  EXPECT_EQ(r.tolerance_ps, 7 * kMs);
  EXPECT_EQ(r.violations_total, 0);
  options.tolerance_ns = 6'999'999;
  r = ValidateTraces(Ptrs(hosts), options);
  EXPECT_EQ(r.violations_total, 4);
  options.tolerance_ns = -5;  // counts as 0
  EXPECT_EQ(ValidateTraces(Ptrs(hosts), options).tolerance_ps, 0);
}

// Host b's all_reduce starts 1 ps after host a's ended: a violation of 1 ps,
// exact through the ns + ps split.
TEST(ValidateTest, PicosecondViolationIsExact) {
  std::vector<HostTrace> hosts;
  for (int h = 0; h < 2; ++h) {
    hosts.push_back(MakeHost(h ? "b" : "a", 1'800'000'000'000'000'000));
    PlaneBuilder plane = AddPlane(hosts.back(), 1, "CPU functions");
    auto* e = plane.Event(plane.Line(2, "2"), "gloo:all_reduce", 0, 0);
    e->set_offset_ps(h ? 1'000'001 : 0);
    e->set_duration_ps(h ? 5'000 : 1'000'000);
  }
  const auto r = ValidateTraces(Ptrs(hosts), {});
  ASSERT_EQ(r.violations_total, 1);
  EXPECT_EQ(r.violations[0].by_ps, 1);
  EXPECT_EQ(r.violations[0].ended_first, "a");
  EXPECT_EQ(r.violations[0].started_last_at.ps, 1);
}

// Host 2 recorded 3 iterations, the others 4: without a sequence number the
// missing one cannot be named, so nothing of those families is matched.
TEST(ValidateTest, CountsThatDifferLeaveAFamilyUnmatched) {
  std::vector<HostTrace> hosts = GlooHosts({0, 0});
  hosts.push_back(LegacyGlooHost("host2", 2, 0, 3));
  const auto r = ValidateTraces(Ptrs(hosts), {});
  const auto& gloo = Family(r, "gloo:all_reduce");
  EXPECT_EQ(gloo.events, 11);
  EXPECT_EQ(gloo.matched_instances, 0);
  EXPECT_EQ(gloo.unmatched_events, 11);
  EXPECT_TRUE(HasNote(gloo, "counts differ across participants (3..4)"));
  EXPECT_EQ(r.unmatched_events, 22);
  EXPECT_EQ(r.matched_instances, 0);
  EXPECT_EQ(r.violations_total, 0);
}

TEST(ValidateTest, AFamilyOnOneHostOnlyIsUnmatched) {
  std::vector<HostTrace> hosts = GlooHosts({0, 0}, 2);
  PlaneBuilder extra = AddPlane(hosts[0], 2, "CPU functions 2");
  extra.Event(extra.Line(1, "1"), "gloo:broadcast", 0, 10);
  const auto r = ValidateTraces(Ptrs(hosts), {});
  const auto& broadcast = Family(r, "gloo:broadcast");
  EXPECT_EQ(broadcast.events, 1);
  EXPECT_EQ(broadcast.unmatched_events, 1);
  EXPECT_TRUE(HasNote(broadcast, "one participant only"));
  EXPECT_EQ(Family(r, "gloo:all_reduce").matched_instances, 2);
}

// XLA on 2 hosts x 2 GPUs, steps s at S = s ms. GPU g of host h:
//   all-reduce.1 kernel        [S + 100 + 2g + 3h, S + 200 + g] us
//   all-reduce-start.6 kernel  [S + 500 + g + h,   S + 600]     us
// host launch events (skew only): all-reduce.1 [S+50+h, S+60], and the async
// pair all-reduce-start.6 [S+450, S+460] .. all-reduce-done.6 [S+470, S+610].
std::vector<HostTrace> XlaHosts(int64_t host1_offset_ns) {
  std::vector<HostTrace> hosts;
  for (int h = 0; h < 2; ++h) {
    hosts.push_back(MakeHost("host" + std::to_string(h), 1'795'320'926'000'000'000 + (h ? host1_offset_ns : 0)));
    HostTrace& t = hosts.back();
    PlaneBuilder cpu = AddPlane(t, 49, "/host:CPU");
    auto* launch = cpu.Line(100, "pjrt_gpu_0");
    for (int s = 0; s < 2; ++s) {
      const int64_t S = s * 1'000'000;
      for (const auto& [op, from, to] : {std::tuple<const char*, int64_t, int64_t>{"all-reduce.1", 50'000 + 1'000 * h, 60'000},
                                         {"all-reduce-start.6", 450'000, 460'000},
                                         {"all-reduce-done.6", 470'000, 610'000}}) {
        auto* e = cpu.Event(launch, op, S + from, S + to);
        cpu.Str(e, "hlo_op", op);
        cpu.Str(e, "hlo_module", "jit_step");
      }
    }
    for (int g = 0; g < 2; ++g) {
      PlaneBuilder gpu = AddPlane(t, g, "/device:GPU:" + std::to_string(g));
      auto* compute = gpu.Line(13, "Stream #13(Compute)");
      auto* nccl = gpu.Line(14, "Stream #14(Compute,NCCL)");
      for (int s = 0; s < 2; ++s) {
        const int64_t S = s * 1'000'000;
        auto* fusion = gpu.Event(compute, "fusion_1", S + 10'000, S + 90'000);
        gpu.Str(fusion, "hlo_op", "fusion.1");
        auto* ar = gpu.Event(nccl, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", S + 100'000 + 2'000 * g + 3'000 * h,
                             S + 200'000 + 1'000 * g);
        gpu.Str(ar, "hlo_op", "all-reduce.1");
        gpu.Ref(ar, "hlo_module", "jit_step");  // interned, as XLA writes it
        auto* ars = gpu.Event(nccl, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", S + 500'000 + 1'000 * g + 1'000 * h,
                              S + 600'000);
        gpu.Str(ars, "hlo_op", "all-reduce-start.6");
        gpu.Str(ars, "hlo_module", "jit_step");
      }
    }
  }
  return hosts;
}

TEST(ValidateTest, XlaDeviceOpsAreCheckedAndHostLaunchesAreSkewOnly) {
  const auto hosts = XlaHosts(0);
  const auto r = ValidateTraces(Ptrs(hosts), {});
  const auto& xla = Family(r, "xla:all-reduce");
  // Device: 2 hosts x 2 GPUs x 2 ops x 2 steps; host: 2 x 2 steps x (1 + 1 joined pair).
  EXPECT_EQ(xla.events, 24);
  EXPECT_EQ(xla.matched_instances, 8);
  EXPECT_EQ(xla.checked_instances, 4);
  EXPECT_EQ(xla.unmatched_events, 0);
  EXPECT_TRUE(HasNote(xla, "launch or enqueue"));
  EXPECT_EQ(r.violations_total, 0);
  // The NCCL kernels were recognised by hlo_op, so they are XLA ops, not a family of their own.
  EXPECT_TRUE(std::none_of(r.families.begin(), r.families.end(),
                           [](const FamilySummary& f) { return f.family.starts_with("nccl-kernel"); }));
  // Device all-reduce-start.6 kernels have no -done on the GPU: own span, counted.
  EXPECT_EQ(r.skipped.unpaired_starts, 8);
  EXPECT_EQ(r.skipped.unpaired_dones, 0);
  // Skews (us): all-reduce.1 starts 100..105, ends 200..201; start.6 starts
  // 500..502, ends 600; host all-reduce.1 starts 50..51, ends 60; the joined
  // host pair 450..610 on both.
  EXPECT_EQ(xla.start_skew.max_ps, 5 * kUs);
  EXPECT_EQ(xla.end_skew.max_ps, 1 * kUs);
  EXPECT_EQ(r.end_skew.count, 8);
  EXPECT_EQ(r.end_skew.p50_ps, 0);  // start.6 kernels and both host keys end together
}

// host1's clock +1 ms: all-reduce.1: host1 GPU1 starts S+1105 us, host0 GPU0
// ends S+200 us: 905 us; all-reduce-start.6: S+1502 vs S+600: 902 us.
TEST(ValidateTest, XlaSkewedHostViolatesOnDeviceParticipants) {
  const auto hosts = XlaHosts(1'000'000);
  const auto r = ValidateTraces(Ptrs(hosts), {});
  ASSERT_EQ(r.violations_total, 4);
  EXPECT_EQ(r.violations[0].by_ps, 905 * kUs);
  EXPECT_EQ(r.violations[1].by_ps, 905 * kUs);
  EXPECT_EQ(r.violations[2].by_ps, 902 * kUs);
  EXPECT_EQ(r.violations[3].by_ps, 902 * kUs);
  EXPECT_EQ(r.violations[0].ended_first, "host0 /device:GPU:0");
  EXPECT_EQ(r.violations[0].started_last, "host1 /device:GPU:1");
  EXPECT_EQ(r.violations[0].participants, 4);
  EXPECT_EQ(r.violations[0].key, "xla:all-reduce group=jit_step op=all-reduce.1 [device]");
  EXPECT_EQ(r.violations[2].key, "xla:all-reduce group=jit_step op=all-reduce-start.6 [device]");
}

// An "XLA Ops"-like device line with both halves as event names. Host a:
// start.1 [0,10] start.2 [20,30] done.2 [40,50] done.1 [60,600]; host b:
// start.1 [0,10] start.2 [20,30] done.1 [40,100] done.2 [110,120] (ns).
// Joined by suffix: .1 = a [0,600] b [0,100], .2 = a [20,50] b [20,120]:
// end skews 500 and 70 ns (FIFO pairing would give 50 and 480).
TEST(ValidateTest, AsyncHalvesJoinByTheirSuffix) {
  std::vector<HostTrace> hosts;
  for (int h = 0; h < 2; ++h) {
    hosts.push_back(MakeHost(h ? "b" : "a", 1'000'000'000'000'000'000));
    PlaneBuilder gpu = AddPlane(hosts.back(), 0, "/device:GPU:0");
    auto* ops = gpu.Line(1, "XLA Ops");
    gpu.Event(ops, "all-gather-start.1", 0, 10);
    gpu.Event(ops, "all-gather-start.2", 20, 30);
    if (h == 0) {
      gpu.Event(ops, "all-gather-done.2", 40, 50);
      gpu.Event(ops, "all-gather-done.1", 60, 600);
    } else {
      gpu.Event(ops, "all-gather-done.1", 40, 100);
      gpu.Event(ops, "all-gather-done.2", 110, 120);
      gpu.Event(ops, "all-gather-done.9", 130, 140);  // no start: skipped
    }
  }
  const auto r = ValidateTraces(Ptrs(hosts), {});
  const auto& ag = Family(r, "xla:all-gather");
  EXPECT_EQ(ag.events, 4);
  EXPECT_EQ(ag.matched_instances, 2);
  EXPECT_EQ(ag.checked_instances, 2);
  EXPECT_EQ(ag.end_skew.p50_ps, 70'000);
  EXPECT_EQ(ag.end_skew.max_ps, 500'000);
  EXPECT_EQ(r.skipped.unpaired_dones, 1);
  EXPECT_EQ(r.skipped.unpaired_starts, 0);
  EXPECT_EQ(r.violations_total, 0);
}

// NCCL kernels with no hlo_op (an XProf GPU plane of a PyTorch job): the k-th
// AllReduce kernel matches across hosts. Host h, instance k at k ms:
// [k ms + 2h us, k ms + 50 us]; host 1's clock -100 us: it ends at k ms - 50 us,
// before host 0 started at k ms: 50 us each.
TEST(ValidateTest, NcclKernelsMatchInOrderAndSendRecvKernelsAreSkipped) {
  std::vector<HostTrace> hosts;
  for (int h = 0; h < 2; ++h) {
    hosts.push_back(MakeHost("n" + std::to_string(h), 1'000'000'000'000'000'000 - (h ? 100'000 : 0)));
    PlaneBuilder gpu = AddPlane(hosts.back(), 0, "/device:GPU:0");
    auto* stream = gpu.Line(7, "Stream #7");
    for (int k = 0; k < 3; ++k) {
      const int64_t at = k * 1'000'000;
      gpu.Event(stream, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", at + 2'000 * h, at + 50'000);
      gpu.Event(stream, "ncclDevKernel_SendRecv", at + 60'000, at + 70'000);
    }
  }
  const auto r = ValidateTraces(Ptrs(hosts), {});
  const auto& ar = Family(r, "nccl-kernel:AllReduce");
  EXPECT_EQ(ar.matched_instances, 3);
  EXPECT_EQ(ar.checked_instances, 3);
  EXPECT_EQ(ar.violations, 3);
  ASSERT_EQ(r.violations_total, 3);
  EXPECT_EQ(r.violations[0].by_ps, 50 * kUs);
  EXPECT_EQ(r.violations[0].ended_first, "n1 /device:GPU:0");
  const auto& sr = Family(r, "nccl-kernel:SendRecv");
  EXPECT_EQ(sr.events, 6);
  EXPECT_EQ(sr.unmatched_events, 6);
  EXPECT_TRUE(HasNote(sr, "direction not in the name"));
}

// Kineto: GPU kernels and record_param_comms carry "Process Group Name" and
// "Seq". Host a saw seqs 1..3, host b 2..3 (its profile began later): seq 1
// is unmatched, 2 and 3 match whatever the order of events.
TEST(ValidateTest, KinetoSequenceNumbersMatchAcrossPartialProfiles) {
  std::vector<HostTrace> hosts;
  for (int h = 0; h < 2; ++h) {
    hosts.push_back(MakeHost(h ? "b" : "a", 1'000'000'000'000'000'000));
    HostTrace& t = hosts.back();
    t.source_format = TraceFormat::kChromeJson;
    PlaneBuilder cpu = AddPlane(t, 1234, "python3");
    // Kineto's GPU process on a plane the importer may name "GPU 0"; host b's
    // is unnamed and known as a device by its events' category.
    PlaneBuilder gpu = AddPlane(t, 0, h ? "pid 0" : "GPU 0");
    auto* thread = cpu.Line(1, "thread 1");
    auto* stream = gpu.Line(7, "stream 7");
    for (int seq = (h ? 2 : 1); seq <= 3; ++seq) {
      const int64_t at = seq * 1'000'000;
      auto* rpc = cpu.Event(thread, "record_param_comms", at, at + 5'000);
      cpu.Str(rpc, "Collective name", "allreduce");
      cpu.Str(rpc, "Process Group Name", "0");
      cpu.Int(rpc, "Seq", seq);
      auto* wait = cpu.Event(thread, "record_param_comms", at + 6'000, at + 7'000);
      cpu.Str(wait, "Collective name", "wait");
      cpu.Int(wait, "Seq", seq);
      auto* k = gpu.Event(stream, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", at + 10'000, at + 90'000);
      gpu.Str(k, "Process Group Name", "0");
      gpu.Str(k, "Seq", std::to_string(seq));  // a number written as a string
      gpu.Str(k, "chrome.cat", "kernel");
    }
  }
  const auto r = ValidateTraces(Ptrs(hosts), {});
  const auto& rpc = Family(r, "record_param_comms:allreduce");
  EXPECT_EQ(rpc.events, 5);  // "wait" is not a collective
  EXPECT_EQ(rpc.matched_instances, 2);
  EXPECT_EQ(rpc.unmatched_events, 1);
  EXPECT_EQ(rpc.checked_instances, 0);
  EXPECT_TRUE(HasNote(rpc, "sequence numbers seen on only some participants"));
  const auto& kernel = Family(r, "nccl-kernel:AllReduce");
  EXPECT_EQ(kernel.matched_instances, 2);
  EXPECT_EQ(kernel.checked_instances, 2);
  EXPECT_EQ(kernel.unmatched_events, 1);
  EXPECT_EQ(r.violations_total, 0);
}

// gloo:send/recv with Kineto's peer args. Host a is rank 0 (plane stat
// `rank`), host b rank 1 (a `distributedInfo` JSON stat). a sends to b at
// [1000, 1010] us; b receives [900, 1200] us. b's clock -500 us: the receive
// ends at 700 us, 300 us before the send started.
std::vector<HostTrace> SendRecvHosts(int64_t b_offset_ns) {
  std::vector<HostTrace> hosts;
  hosts.push_back(MakeHost("a", 1'000'000'000'000'000'000));
  hosts.push_back(MakeHost("b", 1'000'000'000'000'000'000 + b_offset_ns));
  PlaneBuilder a = AddPlane(hosts[0], 1, "CPU functions");
  a.PlaneInt("rank", 0);
  PlaneBuilder b = AddPlane(hosts[1], 1, "CPU functions");
  b.PlaneStr("distributedInfo", R"({"backend": "gloo", "rank": 1, "world_size": 2})");
  auto* send = a.Event(a.Line(1, "1"), "gloo:send", 1'000'000, 1'010'000);
  a.Int(send, "Dst Rank", 1);
  auto* recv = b.Event(b.Line(1, "1"), "gloo:recv", 900'000, 1'200'000);
  b.Int(recv, "Src Rank", 0);
  // A send with no peer in the trace, and an XLA send/recv pair (XLA names no peer).
  a.Event(a.Line(2, "2"), "gloo:send", 2'000'000, 2'001'000);
  auto* b2 = b.Line(2, "2");
  b.Event(b2, "send.3", 3'000'000, 3'001'000);
  b.Event(b2, "send-done.3", 3'002'000, 3'003'000);
  return hosts;
}

TEST(ValidateTest, ReceiveBeforeItsSendIsAViolation) {
  const auto aligned = SendRecvHosts(0);
  auto r = ValidateTraces(Ptrs(aligned), {});
  EXPECT_EQ(r.violations_total, 0);
  EXPECT_EQ(Family(r, "gloo:send").matched_instances, 1);
  EXPECT_EQ(Family(r, "gloo:recv").checked_instances, 1);

  const auto skewed = SendRecvHosts(-500'000);
  r = ValidateTraces(Ptrs(skewed), {});
  ASSERT_EQ(r.violations_total, 1);
  const Violation& v = r.violations[0];
  EXPECT_TRUE(v.transfer);
  EXPECT_EQ(v.by_ps, 300 * kUs);
  EXPECT_EQ(v.ended_first, "b");
  EXPECT_EQ(v.started_last, "a");
  EXPECT_EQ(v.key, "gloo:send -> gloo:recv [host] rank 0 -> rank 1");

  const auto& send = Family(r, "gloo:send");
  EXPECT_EQ(send.events, 2);
  EXPECT_EQ(send.unmatched_events, 1);
  EXPECT_TRUE(HasNote(send, "no peer rank in the trace"));
  const auto& xla_send = Family(r, "xla:send");
  EXPECT_EQ(xla_send.events, 1);  // the two halves joined
  EXPECT_EQ(xla_send.unmatched_events, 1);
}

// The tolerance bounds transfers as it does collectives: a receive that ends
// exactly the tolerance (300 us) before its send started is not reported;
// the send starting 1 ps later makes it a violation of 300 us + 1 ps.
TEST(ValidateTest, TransferToleranceAbsorbsExactlyItsValue) {
  ValidateOptions options;
  options.tolerance_ns = 300'000;
  auto hosts = SendRecvHosts(-500'000);
  auto r = ValidateTraces(Ptrs(hosts), options);
  EXPECT_EQ(Family(r, "gloo:recv").checked_instances, 1);
  EXPECT_EQ(r.violations_total, 0);

  // Host a's first plane, first line, first event: the gloo:send to rank 1.
  auto* send = hosts[0].space->mutable_planes(0)->mutable_lines(0)->mutable_events(0);
  send->set_offset_ps(send->offset_ps() + 1);
  send->set_duration_ps(send->duration_ps() - 1);
  r = ValidateTraces(Ptrs(hosts), options);
  ASSERT_EQ(r.violations_total, 1);
  EXPECT_TRUE(r.violations[0].transfer);
  EXPECT_EQ(r.violations[0].by_ps, 300 * kUs + 1);
  EXPECT_EQ(r.violations[0].started_last, "a");
}

// Kineto copies "Collective name" and the peer onto the NCCL kernel, so a
// SendRecv kernel is a checkable transfer half on the device. Ranks from
// `distributedInfo` on the importer's `chrome.top_level` plane. a (rank 0)
// sends [100, 200] us, b (rank 1) receives [150, 300] us; b's clock
// -250 us: the receive ends at 50 us, 50 us before the send started.
TEST(ValidateTest, KinetoSendRecvKernelsAreTransfersOnTheDevice) {
  std::vector<HostTrace> hosts;
  for (int h = 0; h < 2; ++h) {
    hosts.push_back(MakeHost(h ? "b" : "a", 1'000'000'000'000'000'000 - (h ? 250'000 : 0)));
    PlaneBuilder top = AddPlane(hosts.back(), 100, "chrome.top_level");
    top.PlaneStr("distributedInfo", h ? R"({"backend": "nccl", "rank": 1, "world_size": 2})"
                                      : R"({"backend": "nccl", "rank": 0, "world_size": 2})");
    PlaneBuilder gpu = AddPlane(hosts.back(), 0, "GPU 0");
    auto* stream = gpu.Line(7, "stream 7");
    auto* k = gpu.Event(stream, "ncclDevKernel_SendRecv", h ? 150'000 : 100'000, h ? 300'000 : 200'000);
    gpu.Str(k, "Collective name", h ? "recv" : "send");
    gpu.Int(k, h ? "Src Rank" : "Dst Rank", h ? 0 : 1);
    gpu.Str(k, "Process Group Name", "0");
    gpu.Event(stream, "ncclDevKernel_SendRecv", 400'000, 500'000);  // no args: direction unknown
  }
  const auto r = ValidateTraces(Ptrs(hosts), {});
  ASSERT_EQ(r.violations_total, 1);
  EXPECT_TRUE(r.violations[0].transfer);
  EXPECT_EQ(r.violations[0].by_ps, 50 * kUs);
  EXPECT_EQ(r.violations[0].ended_first, "b GPU 0");
  EXPECT_EQ(r.violations[0].key,
            "nccl-kernel:SendRecv(send) -> nccl-kernel:SendRecv(recv) [device] group=0 rank 0 -> rank 1");
  EXPECT_EQ(Family(r, "nccl-kernel:SendRecv(send)").checked_instances, 1);
  EXPECT_EQ(Family(r, "nccl-kernel:SendRecv(recv)").dependency, Dependency::kRecv);
  const auto& unknown = Family(r, "nccl-kernel:SendRecv");
  EXPECT_EQ(unknown.events, 2);
  EXPECT_TRUE(HasNote(unknown, "direction not in the name"));
}

// An interned string value that reads like a key (the Chrome importer keeps
// interned strings as stat metadata described "chrome:ref") is not that key.
TEST(ValidateTest, InternedStringsAreNotStatKeys) {
  std::vector<HostTrace> hosts = GlooHosts({0, 0}, 2);
  {
    auto* plane = hosts[0].space->mutable_planes(0);
    auto& interned = (*plane->mutable_stat_metadata())[999];
    interned.set_id(999);
    interned.set_name("Seq");
    interned.set_description("chrome:ref");
    auto* e = plane->mutable_lines(1)->mutable_events(0);  // a gloo:all_reduce
    auto* stat = e->add_stats();
    stat->set_metadata_id(999);
    stat->set_int64_value(7);
  }
  const auto r = ValidateTraces(Ptrs(hosts), {});
  // Read as a key, host0's first all_reduce would carry seq 7 and host1's
  // none: nothing would match.
  EXPECT_EQ(Family(r, "gloo:all_reduce").matched_instances, 2);
}

TEST(ValidateTest, RanksFromOptionsOverrideAndFillWhatTheTraceLacks) {
  auto hosts = SendRecvHosts(-500'000);
  // Without any rank for b, its receive cannot be put on a channel.
  hosts[1].space->mutable_planes(0)->clear_stats();
  auto r = ValidateTraces(Ptrs(hosts), {});
  EXPECT_EQ(r.violations_total, 0);
  EXPECT_TRUE(HasNote(Family(r, "gloo:recv"), "own rank is unknown"));
  ValidateOptions options;
  options.ranks = {std::nullopt, 1};
  r = ValidateTraces(Ptrs(hosts), options);
  EXPECT_EQ(r.violations_total, 1);
}

TEST(ValidateTest, OverflowingInstantsAreSkippedAndUnknownOriginsWarned) {
  std::vector<HostTrace> hosts = GlooHosts({0, 0}, 1);
  PlaneBuilder plane = AddPlane(hosts[0], 9, "CPU functions 9");
  auto* line = plane.Line(1, "1", std::numeric_limits<int64_t>::max() - 10);
  plane.Event(line, "gloo:barrier", 0, 1);
  hosts[1].line_base_known = false;
  const auto r = ValidateTraces(Ptrs(hosts), {});
  EXPECT_EQ(r.skipped.bad_time, 1);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("host1"), std::string::npos);
  EXPECT_EQ(Family(r, "gloo:all_reduce").matched_instances, 1);
}

TEST(ValidateTest, NothingToValidateIsAnEmptyResult) {
  const auto r = ValidateTraces({}, {});
  EXPECT_EQ(r.events, 0);
  EXPECT_EQ(r.violations_total, 0);
  EXPECT_EQ(r.start_skew.count, 0);
  std::vector<HostTrace> quiet;
  quiet.push_back(MakeHost("q"));
  AddPlane(quiet[0], 1, "/host:CPU").Line(1, "main");
  EXPECT_TRUE(ValidateTraces(Ptrs(quiet), {}).families.empty());
}

TEST(ValidateTest, SameHostNameTwiceIsToldApart) {
  std::vector<HostTrace> hosts = GlooHosts({0, 0}, 1);
  hosts[1].host = "host0";
  const auto r = ValidateTraces(Ptrs(hosts), {});
  EXPECT_EQ(r.hosts, (std::vector<std::string>{"host0 [0]", "host0 [1]"}));
  EXPECT_EQ(Family(r, "gloo:all_reduce").matched_instances, 1);
}

}  // namespace
}  // namespace chronolink::trace
