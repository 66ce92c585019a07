// Puts several hosts' traces, already on one clock, into one XSpace for tools
// that read a single file: planes are renamed and renumbered per host so
// nothing collides and XProf still draws them (`/host:CPU (<host>)`,
// `/device:GPU:<n>` renumbered across hosts with plane id = n, custom and
// other planes suffixed with ` (<host>)`), every plane gets a `host` stat,
// one `Task Environment` spans all hosts, and `hostnames` lists them all.
// Single-threaded; copies the planes (the inputs are left as they were).
#pragma once

#include <string>
#include <vector>

#include "trace/model/host_trace.h"

namespace chronolink::trace {

// `out` must be a fresh HostTrace; its host is set to `name`.
bool CombineXSpace(const std::vector<const HostTrace*>& hosts, const std::string& name,
                   HostTrace* out, std::string* error);

}  // namespace chronolink::trace
