#include "agent/coord/coordinator.h"

#include "agent/coord/etcd/etcd_coordinator.h"
#include "agent/coord/static_coordinator.h"

namespace chronolink {

std::unique_ptr<Coordinator> MakeCoordinator(const CoordinationOptions& options) {
  switch (options.backend) {
    case CoordinationBackend::kStatic: return std::make_unique<StaticCoordinator>(options);
    case CoordinationBackend::kEtcd: return std::make_unique<EtcdCoordinator>(options);
    case CoordinationBackend::kNone: return nullptr;
  }
  return nullptr;
}

}  // namespace chronolink
