// The CUDA backend's pure parts, without a GPU: the bounded CUPTI buffer
// pool, and (where the test sees the toolkit's cupti.h) CUPTI activity
// records built in memory -> GpuActivity fields, and the API version check.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "collector/device/cuda/cupti_buffer_pool.h"

#if __has_include(<cupti.h>)
#include "collector/device/cuda/cupti_api.h"
#include "collector/device/cuda/cupti_records.h"
#define CHRONOLINK_TEST_SEES_CUPTI 1
#endif

namespace chronolink::collector {
namespace {

TEST(CuptiBufferPool, HandsOutAtMostCountBuffersThenRefusesAndCounts) {
  CuptiBufferPool pool;
  pool.Configure(2, 1001);
  size_t size_a = 0, size_b = 0, size_c = 1;
  uint8_t* a = pool.Take(&size_a);
  uint8_t* b = pool.Take(&size_b);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  EXPECT_EQ(size_a, 1008u);  // rounded up to 8-byte records
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 8, 0u);
  EXPECT_EQ(pool.Take(&size_c), nullptr);
  EXPECT_EQ(size_c, 0u);
  EXPECT_EQ(pool.refused(), 1u);
  pool.Give(a);
  pool.Give(a);  // twice: ignored
  uint8_t foreign[16];
  pool.Give(foreign);  // not ours: ignored
  EXPECT_EQ(pool.Take(&size_c), a);
  EXPECT_EQ(size_c, 1008u);
  EXPECT_EQ(pool.Take(&size_c), nullptr);
  EXPECT_EQ(pool.allocated(), 2u);
}

TEST(CuptiBufferPool, ConfigureOnlyRaisesTheLimits) {
  CuptiBufferPool pool;
  pool.Configure(1, 4096);
  pool.Configure(0, 16);  // a later, smaller request does not shrink it
  size_t size = 0;
  ASSERT_NE(pool.Take(&size), nullptr);
  EXPECT_EQ(size, 4096u);
}

#ifdef CHRONOLINK_TEST_SEES_CUPTI

TEST(CuptiRecords, KernelRecordKeepsTimesIdsNameAndDetails) {
  CUpti_ActivityKernel10 k;
  std::memset(&k, 0, sizeof(k));
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = 1'700'000'000'000'000'100;
  k.end = 1'700'000'000'000'050'100;
  k.deviceId = 1;
  k.streamId = 7;
  k.correlationId = 42;
  k.registersPerThread = 32;
  k.gridX = 4;
  k.gridY = 1;
  k.gridZ = 1;
  k.blockX = 256;
  k.blockY = 1;
  k.blockZ = 1;
  k.name = "_Z5scalePfi";
  CuptiRecordFields f;
  ASSERT_EQ(ParseCuptiRecord(reinterpret_cast<CUpti_Activity*>(&k), &f), RecordOutcome::kKept);
  EXPECT_EQ(f.kind, ActivityKind::kKernel);
  EXPECT_EQ(f.device, 1u);
  EXPECT_EQ(f.stream, 7u);
  EXPECT_EQ(f.correlation_id, 42u);
  EXPECT_EQ(f.start_raw, k.start);
  EXPECT_EQ(f.end_raw, k.end);
  EXPECT_EQ(f.name, "scale(float*, int)");
  EXPECT_EQ(f.details, "regs:32 static_shared:0 dynamic_shared:0 grid:4,1,1 block:256,1,1");
}

TEST(CuptiRecords, CopiesAndMemsetsKeepTheirDirectionAndBytes) {
  CUpti_ActivityMemcpy6 m;
  std::memset(&m, 0, sizeof(m));
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  m.bytes = 1 << 20;
  m.start = 10;
  m.end = 20;
  CuptiRecordFields f;
  ASSERT_EQ(ParseCuptiRecord(reinterpret_cast<CUpti_Activity*>(&m), &f), RecordOutcome::kKept);
  EXPECT_EQ(f.kind, ActivityKind::kMemcpyDtoH);
  EXPECT_EQ(f.bytes, 1u << 20);
  EXPECT_EQ(f.name, "Memcpy DtoH");

  CUpti_ActivityMemset4 s;
  std::memset(&s, 0, sizeof(s));
  s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  s.bytes = 4096;
  s.value = 0xab;
  s.start = 30;
  s.end = 31;
  ASSERT_EQ(ParseCuptiRecord(reinterpret_cast<CUpti_Activity*>(&s), &f), RecordOutcome::kKept);
  EXPECT_EQ(f.kind, ActivityKind::kMemset);
  EXPECT_EQ(f.bytes, 4096u);

  EXPECT_EQ(MemcpyActivityKind(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD), ActivityKind::kMemcpyHtoD);
  EXPECT_EQ(MemcpyActivityKind(CUPTI_ACTIVITY_MEMCPY_KIND_PTOP), ActivityKind::kMemcpyDtoD);
  EXPECT_EQ(MemcpyActivityKind(CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN), ActivityKind::kMemcpyDtoD);
}

TEST(CuptiRecords, IncompleteAndOtherKindsAreNotKept) {
  CUpti_ActivityMemcpy6 m;
  std::memset(&m, 0, sizeof(m));
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.start = 10;  // no end: still running when a forced flush took it
  CuptiRecordFields f;
  EXPECT_EQ(ParseCuptiRecord(reinterpret_cast<CUpti_Activity*>(&m), &f), RecordOutcome::kIncomplete);
  m.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  EXPECT_EQ(ParseCuptiRecord(reinterpret_cast<CUpti_Activity*>(&m), &f), RecordOutcome::kIgnored);
}

TEST(CuptiRecords, NamesThatAreNotMangledStayAsTheyAre) {
  EXPECT_EQ(DemangleKernelName("vector_add"), "vector_add");
  EXPECT_EQ(DemangleKernelName(nullptr), "(unnamed kernel)");
}

TEST(CuptiApiVersion, OnlyTheCompiledCudaMajorReadsTheSameRecords) {
  EXPECT_TRUE(CuptiVersionCompatible(130001, 130001));
  EXPECT_TRUE(CuptiVersionCompatible(130100, 130001));   // 13.1: same layouts
  EXPECT_FALSE(CuptiVersionCompatible(28, 130001));      // CUDA 12.9
  EXPECT_FALSE(CuptiVersionCompatible(140000, 130001));  // a future major
  EXPECT_FALSE(CuptiVersionCompatible(0, 130001));
}

#endif  // CHRONOLINK_TEST_SEES_CUPTI

}  // namespace
}  // namespace chronolink::collector
