// edges.jsonl: one JSON object per edge, window and source class, appended
// and flushed as each window closes, so a crash loses at most the windows
// still open. Schema in docs/formats.md.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "agent/estimate/edge_windows.h"
#include "clock/fit_clock.h"
#include "clock/virtual_clock.h"

namespace chronolink {

constexpr const char* kEdgeSchema = "chronolink.edge.v1";

// What every line of one agent run shares.
struct EdgeRecordContext {
  uint64_t session_epoch = 0;
  std::string timestamp_policy = "auto";  // or the forced kernel source
  std::optional<VirtualClockParams> test_clock;
  // Test mode with the test bed's node clock: its state file (the truth).
  std::string test_clock_state;
};

class EdgesJsonlWriter {
 public:
  EdgesJsonlWriter() = default;
  ~EdgesJsonlWriter();
  EdgesJsonlWriter(const EdgesJsonlWriter&) = delete;
  EdgesJsonlWriter& operator=(const EdgesJsonlWriter&) = delete;

  // Creates the directory if needed and opens <dir>/edges.jsonl for append.
  bool Open(const std::string& dir, const EdgeRecordContext& context, std::string* error);
  // `fit`: the fit clock x0 and the offsets are on (clock/fit_clock.h), and
  // the node's REALTIME at the window's centre; nullopt: REALTIME
  // (--fit-clock realtime).
  bool Write(const EdgeWindowRecord& r, const std::optional<FitWindowClock>& fit, std::string* error);
  void Close();

  const std::string& path() const { return path_; }
  uint64_t lines_written() const { return lines_; }

 private:
  std::FILE* file_ = nullptr;
  std::string path_;
  EdgeRecordContext context_;
  uint64_t lines_ = 0;
};

// The JSON text of one record (no newline); exposed for tests and tools.
std::string EdgeRecordToJson(const EdgeWindowRecord& r, const EdgeRecordContext& context,
                             const std::optional<FitWindowClock>& fit = std::nullopt);

}  // namespace chronolink
