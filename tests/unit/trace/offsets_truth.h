// Test helper: a cluster of virtual clocks with exactly known truth (the
// agent's test-mode clock, clock/virtual_clock.h, and
// tools/testbed/truth.py: v(t) = t + offset_ns + rate·(t − t0), t a shared
// true clock) and the offsets.jsonl lines a solver would write for it.
// Instants are handled relative to t0 in long double (64-bit mantissa:
// sub-femtosecond over hours), never as epoch values in a double.
#pragma once

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <map>
#include <string>

#include "trace/model/trace_time.h"

namespace chronolink::trace::testing {

struct VClock {
  int64_t offset_ns = 0;
  double drift_ppm = 0;
  long double rate() const { return static_cast<long double>(drift_ppm) * 1e-6L; }
};

class TruthCluster {
 public:
  // `reference`: a node id, or 0 for the mean of all nodes.
  TruthCluster(int64_t t0_ns, std::map<uint32_t, VClock> clocks, uint32_t reference)
      : t0_(t0_ns), clocks_(std::move(clocks)), reference_id_(reference) {
    if (reference != 0) {
      reference_ = clocks_.at(reference);
      ref_offset_ = reference_.offset_ns;
      ref_rate_ = reference_.rate();
    } else {
      for (const auto& [id, c] : clocks_) {
        ref_offset_ += c.offset_ns;
        ref_rate_ += c.rate();
      }
      ref_offset_ /= clocks_.size();
      ref_rate_ /= clocks_.size();
    }
  }

  int64_t t0() const { return t0_; }

  // node − reference at reference instant T, ns.
  long double OffsetAt(uint32_t node, int64_t t_ns) const {
    const VClock& c = clocks_.at(node);
    const long double rel = static_cast<long double>(t_ns - t0_);  // reference reading − t0
    const long double u = (rel - ref_offset_) / (1 + ref_rate_);   // true time − t0
    return u + c.offset_ns + c.rate() * u - rel;
  }

  // d(node − reference)/d(reference).
  double Drift(uint32_t node) const {
    return static_cast<double>((clocks_.at(node).rate() - ref_rate_) / (1 + ref_rate_));
  }

  // The node's reading at reference instant T (as a solver's knot would place it).
  TraceInstant NodeReadingAt(uint32_t node, int64_t t_ns, int64_t plus_ps = 0) const {
    const long double x = static_cast<long double>(t_ns - t0_) + OffsetAt(node, t_ns);
    const long double whole = std::floor(x);
    TraceInstant at{t0_ + static_cast<int64_t>(whole),
                    static_cast<int32_t>(std::llround((x - whole) * 1000))};
    if (at.ps == 1000) at = {at.ns + 1, 0};
    return *AddPs(at, plus_ps);
  }

  // corrected − truth for node reading x, ns.
  long double ErrorNs(uint32_t node, const TraceInstant& x, const TraceInstant& corrected) const {
    const VClock& c = clocks_.at(node);
    const long double x_rel = static_cast<long double>(x.ns - t0_) + x.ps / 1000.0L;
    const long double u = (x_rel - c.offset_ns) / (1 + c.rate());
    const long double truth_rel = u + ref_offset_ + ref_rate_ * u;
    const long double corrected_rel = static_cast<long double>(corrected.ns - t0_) + corrected.ps / 1000.0L;
    return corrected_rel - truth_rel;
  }

  // One offsets.jsonl line as the leader writes it (agent/export/offsets_jsonl_writer.cc).
  nlohmann::ordered_json Line(uint32_t node, int64_t t_ns, double sigma_ns = 40.0, double offset_noise_ns = 0,
                              double drift_noise = 0) const {
    nlohmann::ordered_json j;
    j["schema"] = "chronolink.offset.v1";
    j["node"] = node;
    j["reference"] = reference_id_ == 0 ? nlohmann::ordered_json("mean") : nlohmann::ordered_json(reference_id_);
    j["t_ns"] = t_ns;
    const bool is_ref = node == reference_id_;
    j["offset_ns"] = static_cast<double>(OffsetAt(node, t_ns)) + offset_noise_ns;
    j["drift"] = Drift(node) + drift_noise;
    j["uncertainty_ns"] = is_ref ? 0.0 : sigma_ns;
    j["residual_ns"] = is_ref ? 0.0 : sigma_ns / 3;
    j["reachable"] = true;
    j["component"] = 0;
    j["edges_used"] = 4;
    j["leader"] = 1;
    return j;
  }

  static nlohmann::ordered_json Unreachable(nlohmann::ordered_json line) {
    for (const char* f : {"offset_ns", "drift", "uncertainty_ns", "residual_ns"}) line[f] = nullptr;
    line["reachable"] = false;
    line["component"] = -1;
    line["edges_used"] = 0;
    return line;
  }

 private:
  int64_t t0_;
  std::map<uint32_t, VClock> clocks_;
  uint32_t reference_id_;
  VClock reference_;
  long double ref_offset_ = 0;
  long double ref_rate_ = 0;
};

}  // namespace chronolink::trace::testing
