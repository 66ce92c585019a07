// CUPTI (libcupti from the CUDA toolkit), loaded with dlopen: the activity
// API (enable, buffers, flush, records, drops) and its timestamps. Headers
// from /usr/local/cuda/include at build time; nothing is linked.
//
// Activity records are C structs whose layout is versioned per CUPTI
// release (CUpti_ActivityKernel10, CUpti_ActivityMemcpy6,
// CUpti_ActivityMemset4 in CUDA 13). The library loaded at run time must
// be the CUDA major version this build read its headers from, so Load
// checks cuptiGetVersion against CUPTI_API_VERSION.
//
// Environment: CHRONOLINK_CUPTI_LIBRARY names the library path to use.
#pragma once

#include <cupti.h>

#include <cstdint>
#include <string>

#include "collector/device/dynamic_library.h"

namespace chronolink::collector {

struct CuptiApi {
  CUptiResult (*GetVersion)(uint32_t*) = nullptr;
  CUptiResult (*GetResultString)(CUptiResult, const char**) = nullptr;
  CUptiResult (*GetTimestamp)(uint64_t*) = nullptr;
  CUptiResult (*ActivityEnable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*ActivityDisable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*ActivityRegisterCallbacks)(CUpti_BuffersCallbackRequestFunc,
                                           CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*ActivityFlushAll)(uint32_t) = nullptr;
  CUptiResult (*ActivityGetNextRecord)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult (*ActivityGetNumDroppedRecords)(CUcontext, uint32_t, size_t*) = nullptr;
  // Optional (nullptr when absent): stamping with a clock of our choice.
  CUptiResult (*ActivityRegisterTimestampCallback)(CUpti_TimestampCallbackFunc) = nullptr;

  // Loads, resolves and checks the API version; false with one line.
  bool Load(std::string* why);

  DynamicLibrary library;
  uint32_t version = 0;  // cuptiGetVersion
};

// "CUPTI_ERROR_UNKNOWN (999)".
std::string CuptiResultText(const CuptiApi& api, CUptiResult r);

// True when a CUPTI API version writes the record layouts of the one this
// build was compiled against (same CUDA major, xxyyzz numbering of 13+).
bool CuptiVersionCompatible(uint32_t runtime_version, uint32_t compiled_version);

}  // namespace chronolink::collector
