// One CUPTI activity session: the buffer callbacks registered with CUPTI,
// CONCURRENT_KERNEL, MEMCPY and MEMSET enabled, completed buffers parsed
// (cupti_records.h) and each kept record handed to the owner's sink. CUPTI
// callbacks are process-wide, so one session at a time per process; a
// second Start is refused with the reason.
//
// Threading: Start/Stop from the owner's thread; Flush from any one thread;
// the sink runs on CUPTI's thread (or the flushing one) under the session's
// process-wide mutex, so it must be quick and must not call CUPTI.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "collector/device/cuda/cupti_api.h"
#include "collector/device/cuda/cupti_records.h"

namespace chronolink::collector {

using CuptiRecordSink = std::function<void(const CuptiRecordFields&)>;

struct CuptiSessionCounters {
  uint64_t dropped_by_cupti = 0;  // cuptiActivityGetNumDroppedRecords, summed
  uint64_t incomplete = 0;        // records without a start or end time
  uint64_t buffers_refused = 0;   // buffer requests the bounded pool could not serve
};

class CuptiActivitySession {
 public:
  explicit CuptiActivitySession(const CuptiApi& api) : api_(api) {}
  ~CuptiActivitySession() { Stop(); }
  CuptiActivitySession(const CuptiActivitySession&) = delete;
  CuptiActivitySession& operator=(const CuptiActivitySession&) = delete;

  // buffers x buffer_bytes bound what CUPTI may fill. False with *why.
  bool Start(size_t buffers, size_t buffer_bytes, CuptiRecordSink sink, std::string* why);
  // Hands over the buffers whose records are complete (forced: all).
  void Flush(bool forced);
  // Forced flush, kinds disabled, sink detached. Safe to call twice.
  void Stop();

  bool active() const { return active_; }
  CuptiSessionCounters counters() const;

 private:
  static void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records);
  static void CUPTIAPI BufferCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t size,
                                       size_t valid_size);
  void Consume(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t valid_size);
  void DisableKinds();

  const CuptiApi& api_;
  CuptiRecordSink sink_;
  bool active_ = false;
  CuptiSessionCounters counters_;  // guarded by the process-wide mutex
};

}  // namespace chronolink::collector
