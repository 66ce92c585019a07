// The HIP region timer's logic without a GPU: a test double of the HIP
// runtime (FakeHip, below) stands in for libamdhip64. Its events are
// stamped on a fake device clock that the counter reads advance, markers on
// a stream complete after that stream's queue delay, and elapsed times come
// back as HIP gives them (float ms). Checked: regions come back as markers
// placed within their bound of the true times, anchors are picked so the
// bound stays small, every refusal is counted, Stop drops what never ended,
// and an anchor that never completes fails Start within its timeout.
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1  // HIP's host API headers need a platform; no HIP code runs
#endif

#include "collector/device/rocm/hip_region_timer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace chronolink::collector {
namespace {

// A test double of the HIP runtime: a fake device clock in ns, events that
// complete at "record time + the stream's queue delay".
struct FakeHip {
  struct Event {
    bool recorded = false;
    int64_t time_ns = 0;  // on the fake device clock
  };
  int64_t now_ns = 1'000'000'000;      // the fake device clock
  int64_t read_step_ns = 500;          // each counter read advances it
  std::map<uintptr_t, int64_t> delay;  // stream -> queue delay
  std::map<uintptr_t, Event> events;
  uintptr_t next_handle = 0x1000;
  bool never_complete = false;
  float elapsed_override = 0;  // != 0: EventElapsedTime returns this
  int created = 0, destroyed = 0;

  static FakeHip* self;

  static hipError_t EventCreate(hipEvent_t* e, unsigned) {
    *e = reinterpret_cast<hipEvent_t>(self->next_handle++);
    self->events[reinterpret_cast<uintptr_t>(*e)] = Event{};
    ++self->created;
    return hipSuccess;
  }
  static hipError_t EventDestroy(hipEvent_t e) {
    ++self->destroyed;
    return self->events.erase(reinterpret_cast<uintptr_t>(e)) ? hipSuccess : hipErrorInvalidHandle;
  }
  static hipError_t EventRecord(hipEvent_t e, hipStream_t s) {
    auto it = self->events.find(reinterpret_cast<uintptr_t>(e));
    if (it == self->events.end()) return hipErrorInvalidHandle;
    it->second.recorded = true;
    it->second.time_ns = self->now_ns + self->delay[reinterpret_cast<uintptr_t>(s)];
    return hipSuccess;
  }
  static hipError_t EventQuery(hipEvent_t e) {
    const Event& ev = self->events.at(reinterpret_cast<uintptr_t>(e));
    self->now_ns += 100;  // polling takes time
    if (self->never_complete || !ev.recorded || ev.time_ns > self->now_ns) return hipErrorNotReady;
    return hipSuccess;
  }
  static hipError_t Elapsed(float* ms, hipEvent_t a, hipEvent_t b) {
    const Event& ea = self->events.at(reinterpret_cast<uintptr_t>(a));
    const Event& eb = self->events.at(reinterpret_cast<uintptr_t>(b));
    *ms = self->elapsed_override != 0
              ? self->elapsed_override
              : static_cast<float>(static_cast<double>(eb.time_ns - ea.time_ns) / 1e6);
    return hipSuccess;
  }
  static hipError_t StreamCreate(hipStream_t* s, unsigned) {
    *s = reinterpret_cast<hipStream_t>(self->next_handle++);
    return hipSuccess;
  }
  static hipError_t StreamDestroy(hipStream_t) { return hipSuccess; }
  static hipError_t GetDevice(int* d) {
    *d = 0;
    return hipSuccess;
  }
  static hipError_t SetDevice(int) { return hipSuccess; }
  static const char* ErrorName(hipError_t) { return "fakeHipError"; }

  void Fill(HipApi* out) const {
    HipApi& api = *out;
    api.EventCreateWithFlags = &EventCreate;
    api.EventDestroy = &EventDestroy;
    api.EventRecord = &EventRecord;
    api.EventQuery = &EventQuery;
    api.EventElapsedTime = &Elapsed;
    api.StreamCreateWithFlags = &StreamCreate;
    api.StreamDestroy = &StreamDestroy;
    api.GetDevice = &GetDevice;
    api.SetDevice = &SetDevice;
    api.GetErrorName = &ErrorName;
  }

  DeviceNsReader Reader() {
    return [this](uint32_t ordinal, int64_t* ns, std::string* why) {
      if (ordinal != 0) {
        *why = "no such device";
        return false;
      }
      now_ns += read_step_ns;
      *ns = now_ns;
      return true;
    };
  }
};
FakeHip* FakeHip::self = nullptr;

class HipRegionTimerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeHip::self = &fake_;
    fake_.Fill(&api_);
    options_.anchor_period_ns = 0;  // a fresh anchor at every drain
    options_.anchor_timeout_ns = 1'000'000;
  }
  std::unique_ptr<HipRegionTimer> Started() {
    auto t = std::make_unique<HipRegionTimer>(api_, fake_.Reader(), host_, options_);
    std::string why;
    const uint32_t ordinals[] = {0};
    EXPECT_TRUE(t->Start(ordinals, &why)) << why;
    return t;
  }

  FakeHip fake_;
  HipApi api_;
  NodeClock host_;
  HipRegionTimerOptions options_;
};

