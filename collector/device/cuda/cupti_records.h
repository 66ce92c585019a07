// CUPTI activity records -> the fields of a GpuActivity, times still raw
// CUPTI timestamps (ns of CUPTI's clock; the backend unwraps them through
// the device's DeviceCounter). Pure: tested on records built in memory.
//
// Kinds read: CONCURRENT_KERNEL (CUpti_ActivityKernel10), MEMCPY
// (CUpti_ActivityMemcpy6), MEMSET (CUpti_ActivityMemset4): the layouts
// CUPTI 13 writes for them. Other kinds are ignored.
#pragma once

#include <cupti.h>

#include <cstdint>
#include <string>

#include "collector/device/gpu_activity.h"

namespace chronolink::collector {

struct CuptiRecordFields {
  ActivityKind kind = ActivityKind::kKernel;
  uint32_t device = 0;  // CUDA device ordinal (CUPTI deviceId)
  uint32_t stream = 0;  // CUPTI streamId
  uint64_t correlation_id = 0;
  uint64_t start_raw = 0;  // CUPTI timestamp, ns
  uint64_t end_raw = 0;    // CUPTI timestamp, ns
  std::string name;
  std::string details;
  uint64_t bytes = 0;
};

enum class RecordOutcome : uint8_t {
  kKept = 0,
  kIgnored = 1,     // a kind this backend does not collect
  kIncomplete = 2,  // no start or end time (a forced flush of a running operation)
};

RecordOutcome ParseCuptiRecord(const CUpti_Activity* record, CuptiRecordFields* out);

// CUPTI_ACTIVITY_MEMCPY_KIND_* -> the copy's direction as XProf draws it.
ActivityKind MemcpyActivityKind(uint8_t copy_kind);

// "regs:32 static_shared:0 dynamic_shared:0 grid:1,1,1 block:64,1,1", the
// kernel_details form TensorFlow's CUPTI tracer writes.
std::string KernelDetails(const CUpti_ActivityKernel10& k);

// The readable name of a mangled kernel name (the name itself when it is not
// a mangled C++ name).
std::string DemangleKernelName(const char* mangled);

}  // namespace chronolink::collector
