// Validation of the merged settings into an AgentConfig. Internal to
// agent/config: only agent/config/*.cc include this header.
#pragma once

#include <string>

#include "agent/config/agent_config.h"
#include "agent/config/config_sources.h"

namespace chronolink::config_internal {

// Checks the merged settings as a whole and fills in *c. Stops at the first
// problem with one message, naming where the offending value came from.
// virtual_block_origin: where the config file had a "virtual_clock" object,
// or empty.
bool Validate(const Merged& m, const std::string& virtual_block_origin, AgentConfig* c, std::string* error);

}  // namespace chronolink::config_internal