TEST_F(HipRegionTimerTest, ARegionComesBackAsAMarkerWithinItsBound) {
  auto timer = Started();
  void* stream = reinterpret_cast<void*>(uintptr_t{0x77});
  fake_.delay[0x77] = 2'000'000;  // the app's stream is 2 ms behind
  std::string why;
  // Begin reads the counter (the floor), then records on the 2 ms stream.
  const int64_t true_begin = fake_.now_ns + fake_.read_step_ns + 2'000'000;
  const uint64_t id = timer->Begin(0, stream, "step 1", &why);
  ASSERT_NE(id, 0u) << why;
  fake_.now_ns += 5'000'000;  // the region spans the work queued meanwhile
  ASSERT_TRUE(timer->End(id, &why)) << why;
  std::vector<GpuActivity> out;
  EXPECT_EQ(timer->Drain(&out), 0u);  // the end event is still queued
  fake_.now_ns += 3'000'000;
  ASSERT_EQ(timer->Drain(&out), 1u);
  const GpuActivity& a = out[0];
  EXPECT_EQ(a.kind, ActivityKind::kMarker);
  EXPECT_EQ(a.name, "step 1");
  EXPECT_EQ(a.correlation_id, id);
  EXPECT_EQ(a.stream, 1u);  // the first non-default stream seen
  EXPECT_GT(a.device_error_ns, 0);
  EXPECT_LE(std::llabs(a.start_device_ns - true_begin), a.device_error_ns);
  EXPECT_NEAR(static_cast<double>(a.end_device_ns - a.start_device_ns), 5'000'000.0 + 1'000.0, 5'000.0);
  // 1 us ROCr allowance + anchor half bracket + 100 ppm of a few ms: small.
  EXPECT_LT(a.device_error_ns, 5'000);
  EXPECT_EQ(timer->invalid(), 0u);
  EXPECT_EQ(timer->dropped(), 0u);
}

TEST_F(HipRegionTimerTest, GarbageElapsedTimesAreCountedInvalidNotExported) {
  auto timer = Started();
  std::string why;
  const uint64_t id = timer->Begin(0, nullptr, "bad", &why);
  ASSERT_TRUE(timer->End(id, &why));
  fake_.elapsed_override = -50'000.0f;  // places the begin 50 s before it was recorded
  std::vector<GpuActivity> out;
  EXPECT_EQ(timer->Drain(&out), 0u);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(timer->invalid(), 1u);
}

TEST_F(HipRegionTimerTest, RefusalsSayWhyAndAreCounted) {
  HipRegionTimer idle(api_, fake_.Reader(), host_, options_);
  std::string why;
  EXPECT_EQ(idle.Begin(0, nullptr, "x", &why), 0u);
  EXPECT_NE(why.find("not started"), std::string::npos) << why;

  options_.max_regions_in_flight = 1;
  auto timer = Started();
  EXPECT_EQ(timer->Begin(3, nullptr, "x", &why), 0u);
  EXPECT_NE(why.find("not collected"), std::string::npos) << why;
  const uint64_t first = timer->Begin(0, nullptr, "a", &why);
  ASSERT_NE(first, 0u);
  EXPECT_EQ(timer->Begin(0, nullptr, "b", &why), 0u);
  EXPECT_NE(why.find("too many regions"), std::string::npos) << why;
  EXPECT_EQ(timer->dropped(), 1u);
  EXPECT_FALSE(timer->End(first + 100, &why));
  ASSERT_TRUE(timer->End(first, &why));
  EXPECT_FALSE(timer->End(first, &why));
  EXPECT_NE(why.find("already ended"), std::string::npos) << why;
}

TEST_F(HipRegionTimerTest, StopKeepsEndedRegionsDropsOpenOnesAndFreesEveryEvent) {
  auto timer = Started();
  std::string why;
  const uint64_t ended = timer->Begin(0, nullptr, "ended", &why);
  ASSERT_TRUE(timer->End(ended, &why));
  ASSERT_NE(timer->Begin(0, nullptr, "never ended", &why), 0u);
  std::vector<GpuActivity> out;
  timer->Stop(10'000'000, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].name, "ended");
  EXPECT_EQ(timer->dropped(), 1u);
  EXPECT_EQ(fake_.created, fake_.destroyed);
  EXPECT_EQ(timer->Drain(&out), 0u);  // stopped: nothing more, no crash
}

TEST_F(HipRegionTimerTest, AnAnchorThatNeverCompletesFailsStartWithinItsTimeout) {
  fake_.never_complete = true;
  HipRegionTimer timer(api_, fake_.Reader(), host_, options_);
  std::string why;
  const uint32_t ordinals[] = {0};
  EXPECT_FALSE(timer.Start(ordinals, &why));
  EXPECT_NE(why.find("anchor"), std::string::npos) << why;
  EXPECT_EQ(fake_.created, fake_.destroyed);
}

}  // namespace
}  // namespace chronolink::collector
