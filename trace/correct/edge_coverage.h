// Where each node had a usable clock measurement, from the agents'
// edges.jsonl files (docs/formats.md), for the stretches offsets.jsonl
// cannot show: the solver uses an edge estimate up to two windows from its
// own (docs/solver.md), so a node whose every window failed for a few
// seconds (estimator "none", missing windows) is still reported reachable,
// its offset carried over from older windows. The correction marks such
// stretches kGap with a widened bound (trace/correct/clock_correction.h).
//
// A node is covered over a window [window_start_ns, window_end_ns) when a
// line with an estimate (estimator other than "none", beta_ns, alpha and
// uncertainty_ns not null) involves it: as the prober, the window is on its
// clock; as the probed peer, it is moved onto the peer's clock by the
// line's beta_ns (peer − prober). Every source class counts. A node's span
// is that of every line that names it, estimate or not; a hole is a part of
// its span no usable window covers, longer than kHoleToleranceRatio of its
// longest window (windows moved by slightly different betas do not quite abut).
//
// Not thread-safe while reading; const queries after Finish are.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace chronolink::trace {

inline constexpr char kEdgesSchema[] = "chronolink.edge.v1";
inline constexpr double kHoleToleranceRatio = 1e-3;  // of the window length

struct NodeClockInterval {
  int64_t start_ns = 0;  // [start, end), the node's clock
  int64_t end_ns = 0;
};

class EdgeCoverage {
 public:
  explicit EdgeCoverage(bool skip_bad_lines = false) : skip_bad_lines_(skip_bad_lines) {}

  // False with "file:line: what" on a malformed line (unless skipping).
  bool AddFile(const std::string& path, std::string* error);
  bool AddText(std::string_view text, const std::string& name, std::string* error);
  // Merges the windows into holes; call once, after the last Add.
  void Finish();

  // Whether any line named the node.
  bool Knows(uint32_t node) const { return nodes_.count(node) != 0; }
  // The node's uncovered stretches, sorted; empty when covered throughout or unknown.
  const std::vector<NodeClockInterval>& Holes(uint32_t node) const;

  const std::vector<std::string>& files() const { return files_; }
  uint64_t lines_read() const { return lines_read_; }
  uint64_t lines_usable() const { return lines_usable_; }
  uint64_t lines_skipped() const { return lines_skipped_; }

 private:
  struct NodeWindows {
    std::vector<NodeClockInterval> covered;
    int64_t span_start_ns = 0;
    int64_t span_end_ns = 0;
    bool has_span = false;
    int64_t longest_window_ns = 0;  // sets the merge tolerance
    std::vector<NodeClockInterval> holes;  // after Finish
  };

  bool AddLine(std::string_view line, const std::string& where, std::string* error);
  void Note(uint32_t node, NodeClockInterval window, bool usable);

  bool skip_bad_lines_;
  std::map<uint32_t, NodeWindows> nodes_;
  std::vector<std::string> files_;
  uint64_t lines_read_ = 0;
  uint64_t lines_usable_ = 0;
  uint64_t lines_skipped_ = 0;
};

}  // namespace chronolink::trace
