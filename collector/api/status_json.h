// CollectorStatus as JSON: what `chronolink-collect run` prints with --json
// and what the C API's status call returns.
#pragma once

#include <nlohmann/json.hpp>

#include "collector/api/collector.h"

namespace chronolink::collector {

nlohmann::json StatusJson(const CollectorStatus& status);

}  // namespace chronolink::collector
