// The probe engine tests run the cadence the agent had before adaptive
// cadence: one pair per ms (many pairs in a short test), follow-ups after
// 20 ms.
#pragma once

#include "agent/config/agent_config.h"

namespace chronolink {

inline ProbeSettings FastProbing() {
  ProbeSettings ps;
  ps.interval_ns = 1'000'000;
  ps.followup_delay_ns = 20'000'000;
  return ps;
}

}  // namespace chronolink
