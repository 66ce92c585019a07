// chronolink-collect devices: every backend this build knows, whether it is
// compiled in, whether its library loads, and the devices it sees. The first
// thing to run on a new node.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "collector/cli/collect_commands.h"
#include "collector/device/backend_registry.h"

namespace chronolink::collector::cli {

int RunDevices(const DevicesFlags& f) {
  nlohmann::json out = nlohmann::json::array();
  size_t real_devices = 0;
  for (const BackendEntry& e : Backends()) {
    std::unique_ptr<GpuBackend> b = e.create();
    BackendOptions bo;
    if (e.name == "simulated") bo.settings = f.settings;
    std::vector<GpuDeviceInfo> devices;
    std::string why;
    const BackendStatus st = b->Open(bo, &devices, &why);
    nlohmann::json j = {{"backend", e.name}, {"compiled_in", e.compiled_in},
                        {"status", std::string(BackendStatusName(st))}, {"message", why}};
    j["devices"] = nlohmann::json::array();
    for (const GpuDeviceInfo& d : devices) {
      j["devices"].push_back({{"ordinal", d.ordinal}, {"name", d.name}, {"clock", d.clock},
                              {"counter_hz", d.counter_hz}, {"counter_bits", d.counter_bits}});
    }
    if (e.name != "simulated") real_devices += devices.size();
    if (!f.json) {
      std::printf("%-10s %-16s %s\n", std::string(e.name).c_str(), std::string(BackendStatusName(st)).c_str(),
                  st == BackendStatus::kReady ? "" : why.c_str());
      for (const GpuDeviceInfo& d : devices) {
        std::printf("  GPU %u: %s (%s)\n", d.ordinal, d.name.c_str(), d.clock.c_str());  // rate, width: --json
      }
    }
    b->Close();
    out.push_back(std::move(j));
  }
  if (f.json) std::printf("%s\n", out.dump(1).c_str());
  // 0 when a real GPU is there; 3 (documented) when none is, so scripts can tell.
  return real_devices > 0 ? 0 : 3;
}

}  // namespace chronolink::collector::cli
