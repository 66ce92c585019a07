#include "tests/support/align_paths_check.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/field_comparator.h>
#include <google/protobuf/util/message_differencer.h>
#include <google/protobuf/wire_format_lite.h>

#include <cmath>
#include <vector>

#include "trace/correct/node_clock_map.h"
#include "trace/exporters/xspace_writer.h"
#include "trace/importers/xspace/xspace_reader.h"
#include "trace/model/host_span.h"
#include "trace/wire/xspace_span_scan.h"
#include "trace/wire/xspace_wire_align.h"
#include "trace/wire/xspace_wire_check.h"

namespace chronolink::trace::testing {
namespace {

using google::protobuf::io::CodedInputStream;
using google::protobuf::internal::WireFormatLite;

constexpr int64_t kPeriodNs = 2'000'000'000;
constexpr std::array<uint64_t, 3> kWidthBoundaries = {uint64_t{1} << 7, uint64_t{1} << 14, uint64_t{1} << 21};

// ---- Lengths of planes and lines, read with protobuf's own stream.

struct Lengths {
  std::vector<uint64_t> planes;
  std::vector<std::vector<uint64_t>> lines;  // per plane
};

bool ReadLengths(std::string_view bytes, Lengths* out) {
  CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()), static_cast<int>(bytes.size()));
  for (uint32_t tag = in.ReadTag(); tag != 0; tag = in.ReadTag()) {
    if (tag != (1 << 3 | 2)) {
      if (!WireFormatLite::SkipField(&in, tag)) return false;
      continue;
    }
    uint32_t length = 0;
    if (!in.ReadVarint32(&length)) return false;
    out->planes.push_back(length);
    out->lines.emplace_back();
    const auto limit = in.PushLimit(static_cast<int>(length));
    for (uint32_t t = in.ReadTag(); t != 0; t = in.ReadTag()) {
      uint32_t line = 0;
      if (t == (3 << 3 | 2)) {
        if (!in.ReadVarint32(&line) || !in.Skip(static_cast<int>(line))) return false;
        out->lines.back().push_back(line);
      } else if (!WireFormatLite::SkipField(&in, t)) {
        return false;
      }
    }
    in.PopLimit(limit);
  }
  return true;
}

void CountCrossing(uint64_t before, uint64_t after, std::array<std::array<int64_t, 2>, 3>* counts) {
  for (size_t b = 0; b < kWidthBoundaries.size(); ++b) {
    const uint64_t edge = kWidthBoundaries[b];
    if (before < edge && after >= edge) ++(*counts)[b][0];
    if (after < edge && before >= edge) ++(*counts)[b][1];
  }
}

// Planes and lines of the input against the rewrite's output (same order;
// the output's extra plane and line come after).
void CountCrossings(std::string_view in, std::string_view out, AlignPathsTally* tally) {
  Lengths a, b;
  if (!ReadLengths(in, &a) || !ReadLengths(out, &b)) return;
  for (size_t p = 0; p < a.planes.size() && p < b.planes.size(); ++p) {
    CountCrossing(a.planes[p], b.planes[p], &tally->width_crossings[1]);
    for (size_t l = 0; l < a.lines[p].size() && l < b.lines[p].size(); ++l) {
      CountCrossing(a.lines[p][l], b.lines[p][l], &tally->width_crossings[0]);
    }
  }
}

// ---- Comparisons.

// Equal messages serialise to equal bytes (deterministically: maps sorted,
// unknown fields as stored), which is quick; where the bytes differ the
// differencer decides (a NaN's other bits) and says where.
bool SameXSpace(const xspace::XSpace& a, const xspace::XSpace& b, std::string* report) {
  if (CanonicalBytes(a) == CanonicalBytes(b)) return true;
  google::protobuf::util::DefaultFieldComparator comparator;
  comparator.set_treat_nan_as_equal(true);  // a NaN stat is the same NaN on both paths
  google::protobuf::util::MessageDifferencer differ;
  differ.set_field_comparator(&comparator);
  differ.ReportDifferencesToString(report);
  return differ.Compare(a, b);
}

