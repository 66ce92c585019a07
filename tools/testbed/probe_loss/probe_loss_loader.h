// Loader of the test bed's probe-loss program (bpf/probe_loss.bpf.c): a tc
// egress filter on one device that drops a fraction of chronolink probes.
// Unlike the agent's tap it outlives the process that attached it: the
// classic tc filter holds the program, the program holds its counters map,
// and the map is also pinned on bpffs so that a later `stats` finds it.
// Everything works in the network namespace of the calling thread.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "bpf/probe_loss.h"

namespace chronolink::testbed {

// Where the counters of each (namespace, device) are pinned.
inline constexpr char kProbeLossPinRoot[] = "/sys/fs/bpf/chronolink/probe_loss";

struct ProbeLossConfig {
  std::string device;
  double fraction = 0;  // 0..1 of the selected datagrams
  uint16_t port = 7319;
  uint32_t magic = 0x43484C4B;
  uint32_t type_mask = CHRONOLINK_LOSS_ALL_TYPES;  // bit (1 << type)
  std::string pin_root = kProbeLossPinRoot;
};

struct ProbeLossAttachment {
  int ifindex = 0;
  uint32_t prog_id = 0;
  bool replaced = false;  // a probe-loss filter was already there
  std::string pin_path;   // empty when the counters could not be pinned
  std::string note;       // why they were not, in words
};

struct ProbeLossStats {
  bool attached = false;       // our filter is on the device's egress
  uint32_t prog_id = 0;
  std::string counters_from;   // "pin", "filter" (the attached program's map) or "" (none)
  std::string pin_path;
  bool have_config = false;    // read back from the attached program
  chronolink_loss_config config{};
  std::array<chronolink_loss_count, CHRONOLINK_LOSS_SLOTS> by_slot{};  // summed over CPUs
};

// "forward,reverse,followup,pilot" (any subset, or "all") -> type mask.
bool ParseProbeLossTypes(const std::string& list, uint32_t* mask, std::string* error);
std::string ProbeLossTypeName(int slot);  // slot 0 is "other"
// 0..1 -> parts per million; false for NaN or outside [0, 1].
bool ProbeLossFractionToPpm(double fraction, uint32_t* ppm, std::string* error);

// The pin of `device` in the calling thread's network namespace:
// <root>/<netns inode>-<device>.
std::string ProbeLossPinPath(const std::string& root, const std::string& device);

// Enters the network namespace `name` (/run/netns/<name>) or at `path`
// (when it contains a '/'), for the calling thread.
bool EnterNetns(const std::string& name_or_path, std::string* error);

// Loads and attaches (replacing an earlier probe-loss filter on the device)
// and pins the counters. A failure to pin is not an error (see .note):
// stats then reads the counters through the attached program.
bool AttachProbeLoss(const ProbeLossConfig& config, ProbeLossAttachment* out, std::string* error);
bool ReadProbeLossStats(const std::string& device, const std::string& pin_root, ProbeLossStats* out,
                        std::string* error);
// Removes our filter (only one whose program is ours), the clsact qdisc when
// nothing else is left on it, and the pin. *what says what was removed;
// nothing attached is not an error.
bool DetachProbeLoss(const std::string& device, const std::string& pin_root, std::string* what,
                     std::string* error);

}  // namespace chronolink::testbed
