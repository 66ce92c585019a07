// One host's XSpace file aligned on the plan (trace_aligner.h) straight from
// its wire bytes, without building the model: every byte is copied through
// except each line's timestamp_ns and duration_ps and each timed event's
// offset_ps and duration_ps, re-encoded with every enclosing length
// recomputed. The small planes alignment edits go through the model on
// their own: the first `Task Environment` plane (profile_start/stop_time,
// SetSessionOnPlan), the `/host:CPU` plane's metadata and `_counters_` line
// (AddCountersLine on the plane without its lines), and the record plane
// (RecordCorrectionPlane), each parsed alone, edited by the same functions
// as the model path, serialised and spliced in. Events are mapped through
// MapCursor: Map's values exactly, without a search per event.
//
// The output parses to the same XSpace as the model path writes (for a file
// in protobuf's canonical order, such as every file this project writes,
// the same bytes), and the host's HostAlignment is the same to the bit.
//
// Before it returns an output it walks it as protobuf parses it and checks
// that it says what was meant (xspace_wire_check.h); where not, it declines.
//
// It never guesses. Anything it does not decide exactly as parsing, the
// model path and serialising would — annotate_events, groups, malformed or
// truncated bytes, a varint or length protobuf would read otherwise,
// invalid UTF-8 in a string field, a plane's non-line fields that do not
// parse, an event's time fields twice or both oneof members, an instant or
// an offset that overflows, a record plane or `_counters_` line already
// there, a span other than the planned one, a bound over the limit, no
// file name to name the host — declines with the reason and leaves the
// result untouched; the caller then aligns the host through the model,
// which reports bad files as they deserve. tests/fuzz/xspace_reader_fuzz.cc
// checks that what it does not decline equals the model path.
//
// Not thread-safe; one WireAlignBuffers per thread.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "trace/align/trace_aligner.h"
#include "trace/correct/host_clock_map.h"

namespace chronolink::trace {

// The output bytes, kept to be reused by the next host (no zeroing, no
// reallocation once large enough).
class WireOutput {
 public:
  std::string_view bytes() const { return {data_.get(), size_}; }
  void Clear() { size_ = 0; }
  // Room for `extra` more bytes past size(); returns the write position.
  char* Reserve(size_t extra) {
    if (size_ + extra > capacity_) Grow(size_ + extra);
    return data_.get() + size_;
  }
  char* data() { return data_.get(); }
  size_t size() const { return size_; }
  void Resize(size_t size) { size_ = size; }

 private:
  void Grow(size_t needed);
  struct AlignedFree {
    void operator()(char* p) const;
  };
  std::unique_ptr<char[], AlignedFree> data_;  // 4 KiB aligned: written with O_DIRECT (xspace_writer.h)
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// The start of the reason a host is declined with when the rewrite's own
// output failed its check (xspace_wire_check.h): a bug here, never the
// input's fault, so callers say it whatever their verbosity.
inline constexpr std::string_view kWireCheckFailed = "output failed its check";

// Aligns the host `file_host` (its file's name rule; empty declines) whose
// file bytes are `bytes`, as plan entry `index`: true with the aligned file
// in *out, result->hosts[index] filled and the reader's warnings for the
// file (named `file_name`) appended to *notes; false with *why when it
// declines (result and notes untouched).
bool WireAlignHost(std::string_view bytes, std::string_view file_name, const std::string& file_host,
                   size_t index, const HostClockMap& map, const AlignOptions& options, AlignResult* result,
                   WireOutput* out, std::vector<std::string>* notes, std::string* why);

// The same on a plan whose span for this host was predicted
// (PredictXSpaceFileSpan): every event is decoded anyway, so the rewrite
// checks the prediction as it goes. The first instant must be the
// predicted one, since the common origin came from it: otherwise
// kMispredicted, and the caller plans exactly (ScanXSpaceSpan) and starts
// the run again. The last instant (only guessed) is the one found: the
// Task Environment's session stop and the `_counters_` line, written on
// the guess, are patched in place, or, where their size changed, the host
// is rewritten once more on the found span. On kAligned result->hosts[index]
// holds the found span, as an exact plan would have had it.
enum class WireAlignOutcome { kAligned, kDeclined, kMispredicted };
WireAlignOutcome WireAlignPredictedHost(std::string_view bytes, std::string_view file_name,
                                        const std::string& file_host, size_t index, const HostClockMap& map,
                                        const AlignOptions& options, AlignResult* result, WireOutput* out,
                                        std::vector<std::string>* notes, std::string* why);

}  // namespace chronolink::trace
