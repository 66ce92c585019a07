// The name rules that decide what validate treats as a collective, its
// family, op identity and happens-before guarantee (docs/validate.md).
#include "trace/validate/collective_names.h"

#include <gtest/gtest.h>

namespace chronolink::trace {
namespace {

TEST(CollectiveNamesTest, XlaOpcodesWithSuffixesAndAsyncHalves) {
  const auto whole = ClassifyXlaOpName("all-reduce.17");
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->family, "xla:all-reduce");
  EXPECT_EQ(whole->op, "all-reduce.17");
  EXPECT_EQ(whole->suffix, ".17");
  EXPECT_EQ(whole->phase, AsyncPhase::kWhole);
  EXPECT_EQ(whole->dependency, Dependency::kAllRanks);

  const auto start = ClassifyXlaOpName("all-gather-start.2");
  ASSERT_TRUE(start);
  EXPECT_EQ(start->family, "xla:all-gather");
  EXPECT_EQ(start->phase, AsyncPhase::kStart);
  const auto done = ClassifyXlaOpName("all-gather-done");
  ASSERT_TRUE(done);
  EXPECT_EQ(done->phase, AsyncPhase::kDone);
  EXPECT_EQ(done->suffix, "");

  EXPECT_EQ(ClassifyXlaOpName("reduce-scatter.3")->dependency, Dependency::kAllRanks);
  EXPECT_EQ(ClassifyXlaOpName("all-to-all.5")->dependency, Dependency::kAllRanks);
  EXPECT_EQ(ClassifyXlaOpName("collective-permute-start.4")->dependency, Dependency::kNeighbour);
  EXPECT_EQ(ClassifyXlaOpName("ragged-all-to-all.1")->dependency, Dependency::kNeighbour);
  EXPECT_EQ(ClassifyXlaOpName("collective-broadcast")->dependency, Dependency::kRooted);
}

TEST(CollectiveNamesTest, XlaSendAndRecvAreAsyncHalvesWithoutStartSuffix) {
  const auto send = ClassifyXlaOpName("send.1");
  ASSERT_TRUE(send);
  EXPECT_EQ(send->dependency, Dependency::kSend);
  EXPECT_EQ(send->phase, AsyncPhase::kStart);
  const auto recv_done = ClassifyXlaOpName("recv-done.3");
  ASSERT_TRUE(recv_done);
  EXPECT_EQ(recv_done->dependency, Dependency::kRecv);
  EXPECT_EQ(recv_done->phase, AsyncPhase::kDone);
  EXPECT_FALSE(ClassifyXlaOpName("send-start.1"));
}

TEST(CollectiveNamesTest, XlaLookalikesAreNotCollectives) {
  for (const char* name : {"fusion.3", "all-reduce-fusion.1", "all-reduce.x", "all-reduce-start-done",
                           "all-reduce.", "xall-reduce", "all-reduce.17.2a", ""}) {
    EXPECT_FALSE(ClassifyXlaOpName(name)) << name;
  }
}

TEST(CollectiveNamesTest, NcclKernelsAcrossNamingGenerations) {
  const auto dev = ClassifyNcclKernelName("ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  ASSERT_TRUE(dev);
  EXPECT_EQ(dev->family, "nccl-kernel:AllReduce");
  EXPECT_EQ(dev->op, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  EXPECT_EQ(dev->dependency, Dependency::kAllRanks);
  EXPECT_EQ(dev->producer, Producer::kNcclKernel);

  const auto old = ClassifyNcclKernelName("void ncclKernel_AllGather_RING_LL_Sum_float(ncclWorkElem)");
  ASSERT_TRUE(old);
  EXPECT_EQ(old->family, "nccl-kernel:AllGather");
  EXPECT_EQ(old->op, "ncclKernel_AllGather_RING_LL_Sum_float");

  EXPECT_EQ(ClassifyNcclKernelName("ncclDevKernel_Broadcast_RING_LL")->dependency, Dependency::kRooted);
  EXPECT_EQ(ClassifyNcclKernelName("ncclDevKernel_Reduce_Sum_f32_RING_LL")->dependency, Dependency::kRooted);
  EXPECT_EQ(ClassifyNcclKernelName("ncclDevKernel_SendRecv")->dependency, Dependency::kPointToPoint);
  EXPECT_EQ(ClassifyNcclKernelName("ncclDevKernel_Generic_4")->dependency, Dependency::kUnknown);
  EXPECT_FALSE(ClassifyNcclKernelName("ncclGroupEnd"));
  EXPECT_FALSE(ClassifyNcclKernelName("ncclKernel_"));
}

TEST(CollectiveNamesTest, PyTorchRecordFunctions) {
  const auto c10d = ClassifyTorchName("c10d::allreduce_");
  ASSERT_TRUE(c10d);
  EXPECT_EQ(c10d->family, "c10d::allreduce_");
  EXPECT_EQ(c10d->producer, Producer::kC10d);
  EXPECT_EQ(c10d->dependency, Dependency::kAllRanks);

  EXPECT_EQ(ClassifyTorchName("c10d::_allgather_base_")->dependency, Dependency::kAllRanks);
  EXPECT_EQ(ClassifyTorchName("c10d::_reduce_scatter_base_")->dependency, Dependency::kAllRanks);
  EXPECT_EQ(ClassifyTorchName("c10d::reduce_")->dependency, Dependency::kRooted);
  EXPECT_EQ(ClassifyTorchName("c10d::monitored_barrier_")->dependency, Dependency::kRooted);
  EXPECT_EQ(ClassifyTorchName("c10d::recv_any_source_")->dependency, Dependency::kRecv);
  EXPECT_EQ(ClassifyTorchName("c10d::send")->dependency, Dependency::kSend);

  const auto gloo = ClassifyTorchName("gloo:all_reduce");
  ASSERT_TRUE(gloo);
  EXPECT_EQ(gloo->producer, Producer::kGloo);
  EXPECT_EQ(gloo->dependency, Dependency::kAllRanks);
  EXPECT_EQ(ClassifyTorchName("gloo:barrier")->dependency, Dependency::kAllRanks);
  EXPECT_EQ(ClassifyTorchName("gloo:broadcast")->dependency, Dependency::kRooted);
  EXPECT_EQ(ClassifyTorchName("gloo:recv")->dependency, Dependency::kRecv);
  EXPECT_EQ(ClassifyTorchName("nccl:all_reduce")->producer, Producer::kTorchNccl);

  EXPECT_FALSE(ClassifyTorchName("gloo:"));
  EXPECT_FALSE(ClassifyTorchName("aten::add"));
  EXPECT_FALSE(ClassifyEventName("cudaLaunchKernel"));
}

TEST(CollectiveNamesTest, RecordParamCommsByItsCollectiveNameArg) {
  const auto ar = ClassifyParamComms("allreduce");
  ASSERT_TRUE(ar);
  EXPECT_EQ(ar->family, "record_param_comms:allreduce");
  EXPECT_EQ(ar->producer, Producer::kParamComms);
  EXPECT_EQ(ar->dependency, Dependency::kAllRanks);
  // Kineto's metadata values arrive JSON-quoted from some producers.
  const auto ag = ClassifyParamComms("\"_allgather_base\"");
  ASSERT_TRUE(ag);
  EXPECT_EQ(ag->family, "record_param_comms:_allgather_base");
  EXPECT_EQ(ClassifyParamComms("recv")->dependency, Dependency::kRecv);
  EXPECT_FALSE(ClassifyParamComms("wait"));
  EXPECT_FALSE(ClassifyParamComms("init"));
  const auto unnamed = ClassifyParamComms("");
  ASSERT_TRUE(unnamed);
  EXPECT_EQ(unnamed->family, "record_param_comms");
  EXPECT_EQ(unnamed->dependency, Dependency::kUnknown);
}

TEST(CollectiveNamesTest, WhichSpansCoverTheRendezvous) {
  EXPECT_TRUE(SpanCoversRendezvous(Producer::kXla, /*on_device=*/true, /*trace_has_device_planes=*/true));
  EXPECT_FALSE(SpanCoversRendezvous(Producer::kXla, false, true));  // the launch
  EXPECT_TRUE(SpanCoversRendezvous(Producer::kXla, false, false));  // a CPU-only program
  EXPECT_TRUE(SpanCoversRendezvous(Producer::kNcclKernel, true, true));
  EXPECT_TRUE(SpanCoversRendezvous(Producer::kGloo, false, false));
  EXPECT_FALSE(SpanCoversRendezvous(Producer::kTorchNccl, false, true));
  EXPECT_TRUE(SpanCoversRendezvous(Producer::kTorchNccl, true, true));  // Kineto gpu_user_annotation
  EXPECT_FALSE(SpanCoversRendezvous(Producer::kParamComms, false, true));
  EXPECT_FALSE(SpanCoversRendezvous(Producer::kC10d, false, false));
}

}  // namespace
}  // namespace chronolink::trace
