// The two forms of the leader's offsets.jsonl (docs/formats.md): a line per
// node per instant, or one line per instant with a column per field. Here,
// below both the configuration that chooses it and the writer that uses it.
#pragma once

#include <cstddef>
#include <string>

namespace chronolink {

// kAuto writes rows below kOffsetColumnsFromNodes nodes (a person reads
// them) and columns from there, where rows cost three times the storage.
enum class OffsetsForm { kRows, kColumns, kAuto };
inline constexpr size_t kOffsetColumnsFromNodes = 1000;

// "rows", "columns", "auto"; false for anything else.
inline bool ParseOffsetsForm(const std::string& name, OffsetsForm* form) {
  if (name == "rows") *form = OffsetsForm::kRows;
  else if (name == "columns") *form = OffsetsForm::kColumns;
  else if (name == "auto") *form = OffsetsForm::kAuto;
  else return false;
  return true;
}

inline const char* OffsetsFormName(OffsetsForm form) {
  switch (form) {
    case OffsetsForm::kRows: return "rows";
    case OffsetsForm::kColumns: return "columns";
    case OffsetsForm::kAuto: break;
  }
  return "auto";
}

// Whether a snapshot of `nodes` solutions is written as columns.
inline bool OffsetsAsColumns(OffsetsForm form, size_t nodes) {
  return form == OffsetsForm::kColumns || (form == OffsetsForm::kAuto && nodes >= kOffsetColumnsFromNodes);
}

}  // namespace chronolink
