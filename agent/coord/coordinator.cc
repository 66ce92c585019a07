#include "agent/coord/coordinator.h"

#include "agent/config/agent_config.h"
#include "agent/coord/etcd_coordinator.h"
#include "agent/coord/static_coordinator.h"

namespace chronolink {

std::unique_ptr<Coordinator> MakeCoordinator(const AgentConfig& config) {
  switch (config.cluster_settings.backend) {
    case CoordinationBackend::kStatic: return std::make_unique<StaticCoordinator>(config);
    case CoordinationBackend::kEtcd: return std::make_unique<EtcdCoordinator>(config);
    case CoordinationBackend::kNone: return nullptr;
  }
  return nullptr;
}

}  // namespace chronolink
