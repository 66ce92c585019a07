// One host's collectives, read out of its trace: every event a name rule in
// trace/validate/collective_names.h recognises (by its metadata name,
// display name, `hlo_op` stat, or record_param_comms' "Collective name"
// arg), with its instants, the group and sequence number the trace gives,
// which participant ran it (the host's threads, or one device plane), and
// whether its span covers the rendezvous. Async XLA halves are joined here
// (start's begin to done's end). Pure: reads the trace, allocates the
// result; one call per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trace/model/host_trace.h"
#include "trace/model/trace_time.h"
#include "trace/validate/collective_names.h"

namespace chronolink::trace {

// The stat names validate reads; Kineto's come from PyTorch's
// torch/csrc/profiler/util.cpp (saveNcclMeta), XLA's from XProf.
namespace validate_stats {
inline constexpr std::string_view kHloOp = "hlo_op";
inline constexpr std::string_view kHloModule = "hlo_module";
inline constexpr std::string_view kStepNum = "step_num";
inline constexpr std::string_view kCollectiveName = "Collective name";
inline constexpr std::string_view kProcessGroupName = "Process Group Name";
inline constexpr std::string_view kSeq = "Seq";
inline constexpr std::string_view kSrcRank = "Src Rank";
inline constexpr std::string_view kDstRank = "Dst Rank";
inline constexpr std::string_view kChromeCategory = "chrome.cat";
}  // namespace validate_stats

// Shared by every event of one name: copying an event copies no strings of it.
using CollectiveNamePtr = std::shared_ptr<const CollectiveName>;

struct CollectiveEvent {
  size_t trace = 0;         // index of its HostTrace among those validated
  std::string participant;  // "" for the host's threads, else the device plane's name
  CollectiveNamePtr name;   // family, op, dependency, producer
  AsyncPhase phase = AsyncPhase::kWhole;  // kWhole once halves are joined
  std::string group;        // process group name / HLO module; "" when the trace does not say
  std::optional<int64_t> seq;   // Kineto "Seq", XLA "step_num"
  std::optional<int64_t> peer;  // send: "Dst Rank", recv: "Src Rank"
  bool on_device = false;
  bool covers_rendezvous = false;
  TraceInstant start;
  TraceInstant end;
};

struct ExtractCounts {
  int64_t bad_time = 0;         // instants that overflow int64 (event skipped)
  int64_t unpaired_starts = 0;  // async -start with no -done: its own span is used
  int64_t unpaired_dones = 0;   // async -done with no -start: skipped
};

// Every collective event of one trace, ordered by participant, then start.
std::vector<CollectiveEvent> ExtractCollectives(const HostTrace& trace, size_t trace_index,
                                                ExtractCounts* counts);

// Whether a plane is a device's: XProf `/device:*` planes and Kineto's
// `GPU <n>` processes.
bool IsDevicePlaneName(std::string_view name);

// The trace's own rank when it says (a plane-level stat `rank`, or the
// Kineto `distributedInfo` object kept as a JSON string stat); nullopt else.
std::optional<int64_t> TraceRank(const HostTrace& trace);

}  // namespace chronolink::trace
