#include "trace/combine/xspace_combiner.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>

#include "common/quoted_text.h"
#include "trace/model/xplane_edit.h"

namespace chronolink::trace {
namespace {

constexpr std::string_view kGpuPrefix = "/device:GPU:";
constexpr int64_t kFirstHostPlaneId = 100'000;  // clear of GPU ordinals

bool IsGpuPlane(const std::string& name) {
  if (!name.starts_with(kGpuPrefix)) return false;
  int n = 0;
  const char* begin = name.data() + kGpuPrefix.size();
  const char* end = name.data() + name.size();
  return begin != end && std::from_chars(begin, end, n).ptr == end;
}

bool CheckHosts(const std::vector<const HostTrace*>& hosts, std::string* error) {
  if (hosts.empty()) {
    *error = "nothing to combine";
    return false;
  }
  for (const HostTrace* h : hosts) {
    if (h->clock != hosts.front()->clock) {
      *error = "host " + ShownName(h->host) + " is on another clock than host " + ShownName(hosts.front()->host) +
               ": align before combining";
      return false;
    }
    if (!h->line_base_known) {
      *error = "host " + ShownName(h->host) + ": its times are relative to an unknown start";
      return false;
    }
  }
  return true;
}

// Moves a plane's lines from its host's line base to the combined one.
bool Rebase(xspace::XPlane* plane, int64_t shift_ns, const std::string& host, std::string* error) {
  if (shift_ns == 0) return true;
  for (auto& line : *plane->mutable_lines()) {
    int64_t ts;
    if (__builtin_add_overflow(line.timestamp_ns(), shift_ns, &ts)) {
      *error = "host " + ShownName(host) + ", plane " + QuotedText(plane->name()) + ": timestamps overflow when combined";
      return false;
    }
    line.set_timestamp_ns(ts);
  }
  return true;
}

class Combiner {
 public:
  Combiner(HostTrace* out, int64_t base_ns) : out_(out), base_ns_(base_ns) {}

  bool AddHost(const HostTrace& host, std::string* error) {
    for (const auto& plane : host.space->planes()) {
      if (plane.name() == kTaskEnvPlaneName) {
        TakeSessionBounds(*host.space);
        continue;
      }
      xspace::XPlane* copy = out_->space->add_planes();
      copy->CopyFrom(plane);
      Rename(host.host, copy);
      SetPlaneStatStr(copy, "host", host.host);
      if (!Rebase(copy, host.line_base_ns - base_ns_, host.host, error)) return false;
    }
    for (const auto& e : host.space->errors()) out_->space->add_errors(host.host + ": " + e);
    for (const auto& w : host.space->warnings()) out_->space->add_warnings(host.host + ": " + w);
    out_->space->add_hostnames(host.host);
    return true;
  }

  void Finish() {
    if (start_ != kNoStart) SetProfileStartTime(out_->space, start_);
    if (stop_ != kNoStop) SetProfileStopTime(out_->space, stop_);
  }

 private:
  void Rename(const std::string& host, xspace::XPlane* plane) {
    if (IsGpuPlane(plane->name())) {
      plane->set_id(next_gpu_);
      plane->set_name(std::string(kGpuPrefix) + std::to_string(next_gpu_++));
      return;
    }
    plane->set_id(next_other_++);
    plane->set_name(plane->name() + " (" + host + ")");
  }

  void TakeSessionBounds(const xspace::XSpace& space) {
    if (const auto s = ProfileStartTime(space)) start_ = std::min(start_, *s);
    if (const auto s = ProfileStopTime(space)) stop_ = std::max(stop_, *s);
  }

  HostTrace* out_;
  int64_t base_ns_;
  int64_t next_gpu_ = 0;
  int64_t next_other_ = kFirstHostPlaneId;
  // The session over all hosts (plain values: GCC 12 took an empty
  // std::optional's payload here for uninitialised memory).
  static constexpr uint64_t kNoStart = std::numeric_limits<uint64_t>::max();
  static constexpr uint64_t kNoStop = 0;
  uint64_t start_ = kNoStart;
  uint64_t stop_ = kNoStop;
};

}  // namespace

bool CombineXSpace(const std::vector<const HostTrace*>& hosts, const std::string& name,
                   HostTrace* out, std::string* error) {
  if (!CheckHosts(hosts, error)) return false;
  int64_t base = hosts.front()->line_base_ns;
  for (const HostTrace* h : hosts) base = std::min(base, h->line_base_ns);
  out->host = name;
  out->clock = hosts.front()->clock;
  out->line_base_ns = base;
  out->source_format = TraceFormat::kXSpace;
  Combiner combiner(out, base);
  for (const HostTrace* h : hosts) {
    if (!combiner.AddHost(*h, error)) return false;
  }
  combiner.Finish();
  return true;
}

}  // namespace chronolink::trace
