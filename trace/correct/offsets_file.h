// Reads the solved offsets a clock correction is built from: one or more
// `offsets.jsonl` files (docs/formats.md) — each leader's of a run (several
// leaders may each have written one, overlapping after a failover) or
// `chronolink-solve`'s offline output. A line is a row (one node at one
// instant) or a columns line (every node of one instant); a file may mix
// them. Every line's schema and every field's type is checked; a bad line is
// an error naming file:line (or, when asked, skipped, counted and warned
// about). Solutions are merged across files in the order given: the LAST
// one per (node, instant) wins, so a `recomputed` re-solve replaces the
// earlier solve of its instant, and a later file replaces an earlier one
// where they overlap. An instant is a t_ns, give or take kSameInstantNs: a
// leader maps its instant (on the fit clocks) to REALTIME anew when it
// solves it again, through the knots it holds by then, and the two t_ns of
// one instant differed by 1 ns on the test bed (2026-12-05; read as two
// instants, the node's clock stood still between them and alignment
// refused the file).
//
// The order of t_ns within a file is not checked: a node that leads, loses
// office and leads again appends instants that go back in time to the same
// file (docs/leader.md, "Failover"). Records come out sorted by (node, t_ns).
//
// One map has one reference clock: every line must name the same
// `reference` (a node id or "mean"). A file that changes it (a leader with
// another --reference) is refused with both places named rather than
// re-based: re-basing needs the old reference solved against the new one at
// every instant, and a silent mix would put hosts on two different clocks.
//
// Not thread-safe; the result is a plain value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace chronolink::trace {

inline constexpr char kOffsetsSchema[] = "chronolink.offset.v1";  // rows: a node at an instant
// Two solutions of a node this close are one instant solved twice: instants
// are a window apart, and a window is at least 0.1 s (the agent's config).
inline constexpr int64_t kSameInstantNs = 1'000'000;
inline constexpr char kOffsetColumnsSchema[] = "chronolink.offset_columns.v1";  // an instant
// Values no clock service produces: refused as corrupt input.
inline constexpr double kMaxAbsOffsetNs = 86'400e9;  // one day
// A disciplined REALTIME's rate against another's: the oscillators' ppm
// plus a daemon's slew (chronyd up to 8.3 %, the kernel PLL's phase up to
// 12.5 %/s; the test bed's timesyncd model slews past 1000 ppm, which was
// the bound before). Beyond 25 % it is no clock's.
inline constexpr double kMaxAbsDrift = 0.25;

// The clock offsets are solved against: a node's, or the mean of the
// largest component's nodes.
struct ClockReference {
  bool is_mean = false;
  uint32_t node = 0;  // when !is_mean

  std::string ToString() const;  // "node 3" or "mean"
  friend bool operator==(const ClockReference&, const ClockReference&) = default;
};

// One node at one reference instant.
struct OffsetRecord {
  uint32_t node = 0;
  int64_t t_ns = 0;        // the instant T, reference clock
  bool reachable = false;  // false: no offset was solved, the numbers below are 0
  double offset_ns = 0;    // node clock − reference clock at T
  double drift = 0;        // d(node − reference)/d(reference)
  double uncertainty_ns = 0;  // one sigma of offset_ns
  std::optional<double> residual_ns;
  int32_t component = -1;
  int32_t edges_used = 0;
  std::optional<uint32_t> leader;  // absent in offline output
  bool recomputed = false;
  // Not solved: placed between two solved instants where a node's clock
  // daemon bent its REALTIME (trace/correct/discipline_knots.h).
  bool between_instants = false;
  // Where the line was read: files[file_index]:line_number (for one placed
  // between instants, the solved instant before it).
  uint32_t file_index = 0;
  uint32_t line_number = 0;
};

// Sorts records by (node, t_ns) and keeps one per node and instant (t_ns
// within kSameInstantNs): the one read last (file_index, line_number).
// Returns how many it dropped.
uint64_t MergeSameInstants(std::vector<OffsetRecord>* records);

struct OffsetsReadOptions {
  // Skip malformed lines (counted, one warning each) instead of failing.
  // A reference change is refused all the same: it is not a damaged line.
  bool skip_bad_lines = false;
};

struct OffsetsInput {
  ClockReference reference;
  std::vector<OffsetRecord> records;  // last line per (node, t_ns), sorted by (node, t_ns)
  std::vector<std::string> files;     // in the order read
  uint64_t lines_read = 0;            // non-blank lines, bad ones included
  uint64_t solutions_read = 0;        // (node, t_ns) solutions in the good lines: a row holds one
  uint64_t lines_replaced = 0;        // solutions a later one of the same (node, t_ns) replaced
  uint64_t lines_skipped = 0;         // bad lines skipped (skip_bad_lines)
  std::vector<std::string> warnings;  // "file:line: why" per skipped line, "file: ..." per empty file (first 100)

  // "file:line" of a record, for messages.
  std::string Where(const OffsetRecord& record) const;
};

// Accumulates files or texts, then merges them.
class OffsetsReader {
 public:
  explicit OffsetsReader(OffsetsReadOptions options = {}) : options_(options) {}

  // Reads one whole file. False with "*error" = "file:line: what" (or
  // "file: why" when it cannot be read). A file without a line (a node
  // that never led) only adds a warning.
  bool AddFile(const std::string& path, std::string* error);
  // The same for text already in memory; `name` stands for the file in messages.
  bool AddText(std::string_view text, const std::string& name, std::string* error);
  // Deduplicates and sorts. False when nothing at all was read.
  bool Finish(OffsetsInput* out, std::string* error);

 private:
  bool AddLine(std::string_view line, uint32_t line_number, std::string* error);
  bool SetReference(const ClockReference& reference, uint32_t line_number, std::string* error);
  // After a file or text: one that held no line is a warning.
  void EndSource(uint64_t lines_before);

  OffsetsReadOptions options_;
  OffsetsInput input_;
  std::optional<std::string> reference_where_;  // where the reference was first named
};

// Reads `paths` in order with one OffsetsReader, each with the files
// rotated out of it before it (common/rotating_file.h RotatedSet: a
// leader's offsets.<N>.jsonl.gz beside its offsets.jsonl).
bool ReadOffsetsFiles(const std::vector<std::string>& paths, const OffsetsReadOptions& options,
                      OffsetsInput* out, std::string* error);

}  // namespace chronolink::trace
