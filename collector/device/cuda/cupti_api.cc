// dlopen of CUPTI and its version check.
#include "collector/device/cuda/cupti_api.h"

namespace chronolink::collector {

namespace {

LibrarySpec CuptiSpec() {
  return {"libcupti (CUPTI, from the CUDA toolkit)",
          "CHRONOLINK_CUPTI_LIBRARY",
          {"libcupti.so.13", "/usr/local/cuda/lib64/libcupti.so.13",
           "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13", "libcupti.so"},
          "install the CUDA 13 toolkit with CUPTI under /usr/local/cuda"};
}

// Since CUDA 13 the API version is xxyyzz (xx = CUDA major); before, a
// small serial number (28 was CUDA 12.9).
constexpr uint32_t kVersionPerMajor = 10'000;

}  // namespace

bool CuptiVersionCompatible(uint32_t runtime_version, uint32_t compiled_version) {
  return runtime_version / kVersionPerMajor == compiled_version / kVersionPerMajor &&
         runtime_version >= kVersionPerMajor;
}

bool CuptiApi::Load(std::string* why) {
  if (!library.loaded() && !library.Open(CuptiSpec(), why)) return false;
  bool ok = library.Resolve({{"cuptiGetVersion", SlotOf(&GetVersion)},
                             {"cuptiGetResultString", SlotOf(&GetResultString)},
                             {"cuptiGetTimestamp", SlotOf(&GetTimestamp)},
                             {"cuptiActivityEnable", SlotOf(&ActivityEnable)},
                             {"cuptiActivityDisable", SlotOf(&ActivityDisable)},
                             {"cuptiActivityRegisterCallbacks", SlotOf(&ActivityRegisterCallbacks)},
                             {"cuptiActivityFlushAll", SlotOf(&ActivityFlushAll)},
                             {"cuptiActivityGetNextRecord", SlotOf(&ActivityGetNextRecord)},
                             {"cuptiActivityGetNumDroppedRecords", SlotOf(&ActivityGetNumDroppedRecords)}},
                            why);
  if (!ok) return false;
  *SlotOf(&ActivityRegisterTimestampCallback) = library.Find("cuptiActivityRegisterTimestampCallback");
  if (GetVersion(&version) != CUPTI_SUCCESS || !CuptiVersionCompatible(version, CUPTI_API_VERSION)) {
    *why = "CUPTI at " + library.path() + " reports API version " + std::to_string(version) +
           "; this build reads the records of CUPTI " + std::to_string(CUPTI_API_VERSION) +
           " (same CUDA major needed): point CHRONOLINK_CUPTI_LIBRARY at that toolkit's libcupti";
    return false;
  }
  return true;
}

std::string CuptiResultText(const CuptiApi& api, CUptiResult r) {
  const char* text = nullptr;
  if (api.GetResultString == nullptr || api.GetResultString(r, &text) != CUPTI_SUCCESS || text == nullptr) {
    text = "CUPTI_ERROR";
  }
  return std::string(text) + " (" + std::to_string(static_cast<int>(r)) + ")";
}

}  // namespace chronolink::collector
