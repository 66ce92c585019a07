// Shared pieces of the rocprof readers (rocprof_record.h).
#include "collector/importers/rocprof_record.h"

#include <charconv>
#include <limits>

namespace chronolink::collector {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool ParseDigits(std::string_view text, uint64_t* out) {
  if (text.empty()) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;  // no sign, no exponent, no fraction
  }
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::string_view RocprofFormatName(RocprofFormat f) {
  switch (f) {
    case RocprofFormat::kV1Csv:
      return "rocprof results.csv";
    case RocprofFormat::kV2Csv:
      return "rocprofv2 kernel trace CSV";
    case RocprofFormat::kV3KernelCsv:
      return "rocprofv3 kernel_trace.csv";
    case RocprofFormat::kV3MemoryCopyCsv:
      return "rocprofv3 memory_copy_trace.csv";
    case RocprofFormat::kV3Json:
      return "rocprofv3 JSON";
  }
  return "rocprof";
}

void RocprofReadResult::Refuse(uint64_t line, const std::string& why) {
  ++bad_rows;
  if (bad_line_numbers.size() < kMaxListedBadRows) bad_line_numbers.push_back(line);
  if (first_bad_reason.empty()) first_bad_reason = unit + " " + std::to_string(line) + ": " + why;
}

bool RocprofReadResult::Acceptable(const RocprofReadOptions& o, std::string* error) const {
  if (bad_rows < o.min_bad_to_fail ||
      static_cast<double>(bad_rows) <= o.max_bad_fraction * static_cast<double>(rows)) {
    return true;
  }
  *error = "mostly not " + std::string(RocprofFormatName(format)) + " rows: " + std::to_string(bad_rows) +
           " of " + std::to_string(rows) + " refused (first at " + first_bad_reason + ")";
  return false;
}

bool ParseTimestampNs(std::string_view text, std::string_view column, int64_t* out, std::string* why) {
  const std::string_view t = Trim(text);
  uint64_t v = 0;
  if (!ParseDigits(t, &v)) {
    *why = std::string(column) + " is not a whole number of ns ('" + std::string(t.substr(0, 40)) + "')";
    return false;
  }
  if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    *why = std::string(column) + " " + std::string(t) + " is beyond int64 ns";
    return false;
  }
  *out = static_cast<int64_t>(v);
  return true;
}

bool ParseUnsigned(std::string_view text, std::string_view column, uint64_t* out, std::string* why) {
  const std::string_view t = Trim(text);
  if (t.empty()) {
    *out = 0;
    return true;
  }
  if (!ParseDigits(t, out)) {
    *why = std::string(column) + " is not an unsigned integer ('" + std::string(t.substr(0, 40)) + "')";
    return false;
  }
  return true;
}

bool ParseAgentId(std::string_view text, uint64_t* out, std::string* why) {
  std::string_view t = Trim(text);
  if (t.substr(0, 6) == "Agent ") t = Trim(t.substr(6));
  if (!ParseDigits(t, out)) {
    *why = "agent id '" + std::string(Trim(text).substr(0, 40)) + "' is neither N nor 'Agent N'";
    return false;
  }
  return true;
}

bool CheckSpan(int64_t start_ns, int64_t end_ns, std::string* why) {
  if (start_ns == 0 || end_ns == 0) {
    *why = "a zero start or end timestamp (the profiler did not time it)";
    return false;
  }
  if (end_ns < start_ns) {
    *why = "ends before it starts (" + std::to_string(end_ns) + " < " + std::to_string(start_ns) + ")";
    return false;
  }
  return true;
}

}  // namespace chronolink::collector
