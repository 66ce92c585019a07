// A backend whose Open() always reports kNotCompiledIn (see the header).
#include "collector/device/not_compiled_backend.h"

namespace chronolink::collector {
namespace {

class NotCompiledBackend final : public GpuBackend {
 public:
  NotCompiledBackend(std::string_view name, std::string_view missing) : name_(name), missing_(missing) {}

  std::string_view name() const override { return name_; }

  BackendStatus Open(const BackendOptions&, std::vector<GpuDeviceInfo>* devices, std::string* why) override {
    if (devices != nullptr) devices->clear();
    if (why != nullptr) {
      *why = std::string("the ") + std::string(name_) +
             " backend is not compiled into this build (built without " + std::string(missing_) +
             "; install them and rebuild)";
    }
    return BackendStatus::kNotCompiledIn;
  }
  void Close() override {}

  bool ReadSnapshot(uint32_t, const NodeClock&, SnapshotReading*, std::string* why) override {
    if (why != nullptr) *why = std::string(name_) + " backend not compiled in";
    return false;
  }

  bool StartActivity(std::string* why) override {
    if (why != nullptr) *why = std::string(name_) + " backend not compiled in";
    return false;
  }
  size_t DrainActivity(std::vector<GpuActivity>*) override { return 0; }
  void StopActivity() override {}
  ActivityCounters activity_counters() const override { return {}; }

 private:
  std::string_view name_;
  std::string_view missing_;
};

}  // namespace

std::unique_ptr<GpuBackend> CreateNotCompiledBackend(std::string_view name, std::string_view missing) {
  return std::make_unique<NotCompiledBackend>(name, missing);
}

}  // namespace chronolink::collector
