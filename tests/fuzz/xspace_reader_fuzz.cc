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
// span the parsed model has. The wire-level align (xspace_wire_align.h),
// run on a plan from the model's span (or the scan's, where the model
// refuses the input), declines whatever the model refuses, and whatever it
// does not decline parses to the XSpace the model path writes (unknown
// fields included) with the same HostAlignment.
//
// The wire rewrite's output check (xspace_wire_check.h) walks any bytes: it
// accepts only what protobuf parses, and sums up what it accepts as the
// parsed message says.
//
// protobuf's own log lines (e.g. invalid UTF-8) are silenced: the reader's
// message is what a user sees.
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/util/field_comparator.h>
#include <google/protobuf/util/message_differencer.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <memory>
#include <vector>

#include "trace/correct/clock_correction.h"
#include "trace/correct/node_clock_map.h"
#include "trace/wire/xspace_wire_align.h"
#include "trace/wire/xspace_wire_check.h"

#include "trace/exporters/xspace_writer.h"
#include "trace/importers/xspace/xspace_reader.h"
#include "trace/model/host_span.h"
#include "trace/wire/xspace_span_scan.h"

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

// Node 1's map: a drifting clock solved every 2 s over 20 s from 2026, with
// a gap; far instants extrapolate (the plan's limits are lifted).
std::unique_ptr<chronolink::trace::HostClockMap>& Map() {
  static std::unique_ptr<chronolink::trace::HostClockMap> map;
  return map;
}

void BuildMap() {
  using namespace chronolink::trace;
  OffsetsInput input;
  input.reference = ClockReference{.is_mean = false, .node = 2};
  input.files = {"fuzz"};
  for (uint32_t node : {1u, 2u}) {
    for (int k = 0; k <= 10; ++k) {
      OffsetRecord r;
      r.node = node;
      r.t_ns = 1'795'320'926'000'000'000 + k * 2'000'000'000LL;
      r.reachable = node == 2 || k != 4;
      if (node == 1 && r.reachable) r.offset_ns = 1.5e6 + 40e-6 * k * 2e9, r.drift = 40e-6, r.uncertainty_ns = 25;
      input.records.push_back(r);
    }
  }
  auto correction = std::make_shared<ClusterCorrection>();
  std::string error;
  Check(ClusterCorrection::FromOffsets(input, correction.get(), &error));
  Map() = MakeNodeClockMap(correction, correction->Node(1));
}

bool SameDouble(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

bool SameStats(const chronolink::trace::HostAlignment& a, const chronolink::trace::HostAlignment& b) {
  return a.events == b.events && a.events_gap == b.events_gap && a.events_extrapolated == b.events_extrapolated &&
         a.max_beyond_span_ns == b.max_beyond_span_ns && SameDouble(a.uncertainty_min_ns, b.uncertainty_min_ns) &&
         SameDouble(a.uncertainty_max_ns, b.uncertainty_max_ns) &&
         SameDouble(a.uncertainty_mean_ns, b.uncertainty_mean_ns);
}

// `parsed`: the model of `bytes`, or nullptr where the reader refused them.
void CheckWireAlign(std::string_view bytes, const chronolink::trace::HostTrace* parsed) {
  using namespace chronolink::trace;
  HostSpanInstants span;
  std::string why;
  if (parsed != nullptr) {
    if (!parsed->line_base_known || !HostSpan(*parsed, &span, &why)) return;
  } else {
    const auto scanned = ScanXSpaceSpan(bytes, &why);
    if (!scanned) return;
    span = scanned->span;
  }
  AlignOptions options;
  options.max_extrapolation_ns = INT64_MAX;
  options.max_bound_ns = INFINITY;
  options.counters_line = bytes.size() % 2 == 0;
  AlignResult plan;
  if (!PlanAlignment({"h"}, {span}, {Map().get()}, options, &plan, &why)) return;
  AlignResult wire = plan;
  static WireOutput out;
  std::vector<std::string> notes;
  const bool wire_ok = WireAlignHost(bytes, "h.xplane.pb", "h", 0, *Map(), options, &wire, &out, &notes, &why);
  // On a plan whose last instant is only guessed (a predicted plan's case,
  // here guessed as badly as can be): the same answer and the same bytes.
  AlignResult guessed;
  if (PlanAlignment({"h"}, {HostSpanInstants{span.first, span.first}}, {Map().get()}, options, &guessed, &why)) {
    static WireOutput predicted_out;
    const auto outcome = WireAlignPredictedHost(bytes, "h.xplane.pb", "h", 0, *Map(), options, &guessed,
                                                &predicted_out, &notes, &why);
    Check(outcome != WireAlignOutcome::kMispredicted);
    Check((outcome == WireAlignOutcome::kAligned) == wire_ok);
    if (wire_ok) {
      Check(predicted_out.bytes() == out.bytes());
      Check(SameStats(guessed.hosts[0], wire.hosts[0]) && guessed.hosts[0].last_host == wire.hosts[0].last_host);
    }
  }
  if (parsed == nullptr) {
    Check(!wire_ok);
    return;
  }
  HostTrace model;
  std::string error;
  Check(ParseXSpace(bytes, &model, &error));
  model.host = "h";
  AlignResult model_result = plan;
  if (!AlignPlannedHost(0, &model, *Map(), options, &model_result, &error)) {
    Check(!wire_ok);
    return;
  }
  if (!wire_ok) return;
  chronolink::xspace::XSpace wire_space;
  Check(wire_space.ParseFromArray(out.bytes().data(), static_cast<int>(out.bytes().size())));
  std::string model_bytes;
  Check(SerializeXSpace(*model.space, &model_bytes, &error));
  chronolink::xspace::XSpace model_space;
  Check(model_space.ParseFromString(model_bytes));
  google::protobuf::util::DefaultFieldComparator comparator;
  comparator.set_treat_nan_as_equal(true);  // a NaN stat is the same NaN on both paths
  google::protobuf::util::MessageDifferencer differ;
  differ.set_field_comparator(&comparator);
  Check(differ.Compare(model_space, wire_space));
  Check(SameStats(model_result.hosts[0], wire.hosts[0]));
}

// The output check's walk against protobuf's parser, on the input itself.
void CheckWireWalk(std::string_view bytes) {
  using namespace chronolink::trace;
  WireSpaceSummary summary;
  std::string why;
  if (!SummarizeXSpaceWire(bytes, &summary, &why)) return;
  chronolink::xspace::XSpace parsed;
  Check(parsed.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())));
  WireSummaryBuilder meant;
  for (const auto& plane : parsed.planes()) meant.AddPlane(plane);
  Check(summary == meant.summary());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  BuildMap();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using chronolink::trace::HostTrace;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  CheckWireWalk(bytes);
  HostTrace trace;
  std::string error;
  if (!chronolink::trace::ParseXSpace(bytes, &trace, &error)) {
    Check(!error.empty() && error.find('\n') == std::string::npos);
    Check(trace.space->planes_size() == 0 && trace.space->hostnames_size() == 0);
    CheckWireAlign(bytes, nullptr);
    return 0;
  }
  CheckSpanScan(bytes, trace);
  CheckWireAlign(bytes, &trace);
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
