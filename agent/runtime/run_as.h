// The agent's privilege drop at start-up, from its configuration: whom to
// become (--user/--group), the files to hand over beforehand, and the drop
// itself (agent/runtime/privileges.h has the mechanics). AgentRuntime::Start
// calls, in this order and on its own thread before any other exists:
//   PlanRunAs             first, so that an impossible drop fails before
//                         anything is attached or bound;
//   PrepareFilesForRunAs  after the privileged work, before the drop;
//   CarryOutRunAs         the drop; a failure is fatal.
#pragma once

#include <string>

#include "agent/config/agent_config.h"
#include "agent/runtime/privileges.h"

namespace chronolink {

struct RunAsPlan {
  DropPlan drop;
  ProcessCredentials before;  // as started
  bool switches_user() const { return drop.kind == DropPlan::Kind::kSwitchUser; }
};

// Reads the credentials, resolves the user when the agent can or must
// switch to it, and decides. False with the reason when the drop cannot be
// done as configured (unknown user, root asked for, a user an unprivileged
// start cannot become, root without CAP_SETUID).
bool PlanRunAs(const AgentConfig& config, RunAsPlan* out, std::string* error);

// When the user switches: hands the output directory (and the agent's own
// files in it) to the user (agent/runtime/output_handover.h). Nothing to do
// otherwise.
bool PrepareFilesForRunAs(const AgentConfig& config, const RunAsPlan& plan, std::string* error);

// Drops, verifies and logs the outcome once ("dropped privileges: now user
// nobody ..." or "nothing to drop: ..."). False with the reason otherwise.
bool CarryOutRunAs(const RunAsPlan& plan, std::string* error);

// For messages about files opened after the drop: " (written as user X
// after the privilege drop: ...)", or "" when the user did not change.
std::string RunAsFileHint(const RunAsPlan& plan);

}  // namespace chronolink
