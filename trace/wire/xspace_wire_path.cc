#include "trace/wire/xspace_wire_path.h"

#include <limits>

#include "common/quoted_text.h"
#include "trace/exporters/xspace_writer.h"
#include "trace/importers/xspace/xspace_reader.h"

namespace chronolink::trace {

std::optional<WireHostSpan> XSpaceWirePath::SpanOf(const std::filesystem::path& path, bool predict,
                                                   std::string* why) {
  if (predict) {
    if (const auto guess = PredictXSpaceFileSpan(path, why)) return WireHostSpan{guess->span, true};
  }
  if (const auto scanned = ScanXSpaceFileSpan(path, &scan_buffer_, why)) return WireHostSpan{scanned->span, false};
  return std::nullopt;
}

WireAlignOutcome XSpaceWirePath::AlignFile(const std::filesystem::path& path, size_t index, bool predicted,
                                           const HostClockMap& map, const AlignOptions& options,
                                           AlignResult* result, const std::filesystem::path& out,
                                           std::vector<std::string>* notes, const PhaseEnd& phase_end,
                                           std::string* why, std::string* error) {
  why->clear();
  error->clear();
  // Mapped, not copied: a file over 2 GiB is the model's (protobuf's limit).
  const bool mapped = input_.Open(path, static_cast<size_t>(std::numeric_limits<int32_t>::max()), why);
  phase_end("read");
  const std::string host = HostFromXSpaceFileName(path);
  auto outcome = WireAlignOutcome::kDeclined;
  if (mapped) {
    const AlignResult before = *result;
    const size_t notes_before = notes->size();
    const std::string_view bytes = input_.bytes();
    outcome = predicted ? WireAlignPredictedHost(bytes, path.string(), host, index, map, options, result, &output_,
                                                 notes, why)
                        : (WireAlignHost(bytes, path.string(), host, index, map, options, result, &output_, notes,
                                         why)
                               ? WireAlignOutcome::kAligned
                               : WireAlignOutcome::kDeclined);
    if (input_.torn()) {  // what was read is not the file: the model reads it again and says what it is
      *result = before;
      notes->resize(notes_before);
      outcome = WireAlignOutcome::kDeclined;
      *why = "the file shrank while it was read";
    }
    input_.Close();
  }
  phase_end("align");
  if (why->starts_with(kWireCheckFailed)) {
    notes->push_back("host " + ShownName(host) + ": the wire-level rewrite " + *why +
                     "; aligned through the model instead (please report this with the input file)");
  }
  if (outcome != WireAlignOutcome::kAligned) return outcome;
  if (!WriteXSpaceBytesFile(output_.bytes(), out, error)) return outcome;
  phase_end("write");
  return outcome;
}

}  // namespace chronolink::trace