bool SameDouble(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

bool SameStats(const HostAlignment& a, const HostAlignment& b) {
  return a.events == b.events && a.events_gap == b.events_gap && a.events_extrapolated == b.events_extrapolated &&
         a.max_beyond_span_ns == b.max_beyond_span_ns && SameDouble(a.uncertainty_min_ns, b.uncertainty_min_ns) &&
         SameDouble(a.uncertainty_max_ns, b.uncertainty_max_ns) &&
         SameDouble(a.uncertainty_mean_ns, b.uncertainty_mean_ns) &&
         SameDouble(a.correction_first_ns, b.correction_first_ns) &&
         SameDouble(a.correction_last_ns, b.correction_last_ns) && a.first_host == b.first_host &&
         a.last_host == b.last_host;
}

// An output as any reader gets it: protobuf parses it, so does ParseXSpace.
bool ParseOutput(std::string_view bytes, const char* path, xspace::XSpace* parsed, AlignPathsTally* tally,
                 std::string* failure) {
  if (!parsed->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    *failure = std::string(path) + ": the output does not parse with protobuf";
    return false;
  }
  HostTrace reread;
  std::string error;
  if (!ParseXSpace(bytes, &reread, &error)) {
    *failure = std::string(path) + ": the output does not read back: " + error;
    return false;
  }
  ++tally->outputs_parsed;
  return true;
}

// ---- The paths.

// The refusals a valid input may get: an event offset that, re-based on its
// line's mapped start, passes int64 picoseconds, or a line duration that
// does once mapped (only for a line whose events or duration reach ~106
// days from its own timestamp: int64 ps is 106.75 days), or an empty line
// whose timestamp, re-based on the common origin, passes int64 ns.
constexpr std::string_view kUnrepresentable[] = {"overflows int64 picoseconds",
                                                 "the line's duration cannot be mapped",
                                                 "the empty line's start cannot be re-based"};

bool Unrepresentable(const std::string& error) {
  for (const std::string_view reason : kUnrepresentable) {
    if (error.find(reason) != std::string::npos) return true;
  }
  return false;
}

struct ModelPath {
  bool unrepresentable = false;
  AlignResult plan;
  AlignResult result;
  std::string bytes;
  xspace::XSpace parsed;
};

// The rewrite's output check reads any valid input as protobuf does: it
// accepts it (groups nested past its depth limit aside) and sums it up as
// the parsed message says.
bool CheckWalkReadsAsProtobuf(std::string_view bytes, std::string* failure) {
  xspace::XSpace parsed;
  if (!parsed.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    *failure = "a generated input does not parse with protobuf";
    return false;
  }
  WireSpaceSummary summary;
  std::string why;
  if (!SummarizeXSpaceWire(bytes, &summary, &why)) {
    *failure = "the output check's walk refused a valid input: " + why;
    return false;
  }
  WireSummaryBuilder meant;
  for (const auto& plane : parsed.planes()) meant.AddPlane(plane);
  if (!(summary == meant.summary())) {
    *failure = "the output check's walk read a valid input otherwise than protobuf";
    return false;
  }
  return true;
}

bool RunModelPath(std::string_view bytes, const HostClockMap& map, const AlignOptions& options, ModelPath* model,
                  AlignPathsTally* tally, std::string* failure) {
  HostTrace host;
  HostSpanInstants span;
  std::string error;
  if (!ParseXSpace(bytes, &host, &error) || !CheckAlignable(host, &error) || !HostSpan(host, &span, &error) ||
      !PlanAlignment({"h"}, {span}, {&map}, options, &model->plan, &error)) {
    *failure = "the model path refused a valid input: " + error;
    return false;
  }
  if (const auto scanned = ScanXSpaceSpan(bytes, &error); scanned && !(scanned->span == span)) {
    *failure = "the wire-level span scan found another span than the model";
    return false;
  }
  host.host = "h";
  model->result = model->plan;
  if (!AlignPlannedHost(0, &host, map, options, &model->result, &error)) {
    model->unrepresentable = Unrepresentable(error);
    if (!model->unrepresentable) *failure = "the model path refused a valid input: " + error;
    return false;
  }
  if (!SerializeXSpace(*host.space, &model->bytes, &error)) {
    *failure = "the model path's output does not serialise: " + error;
    return false;
  }
  return ParseOutput(model->bytes, "model path", &model->parsed, tally, failure);
}

// A host the model refuses as unrepresentable: the hold-all path refuses
// it too, and the rewrite declines it.
bool OtherPathsRefuseToo(std::string_view bytes, const HostClockMap& map, const AlignOptions& options,
                         const ModelPath& model, std::string* failure) {
  HostTrace host;
  AlignResult held;
  std::string error;
  if (ParseXSpace(bytes, &host, &error) && AlignHosts({&host}, {&map}, options, &held, &error)) {
    *failure = "the hold-all path aligned a host the model refused as unrepresentable";
    return false;
  }
  AlignResult result = model.plan;
  WireOutput out;
  std::vector<std::string> notes;
  std::string why;
  if (WireAlignHost(bytes, "h.xplane.pb", "h", 0, map, options, &result, &out, &notes, &why)) {
    *failure = "the wire rewrite aligned a host the model refused as unrepresentable";
    return false;
  }
  return true;
}

bool RunHoldAllPath(std::string_view bytes, const HostClockMap& map, const AlignOptions& options,
                    const ModelPath& model, AlignPathsTally* tally, std::string* failure) {
  HostTrace host;
  std::string error, out, report;
  AlignResult result;
  const bool parsed_ok = ParseXSpace(bytes, &host, &error);
  host.host = "h";  // as the model path names it (the file's name rule)
  if (!parsed_ok || !AlignHosts({&host}, {&map}, options, &result, &error) ||
      !SerializeXSpace(*host.space, &out, &error)) {
    *failure = "the hold-all path refused what the model path aligned: " + error;
    return false;
  }
  xspace::XSpace parsed;
  if (!ParseOutput(out, "hold-all path", &parsed, tally, failure)) return false;
  if (result.origin_ns != model.result.origin_ns || !SameStats(result.hosts[0], model.result.hosts[0]) ||
      !SameXSpace(model.parsed, parsed, &report)) {
    *failure = "the hold-all path differs from the model path: " + report;
    return false;
  }
  return true;
}

bool RunWirePaths(std::string_view bytes, const HostClockMap& map, const AlignOptions& options,
                  const ModelPath& model, AlignPathsTally* tally, std::string* failure) {
  AlignResult exact = model.plan;
  WireOutput out;
  std::vector<std::string> notes;
  std::string why, report;
  const bool aligned = WireAlignHost(bytes, "h.xplane.pb", "h", 0, map, options, &exact, &out, &notes, &why);
  // The predicted plan's case: the last instant guessed at the first.
  AlignResult guessed;
  std::string error;
  const HostSpanInstants guess{model.plan.hosts[0].first_host, model.plan.hosts[0].first_host};
  if (!PlanAlignment({"h"}, {guess}, {&map}, options, &guessed, &error)) {
    *failure = "a guessed plan does not plan: " + error;
    return false;
  }
  WireOutput predicted_out;
  std::string predicted_why;
  const auto outcome = WireAlignPredictedHost(bytes, "h.xplane.pb", "h", 0, map, options, &guessed, &predicted_out,
                                              &notes, &predicted_why);
  if (outcome == WireAlignOutcome::kMispredicted || (outcome == WireAlignOutcome::kAligned) != aligned) {
    *failure = "the predicted plan's rewrite disagrees with the exact one's: " + why + " / " + predicted_why;
    return false;
  }
  if (!aligned) {
    if (why.empty() || why.starts_with(kWireCheckFailed)) {
      *failure = "the wire rewrite declined without a reason, or failed its own check: " + why;
      return false;
    }
    ++tally->wire_declined;
    ++tally->decline_reasons[why];
    return true;
  }
  ++tally->wire_aligned;
  xspace::XSpace parsed;
  if (!ParseOutput(out.bytes(), "wire path", &parsed, tally, failure)) return false;
  if (!SameXSpace(model.parsed, parsed, &report) || !SameStats(exact.hosts[0], model.result.hosts[0])) {
    *failure = "the wire path differs from the model path: " + report;
    return false;
  }
  if (predicted_out.bytes() != out.bytes() || !SameStats(guessed.hosts[0], exact.hosts[0])) {
    *failure = "the predicted plan's rewrite wrote other bytes than the exact one's";
    return false;
  }
  ++tally->outputs_parsed;  // the predicted output: the same bytes as one parsed above
  CountCrossings(bytes, out.bytes(), tally);
  return true;
}

}  // namespace

