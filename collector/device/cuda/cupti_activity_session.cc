// CUPTI's buffer callbacks and the activity kinds (cupti_activity_session.h).
#include "collector/device/cuda/cupti_activity_session.h"

#include <array>
#include <mutex>

#include "collector/device/cuda/cupti_buffer_pool.h"

namespace chronolink::collector {

namespace {

constexpr std::array<CUpti_ActivityKind, 3> kKinds = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                                      CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};

// The session CUPTI's callbacks report to (nullptr: none; buffers just go
// back to the pool). Guarded by ActiveMutex().
CuptiActivitySession* g_active = nullptr;

std::mutex& ActiveMutex() {
  static std::mutex* mu = new std::mutex();  // outlives every session, like the pool
  return *mu;
}

}  // namespace

bool CuptiActivitySession::Start(size_t buffers, size_t buffer_bytes, CuptiRecordSink sink,
                                 std::string* why) {
  {
    std::lock_guard<std::mutex> lock(ActiveMutex());
    if (g_active != nullptr) {
      *why = g_active == this
                 ? "CUPTI activity already started"
                 : "another chronolink CUDA collector already runs CUPTI activity in this process";
      return g_active == this;
    }
    g_active = this;
    sink_ = std::move(sink);
  }
  ProcessCuptiBufferPool().Configure(buffers, buffer_bytes);
  CUptiResult r = api_.ActivityRegisterCallbacks(&BufferRequested, &BufferCompleted);
  size_t enabled = 0;
  for (; r == CUPTI_SUCCESS && enabled < kKinds.size(); ++enabled) {
    r = api_.ActivityEnable(kKinds[enabled]);
    if (r != CUPTI_SUCCESS) break;
  }
  if (r != CUPTI_SUCCESS) {
    *why = "CUPTI activity could not start (" + CuptiResultText(api_, r) + ")";
    for (size_t i = 0; i < enabled; ++i) (void)api_.ActivityDisable(kKinds[i]);
    std::lock_guard<std::mutex> lock(ActiveMutex());
    g_active = nullptr;
    sink_ = nullptr;
    return false;
  }
  active_ = true;
  return true;
}

void CuptiActivitySession::Flush(bool forced) {
  // Not under ActiveMutex: CUPTI calls BufferCompleted from inside.
  if (active_) (void)api_.ActivityFlushAll(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
}

void CuptiActivitySession::DisableKinds() {
  // Teardown: a kind that will not disable leaves nothing to act on.
  for (CUpti_ActivityKind k : kKinds) (void)api_.ActivityDisable(k);
}

void CuptiActivitySession::Stop() {
  if (!active_) return;
  Flush(/*forced=*/true);
  DisableKinds();
  Flush(/*forced=*/true);
  std::lock_guard<std::mutex> lock(ActiveMutex());
  if (g_active == this) g_active = nullptr;
  sink_ = nullptr;
  active_ = false;
}

CuptiSessionCounters CuptiActivitySession::counters() const {
  std::lock_guard<std::mutex> lock(ActiveMutex());
  CuptiSessionCounters c = counters_;
  c.buffers_refused = ProcessCuptiBufferPool().refused();
  return c;
}

void CUPTIAPI CuptiActivitySession::BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = ProcessCuptiBufferPool().Take(size);
  *max_records = 0;  // as many as fit
}

void CUPTIAPI CuptiActivitySession::BufferCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                                                    size_t size, size_t valid_size) {
  {
    std::lock_guard<std::mutex> lock(ActiveMutex());
    if (g_active != nullptr) g_active->Consume(context, stream_id, buffer, valid_size);
  }
  ProcessCuptiBufferPool().Give(buffer);
}

void CuptiActivitySession::Consume(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                                   size_t valid_size) {
  CUpti_Activity* record = nullptr;
  while (buffer != nullptr && api_.ActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS &&
         record != nullptr) {
    CuptiRecordFields fields;
    RecordOutcome outcome = ParseCuptiRecord(record, &fields);
    if (outcome == RecordOutcome::kKept && sink_) sink_(fields);
    if (outcome == RecordOutcome::kIncomplete) ++counters_.incomplete;
  }
  size_t dropped = 0;
  if (api_.ActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS) {
    counters_.dropped_by_cupti += dropped;
  }
}

}  // namespace chronolink::collector
