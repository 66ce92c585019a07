#include "collector/api/status_json.h"

namespace chronolink::collector {

nlohmann::json StatusJson(const CollectorStatus& s) {
  nlohmann::json devices = nlohmann::json::array();
  for (size_t i = 0; i < s.devices.size(); ++i) {
    const GpuDeviceInfo& d = s.devices[i];
    nlohmann::json j = {{"ordinal", d.ordinal}, {"name", d.name},       {"vendor", d.vendor},
                        {"clock", d.clock},     {"counter_hz", d.counter_hz}, {"counter_bits", d.counter_bits}};
    if (i < s.maps.size()) {
      const DeviceClockMapStats& m = s.maps[i];
      j["map"] = {{"samples", m.samples},
                  {"accepted", m.accepted},
                  {"rejected_wide", m.rejected_wide},
                  {"rejected_invalid", m.rejected_invalid},
                  {"rejected_backwards", m.rejected_backwards},
                  {"segments", m.segments},
                  {"thinned", m.thinned},
                  {"last_bracket_ns", m.last_bracket_ns},
                  {"max_fit_residual_ns", m.max_fit_residual_ns}};
    }
    devices.push_back(std::move(j));
  }
  return {{"backend", s.backend.empty() ? "none" : s.backend},
          {"backend_status", std::string(BackendStatusName(s.backend_status))},
          {"backend_message", s.backend_message},
          {"devices", std::move(devices)},
          {"activity",
           {{"records", s.activity.records},
            {"dropped_backend", s.activity.dropped},
            {"invalid", s.activity.invalid},
            {"kept", s.activity_kept},
            {"dropped_store", s.activity_dropped_store}}},
          {"snapshot_read_failures", s.snapshot_read_failures},
          {"last_read_failure", s.last_read_failure},
          {"clock_page", s.clock_page_state},
          {"clock_page_refusal", s.clock_page_refusal},
          {"clock_page_refusals", s.clock_page_refusals},
          {"clock_page_lapses", s.clock_page_lapses},
          {"clock_page_mappings", s.clock_page_mappings},
          {"running", s.running}};
}

}  // namespace chronolink::collector