std::string CanonicalBytes(const xspace::XSpace& space) {
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  space.SerializeToCodedStream(&coded);
  coded.Trim();
  return out;
}

TestClockMap MakeTestClockMap(int64_t from_ns, int64_t to_ns, uint64_t variant) {
  static constexpr double kOffsetsNs[] = {1.234567e6, -50.5e6, 12'345.678, -3.2e6, 0.0};
  static constexpr double kDrifts[] = {37e-6, -100e-6, 100e-6, -3e-6, 0.0};
  const double offset = kOffsetsNs[variant % 5];
  const double drift = kDrifts[(variant / 5) % 5];
  const bool gap = (variant / 25) % 3 == 0;
  OffsetsInput input;
  input.reference = ClockReference{.is_mean = false, .node = 2};
  input.files = {"generated"};
  const int64_t first = from_ns / kPeriodNs - 1, last = to_ns / kPeriodNs + 1;
  for (uint32_t node : {1u, 2u}) {
    for (int64_t k = first; k <= last; ++k) {
      OffsetRecord r;
      r.node = node;
      r.t_ns = k * kPeriodNs;
      r.reachable = node == 2 || !gap || (k - first) % 7 != 3;
      if (node == 1 && r.reachable) {
        r.offset_ns = offset + drift * static_cast<double>((k - first) * kPeriodNs) + ((k % 3) - 1) * 7.25;
        r.drift = drift + static_cast<double>(k % 2) * 1e-8;
        r.uncertainty_ns = 20 + static_cast<double>(k % 5);
      }
      input.records.push_back(r);
    }
  }
  TestClockMap m;
  m.cluster = std::make_shared<ClusterCorrection>();
  std::string error;
  if (!ClusterCorrection::FromOffsets(input, m.cluster.get(), &error)) return m;
  m.map = MakeNodeClockMap(m.cluster, m.cluster->Node(1));
  return m;
}

void AlignPathsTally::Add(const AlignPathsTally& other) {
  hosts += other.hosts;
  unrepresentable += other.unrepresentable;
  outputs_parsed += other.outputs_parsed;
  wire_aligned += other.wire_aligned;
  wire_declined += other.wire_declined;
  for (const auto& [reason, n] : other.decline_reasons) decline_reasons[reason] += n;
  for (size_t l = 0; l < 2; ++l) {
    for (size_t b = 0; b < 3; ++b) {
      for (size_t d = 0; d < 2; ++d) width_crossings[l][b][d] += other.width_crossings[l][b][d];
    }
  }
}

std::string AlignPathsTally::Summary() const {
  std::string s = std::to_string(hosts) + " hosts (" + std::to_string(unrepresentable) +
                  " refused as unrepresentable), " + std::to_string(outputs_parsed) +
                  " outputs parsed (protobuf and ParseXSpace), wire rewrite " + std::to_string(wire_aligned) +
                  " aligned / " + std::to_string(wire_declined) + " declined";
  static constexpr const char* kLevel[] = {"lines", "planes"};
  static constexpr const char* kEdge[] = {"128", "16384", "2097152"};
  for (size_t l = 0; l < 2; ++l) {
    s += "; " + std::string(kLevel[l]) + " across";
    for (size_t b = 0; b < 3; ++b) {
      s += " " + std::string(kEdge[b]) + " up " + std::to_string(width_crossings[l][b][0]) + " down " +
           std::to_string(width_crossings[l][b][1]);
    }
  }
  for (const auto& [reason, n] : decline_reasons) s += "\n  declined " + std::to_string(n) + "x: " + reason;
  return s;
}

bool CheckAlignPaths(std::string_view bytes, const HostClockMap& map, const AlignOptions& options,
                     AlignPathsTally* tally, std::string* failure) {
  ++tally->hosts;
  if (!CheckWalkReadsAsProtobuf(bytes, failure)) return false;
  ModelPath model;
  if (!RunModelPath(bytes, map, options, &model, tally, failure)) {
    if (!model.unrepresentable) return false;
    ++tally->unrepresentable;
    return OtherPathsRefuseToo(bytes, map, options, model, failure);
  }
  return RunHoldAllPath(bytes, map, options, model, tally, failure) &&
         RunWirePaths(bytes, map, options, model, tally, failure);
}

}  // namespace chronolink::trace::testing
