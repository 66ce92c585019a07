// Reading CUPTI activity records (cupti_records.h).
#include "collector/device/cuda/cupti_records.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace chronolink::collector {

namespace {

RecordOutcome Completed(const CuptiRecordFields& f) {
  return f.start_raw == 0 || f.end_raw == 0 ? RecordOutcome::kIncomplete : RecordOutcome::kKept;
}

RecordOutcome FromKernel(const CUpti_ActivityKernel10& k, CuptiRecordFields* out) {
  out->kind = ActivityKind::kKernel;
  out->device = k.deviceId;
  out->stream = k.streamId;
  out->correlation_id = k.correlationId;
  out->start_raw = k.start;
  out->end_raw = k.end;
  out->name = DemangleKernelName(k.name);
  out->details = KernelDetails(k);
  out->bytes = 0;
  return Completed(*out);
}

std::string_view MemcpyName(ActivityKind k) {
  switch (k) {
    case ActivityKind::kMemcpyHtoD:
      return "Memcpy HtoD";
    case ActivityKind::kMemcpyDtoH:
      return "Memcpy DtoH";
    default:
      return "Memcpy DtoD";
  }
}

RecordOutcome FromMemcpy(const CUpti_ActivityMemcpy6& m, CuptiRecordFields* out) {
  out->kind = MemcpyActivityKind(m.copyKind);
  out->device = m.deviceId;
  out->stream = m.streamId;
  out->correlation_id = m.correlationId;
  out->start_raw = m.start;
  out->end_raw = m.end;
  out->name = std::string(MemcpyName(out->kind));
  out->details = "copy_kind:" + std::to_string(m.copyKind);
  out->bytes = m.bytes;
  return Completed(*out);
}

RecordOutcome FromMemset(const CUpti_ActivityMemset4& m, CuptiRecordFields* out) {
  out->kind = ActivityKind::kMemset;
  out->device = m.deviceId;
  out->stream = m.streamId;
  out->correlation_id = m.correlationId;
  out->start_raw = m.start;
  out->end_raw = m.end;
  out->name = "Memset";
  out->details = "value:" + std::to_string(m.value);
  out->bytes = m.bytes;
  return Completed(*out);
}

}  // namespace

ActivityKind MemcpyActivityKind(uint8_t copy_kind) {
  switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return ActivityKind::kMemcpyHtoD;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return ActivityKind::kMemcpyDtoH;
    default:
      return ActivityKind::kMemcpyDtoD;  // DtoD, peer, array copies, HtoH
  }
}

std::string KernelDetails(const CUpti_ActivityKernel10& k) {
  return "regs:" + std::to_string(k.registersPerThread) +
         " static_shared:" + std::to_string(k.staticSharedMemory) +
         " dynamic_shared:" + std::to_string(k.dynamicSharedMemory) + " grid:" + std::to_string(k.gridX) +
         "," + std::to_string(k.gridY) + "," + std::to_string(k.gridZ) +
         " block:" + std::to_string(k.blockX) + "," + std::to_string(k.blockY) + "," +
         std::to_string(k.blockZ);
}

std::string DemangleKernelName(const char* mangled) {
  if (mangled == nullptr) return "(unnamed kernel)";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> readable(abi::__cxa_demangle(mangled, nullptr, nullptr, &status),
                                                  std::free);
  return status == 0 && readable != nullptr ? std::string(readable.get()) : std::string(mangled);
}

RecordOutcome ParseCuptiRecord(const CUpti_Activity* record, CuptiRecordFields* out) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return FromKernel(*reinterpret_cast<const CUpti_ActivityKernel10*>(record), out);
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return FromMemcpy(*reinterpret_cast<const CUpti_ActivityMemcpy6*>(record), out);
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return FromMemset(*reinterpret_cast<const CUpti_ActivityMemset4*>(record), out);
    default:
      return RecordOutcome::kIgnored;
  }
}

}  // namespace chronolink::collector
