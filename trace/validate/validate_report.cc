#include "trace/validate/validate_report.h"

#include <algorithm>
#include <array>
#include <cstdio>

namespace chronolink::trace {
namespace {

using nlohmann::json;

constexpr size_t kHostsNamed = 8;  // on the first line; more are counted

// ps -> ns rounded half away from zero (skews are magnitudes: sub-ns digits
// say nothing next to a clock's uncertainty).
int64_t RoundedNs(int64_t ps) { return ps >= 0 ? (ps / 1000) + (ps % 1000 >= 500) : -RoundedNs(-ps); }

std::string Printf(const char* format, auto... args) {
  std::array<char, 256> buffer{};
  std::snprintf(buffer.data(), buffer.size(), format, args...);
  return buffer.data();
}

std::string HostList(const std::vector<std::string>& hosts) {
  std::string out;
  for (size_t i = 0; i < hosts.size() && i < kHostsNamed; ++i) out += (i ? ", " : "") + hosts[i];
  if (hosts.size() > kHostsNamed) out += ", ... " + std::to_string(hosts.size() - kHostsNamed) + " more";
  return out;
}

std::string SkewLine(const char* what, const SkewStats& s) {
  if (s.count == 0) return Printf("  %s skew: no matched instances\n", what);
  return Printf("  %s skew: p50 %s, p90 %s, p99 %s, max %s (%lld instances)\n", what,
                FormatDurationPs(s.p50_ps).c_str(), FormatDurationPs(s.p90_ps).c_str(),
                FormatDurationPs(s.p99_ps).c_str(), FormatDurationPs(s.max_ps).c_str(),
                static_cast<long long>(s.count));
}

std::string FamilyTable(const ValidationResult& r) {
  size_t width = 6;
  for (const auto& f : r.families) width = std::max(width, std::min<size_t>(f.family.size(), 40));
  const int w = static_cast<int>(width);
  std::string out = Printf("  %-*s %-14s %7s %7s %7s %9s %5s  %-21s %s\n", w, "family", "kind", "events",
                           "matched", "checked", "unmatched", "viol", "start skew p50/max", "end skew p50/max");
  for (const auto& f : r.families) {
    const std::string start = FormatDurationPs(f.start_skew.p50_ps) + " / " + FormatDurationPs(f.start_skew.max_ps);
    const std::string end = FormatDurationPs(f.end_skew.p50_ps) + " / " + FormatDurationPs(f.end_skew.max_ps);
    out += Printf("  %-*s %-14s %7lld %7lld %7lld %9lld %5lld  %-21s %s\n", w, f.family.substr(0, width).c_str(),
                  std::string(DependencyName(f.dependency)).c_str(), static_cast<long long>(f.events),
                  static_cast<long long>(f.matched_instances), static_cast<long long>(f.checked_instances),
                  static_cast<long long>(f.unmatched_events), static_cast<long long>(f.violations),
                  f.matched_instances ? start.c_str() : "-", f.matched_instances ? end.c_str() : "-");
  }
  return out;
}

std::string InstanceLabel(const Violation& v) {
  return v.seq ? "seq " + std::to_string(*v.seq) + (v.ordinal ? "/" + std::to_string(v.ordinal + 1) : "")
               : "#" + std::to_string(v.ordinal + 1);
}

std::string ViolationLine(const Violation& v) {
  if (v.transfer) {
    return "    " + v.key + " " + InstanceLabel(v) + ": receive on " + v.ended_first + " ended " +
           FormatDurationPs(v.by_ps) + " before the send on " + v.started_last + " started\n";
  }
  return "    " + v.key + " " + InstanceLabel(v) + ": " + v.ended_first + " ended " + FormatDurationPs(v.by_ps) +
         " before " + v.started_last + " started (" + std::to_string(v.participants) + " participants)\n";
}

std::string Violations(const ValidationResult& r, size_t listed) {
  if (r.violations.empty()) return "";
  std::string out = Printf("  worst violations (%zu of %lld):\n", std::min(listed, r.violations.size()),
                           static_cast<long long>(r.violations_total));
  for (size_t i = 0; i < r.violations.size() && i < listed; ++i) out += ViolationLine(r.violations[i]);
  return out;
}

std::string Notes(const ValidationResult& r) {
  std::string out;
  for (const auto& f : r.families) {
    for (const auto& note : f.notes) out += "    " + f.family + ": " + note + "\n";
  }
  const auto& s = r.skipped;
  if (s.bad_time) out += Printf("    %lld events skipped: instant does not fit int64\n", static_cast<long long>(s.bad_time));
  if (s.unpaired_dones) {
    out += Printf("    %lld async -done events without a -start skipped\n", static_cast<long long>(s.unpaired_dones));
  }
  if (s.unpaired_starts) {
    out += Printf("    %lld async -start events without a -done on their participant: own span used "
                  "(usual for a device kernel)\n",
                  static_cast<long long>(s.unpaired_starts));
  }
  return out.empty() ? "" : "  notes:\n" + out;
}

json SkewJson(const SkewStats& s) {
  return {{"count", s.count},
          {"p50_ns", RoundedNs(s.p50_ps)},
          {"p90_ns", RoundedNs(s.p90_ps)},
          {"p99_ns", RoundedNs(s.p99_ps)},
          {"max_ns", RoundedNs(s.max_ps)}};
}

json InstantJson(const TraceInstant& t) { return {{"ns", t.ns}, {"ps", t.ps}}; }

json ViolationJson(const Violation& v) {
  return {{"family", v.family},
          {"key", v.key},
          {"seq", v.seq ? json(*v.seq) : json(nullptr)},
          {"ordinal", v.ordinal},
          {"transfer", v.transfer},
          {"ended_first", v.ended_first},
          {"started_last", v.started_last},
          {"ended_first_at", InstantJson(v.ended_first_at)},
          {"started_last_at", InstantJson(v.started_last_at)},
          {"by_ps", v.by_ps},
          {"by_ns", RoundedNs(v.by_ps)},
          {"participants", v.participants}};
}

json FamilyJson(const FamilySummary& f) {
  return {{"family", f.family},
          {"dependency", DependencyName(f.dependency)},
          {"events", f.events},
          {"matched_instances", f.matched_instances},
          {"checked_instances", f.checked_instances},
          {"unmatched_events", f.unmatched_events},
          {"violations", f.violations},
          {"start_skew", SkewJson(f.start_skew)},
          {"end_skew", SkewJson(f.end_skew)},
          {"notes", f.notes}};
}

}  // namespace

std::string FormatDurationPs(int64_t ps) {
  if (ps < 0) return "-" + FormatDurationPs(ps == INT64_MIN ? INT64_MAX : -ps);
  if (ps == 0) return "0 ns";
  if (ps < 1'000) return std::to_string(ps) + " ps";
  struct Unit {
    int64_t ps;
    const char* name;
  };
  constexpr std::array<Unit, 4> kUnits{{{1'000'000'000'000, "s"}, {1'000'000'000, "ms"}, {1'000'000, "us"}, {1'000, "ns"}}};
  for (const Unit& u : kUnits) {
    if (ps < u.ps) continue;
    const double v = static_cast<double>(ps) / static_cast<double>(u.ps);  // display only
    return Printf(v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, u.name);
  }
  return std::to_string(ps) + " ps";
}

std::string ValidationText(const ValidationResult& r, const ValidateReportOptions& options) {
  std::string out = Printf("%s: %zu hosts (%s), tolerance %s\n", options.title.c_str(), r.hosts.size(),
                           HostList(r.hosts).c_str(), FormatDurationPs(r.tolerance_ps).c_str());
  out += Printf("  %lld collective events, %lld matched (%lld checked for happens-before), %lld unmatched events\n",
                static_cast<long long>(r.events), static_cast<long long>(r.matched_instances),
                static_cast<long long>(r.checked_instances), static_cast<long long>(r.unmatched_events));
  if (r.violations_total) {
    out += Printf("  VIOLATIONS: %lld (one participant ended before another started, or a receive before its send)\n",
                  static_cast<long long>(r.violations_total));
  } else {
    out += r.checked_instances ? "  violations: none\n"
                               : "  violations: none, but nothing was checkable (see the notes)\n";
  }
  out += SkewLine("start", r.start_skew) + SkewLine("end", r.end_skew);
  if (!r.families.empty()) out += FamilyTable(r);
  out += Violations(r, options.listed_violations) + Notes(r);
  for (const auto& w : r.warnings) out += "  warning: " + w + "\n";
  return out;
}

nlohmann::json ValidationJson(const ValidationResult& r, const ValidateReportOptions& options) {
  json families = json::array();
  for (const auto& f : r.families) families.push_back(FamilyJson(f));
  json violations = json::array();
  for (size_t i = 0; i < r.violations.size() && i < options.json_violations; ++i) {
    violations.push_back(ViolationJson(r.violations[i]));
  }
  return {{"schema", "chronolink.validate/1"},
          {"hosts", r.hosts},
          {"tolerance_ps", r.tolerance_ps},
          {"events", r.events},
          {"matched_instances", r.matched_instances},
          {"checked_instances", r.checked_instances},
          {"unmatched_events", r.unmatched_events},
          {"violations_total", r.violations_total},
          {"start_skew", SkewJson(r.start_skew)},
          {"end_skew", SkewJson(r.end_skew)},
          {"families", families},
          {"violations", violations},
          {"skipped",
           {{"bad_time", r.skipped.bad_time},
            {"unpaired_starts", r.skipped.unpaired_starts},
            {"unpaired_dones", r.skipped.unpaired_dones}}},
          {"warnings", r.warnings}};
}

}  // namespace chronolink::trace
