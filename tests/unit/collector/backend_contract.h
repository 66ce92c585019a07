// What every GPU backend owes its caller after an Open that failed (no
// library, no device): each call is safe, says why it did nothing, yields
// nothing and counts nothing, and Close may be called any number of times.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collector/device/gpu_backend.h"

namespace chronolink::collector {

inline void ExpectInertAfterFailedOpen(GpuBackend* backend) {
  NodeClock host;
  SnapshotReading reading;
  std::string why;
  EXPECT_FALSE(backend->ReadSnapshot(0, host, &reading, &why));
  EXPECT_FALSE(why.empty());
  why.clear();
  EXPECT_FALSE(backend->StartActivity(&why));
  EXPECT_FALSE(why.empty());
  std::vector<GpuActivity> out;
  EXPECT_EQ(backend->DrainActivity(&out), 0u);
  EXPECT_TRUE(out.empty());
  backend->StopActivity();
  const ActivityCounters c = backend->activity_counters();
  EXPECT_EQ(c.records + c.dropped + c.invalid, 0u);
  EXPECT_EQ(backend->region_timer(), nullptr);
  backend->Close();
  backend->Close();
}

}  // namespace chronolink::collector
