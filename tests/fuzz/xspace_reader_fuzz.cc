// libFuzzer target for the XSpace reader (trace/importers/xspace/).
//
// Each input goes through ParseXSpace, the same code ReadXSpaceFile runs
// after opening a file: the protobuf parse, the wire diagnosis of a refused
// message, the line-base rule and the host name.
// Invariants: no crash or sanitizer report; a refusal leaves an empty trace
// and a one-line message; an accepted input serializes (deterministically),
// parses again, and serializes to the same bytes again (a read/write round
// trip is a fixed point, unknown fields included). The wire-level span scan
// (xspace_span_scan.h) either declines or finds exactly the line base and
// span the parsed model has.
//
// protobuf's own log lines (e.g. invalid UTF-8) are silenced: the reader's
// message is what a user sees.
#include <google/protobuf/stubs/logging.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "trace/exporters/xspace_writer.h"
#include "trace/importers/xspace/xspace_reader.h"
#include "trace/importers/xspace/xspace_span_scan.h"
#include "trace/model/host_span.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

// A span the scan returns must be the model's.
void CheckSpanScan(std::string_view bytes, const chronolink::trace::HostTrace& trace) {
  std::string why;
  const auto scanned = chronolink::trace::ScanXSpaceSpan(bytes, &why);
  if (!scanned) return;
  Check(trace.line_base_known && scanned->base.base_ns == trace.line_base_ns);
  chronolink::trace::HostSpanInstants span;
  Check(chronolink::trace::HostSpan(trace, &span, &why));
  Check(span == scanned->span);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using chronolink::trace::HostTrace;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  HostTrace trace;
  std::string error;
  if (!chronolink::trace::ParseXSpace(bytes, &trace, &error)) {
    Check(!error.empty() && error.find('\n') == std::string::npos);
    Check(trace.space->planes_size() == 0 && trace.space->hostnames_size() == 0);
    return 0;
  }
  CheckSpanScan(bytes, trace);
  std::string first;
  Check(chronolink::trace::SerializeXSpace(*trace.space, &first, &error));
  HostTrace again;
  Check(chronolink::trace::ParseXSpace(first, &again, &error) || first.empty());
  if (first.empty()) return 0;  // an input of only empty fields serializes to nothing
  std::string second;
  Check(chronolink::trace::SerializeXSpace(*again.space, &second, &error));
  Check(first == second);
  Check(again.host == trace.host && again.line_base_ns == trace.line_base_ns &&
        again.line_base_known == trace.line_base_known);
  return 0;
}
