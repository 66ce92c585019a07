#include "agent/pair/tuple_assembler.h"

#include <gtest/gtest.h>

#include <vector>

namespace chronolink {
namespace {

DualStamp Kernel(int64_t k, int64_t u) {
  return DualStamp{{k, StampSource::kSocketSoftware}, {u, StampSource::kUserspace}};
}
// A stamp as decoded from a peer's packet: on the peer's clock.
DualStamp Peer(int64_t k, int64_t u) {
  DualStamp d = Kernel(k, u);
  d.kernel.domain = d.user.domain = ClockDomain::kPeerRealtime;
  return d;
}

void FillComplete(TupleAssembler& a, uint64_t seq, int64_t base) {
  a.OnForwardSent(seq, 0, base);
  a.OnForwardSent(seq, 1, base + 100'000);
  a.OnForwardTxStamp(seq, 0, {base + 2'000, StampSource::kSocketSched});
  a.OnForwardTxStamp(seq, 0, {base + 2'500, StampSource::kSocketSoftware});
  a.OnForwardTxStamp(seq, 1, {base + 102'500, StampSource::kSocketSoftware});
  const DualStamp echo[2] = {Peer(base + 10'000, base + 15'000),
                             Peer(base + 110'000, base + 115'000)};
  a.OnEchoedRx(seq, echo);
  a.OnReverseRx(seq, 0, Kernel(base + 30'000, base + 35'000));
  a.OnReverseRx(seq, 1, Kernel(base + 130'000, base + 135'000));
  const DualStamp rtx[2] = {Peer(base + 20'000, base + 18'000),
                            Peer(base + 120'000, base + 118'000)};
  a.OnReverseTx(seq, rtx);
}

TEST(TupleAssembler, CompletesATupleFromItsPieces) {
  TupleAssembler a(16);
  FillComplete(a, 1, 1'000'000);
  std::vector<FullTuple> out;
  a.Finalize([](const FullTuple& t) { return ClassifyTuple(t) == TupleOutcome::kComplete; },
             [&](const FullTuple& t) { out.push_back(t); });
  ASSERT_EQ(out.size(), 1u);
  PtPrTuple k;
  ASSERT_TRUE(out[0].Project(SourceClass::kKernel, &k));
  // The software stamp replaced the earlier sched stamp.
  EXPECT_EQ(k.fwd_tx[0].ns, 1'002'500);
  EXPECT_EQ(k.fwd_tx[0].source, StampSource::kSocketSoftware);
  PtPrTuple u;
  ASSERT_TRUE(out[0].Project(SourceClass::kUserspace, &u));
  EXPECT_EQ(u.fwd_tx[0].ns, 1'000'000);
  EXPECT_EQ(u.rev_rx[1].ns, 1'135'000);
  EXPECT_EQ(a.pending(), 0u);
}

TEST(TupleAssembler, ClassifiesLossAndMissingTxStamps) {
  TupleAssembler a(16);
  FillComplete(a, 1, 0);
  // seq 2: reverse probe 1 never arrives.
  a.OnForwardSent(2, 0, 1'000'000);
  a.OnForwardSent(2, 1, 1'100'000);
  const DualStamp echo[2] = {Peer(1, 1), Peer(2, 2)};
  a.OnEchoedRx(2, echo);
  a.OnReverseRx(2, 0, Kernel(3, 3));
  // seq 3: everything arrived but our TX stamps never came back.
  a.OnForwardSent(3, 0, 2'000'000);
  a.OnForwardSent(3, 1, 2'100'000);
  a.OnEchoedRx(3, echo);
  a.OnReverseRx(3, 0, Kernel(3, 3));
  a.OnReverseRx(3, 1, Kernel(4, 4));
  const DualStamp rtx[2] = {Peer(5, 5), Peer(6, 6)};
  a.OnReverseTx(3, rtx);

  std::vector<TupleOutcome> outcomes;
  a.Finalize([](const FullTuple&) { return true; },
             [&](const FullTuple& t) { outcomes.push_back(ClassifyTuple(t)); });
  ASSERT_EQ(outcomes.size(), 3u);
  EXPECT_EQ(outcomes[0], TupleOutcome::kComplete);
  EXPECT_EQ(outcomes[1], TupleOutcome::kLost);
  EXPECT_EQ(outcomes[2], TupleOutcome::kTxMissing);
}

TEST(TupleAssembler, BoundsMemoryAndCountsUnmatchedStamps) {
  TupleAssembler a(4);
  for (uint64_t s = 1; s <= 10; ++s) a.OnForwardSent(s, 0, static_cast<int64_t>(s) * 1000);
  std::vector<uint64_t> evicted;
  a.Finalize([](const FullTuple&) { return false; },
             [&](const FullTuple& t) { evicted.push_back(t.seq); });
  EXPECT_EQ(a.pending(), 4u);
  EXPECT_EQ(evicted, (std::vector<uint64_t>{1, 2, 3, 4, 5, 6}));
  a.OnForwardTxStamp(2, 0, {5, StampSource::kSocketSoftware});  // already gone
  a.OnReverseRx(99, 0, Kernel(1, 1));                           // never sent
  EXPECT_EQ(a.unmatched(), 2u);
}

TEST(TupleAssembler, FinalizeStopsAtTheFirstTupleNotDone) {
  TupleAssembler a(16);
  FillComplete(a, 1, 0);
  a.OnForwardSent(2, 0, 1'000'000);  // incomplete
  FillComplete(a, 3, 2'000'000);
  int handed = 0;
  a.Finalize([](const FullTuple& t) { return ClassifyTuple(t) == TupleOutcome::kComplete; },
             [&](const FullTuple&) { ++handed; });
  EXPECT_EQ(handed, 1);
  EXPECT_EQ(a.pending(), 2u);
}

TEST(TupleAssembler, RefusesStampsOnTheWrongClock) {
  TupleAssembler a(16);
  a.OnForwardSent(1, 0, 0);
  const DualStamp ours[2] = {Kernel(1, 1), Kernel(2, 2)};
  a.OnEchoedRx(1, ours);                 // echoes must be the peer's
  a.OnReverseTx(1, ours);
  a.OnReverseRx(1, 0, Peer(3, 3));       // our receive stamps must be ours
  ProbeStamp theirs{5, StampSource::kSocketSoftware, ClockDomain::kPeerRealtime};
  a.OnForwardTxStamp(1, 0, theirs);
  EXPECT_EQ(a.wrong_domain(), 4u);
  std::vector<FullTuple> out;
  a.Finalize([](const FullTuple&) { return true; }, [&](const FullTuple& t) { out.push_back(t); });
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(out[0].fwd_rx[0].kernel.present());
  EXPECT_FALSE(out[0].rev_rx[0].kernel.present());
  EXPECT_FALSE(out[0].fwd_tx[0].kernel.present());
}

// A tuple with a packet seen twice: whole in every stamp, yet it projects
// onto no class and classifies as lost, so no estimate ever sees it; a
// second receipt of a reverse probe spoils its tuple by itself.
TEST(TupleAssembler, ASpoiledTupleNeverProjects) {
  TupleAssembler a(16);
  FillComplete(a, 1, 0);
  FillComplete(a, 2, 1'000'000);
  FillComplete(a, 3, 2'000'000);
  a.Spoil(1);
  a.Spoil(1);  // counted once
  EXPECT_FALSE(a.OnReverseRx(2, 1, Kernel(1'131'000, 1'136'000))) << "a copy of reverse probe 1";
  a.Spoil(99);  // gone or never sent: nothing
  EXPECT_EQ(a.spoiled(), 2u);
  std::vector<FullTuple> out;
  a.Finalize([](const FullTuple&) { return true; }, [&](const FullTuple& t) { out.push_back(t); });
  ASSERT_EQ(out.size(), 3u);
  PtPrTuple p;
  for (int i : {0, 1}) {
    EXPECT_TRUE(out[i].spoiled);
    EXPECT_EQ(ClassifyTuple(out[i]), TupleOutcome::kLost);
    EXPECT_FALSE(out[i].Project(SourceClass::kKernel, &p));
    EXPECT_FALSE(out[i].Project(SourceClass::kUserspace, &p));
  }
  // The first copy's stamps were not replaced by the second's.
  EXPECT_EQ(out[1].rev_rx[1].kernel.ns, 1'130'000);
  EXPECT_EQ(ClassifyTuple(out[2]), TupleOutcome::kComplete);
  EXPECT_TRUE(out[2].Project(SourceClass::kKernel, &p));
}

}  // namespace
}  // namespace chronolink
