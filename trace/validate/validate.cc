#include "trace/validate/validate.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <string>

#include "trace/validate/collective_matcher.h"
#include "trace/validate/happens_before.h"

namespace chronolink::trace {
namespace {

// Host names as the report shows them; a name given twice (several ranks'
// traces from one host) is told apart by its input index.
std::vector<std::string> HostNames(const std::vector<const HostTrace*>& traces) {
  std::map<std::string, int> uses;
  for (const auto* t : traces) ++uses[t->host];
  std::vector<std::string> names;
  for (size_t i = 0; i < traces.size(); ++i) {
    std::string name = traces[i]->host.empty() ? "trace " + std::to_string(i) : traces[i]->host;
    if (uses[traces[i]->host] > 1) name += " [" + std::to_string(i) + "]";
    names.push_back(std::move(name));
  }
  return names;
}

std::vector<std::string> Warnings(const std::vector<const HostTrace*>& traces,
                                  const std::vector<std::string>& names) {
  std::vector<std::string> warnings;
  std::set<TraceClock> clocks;
  for (size_t i = 0; i < traces.size(); ++i) {
    clocks.insert(traces[i]->clock);
    if (!traces[i]->line_base_known) {
      warnings.push_back(names[i] +
                         ": times are relative to an unknown start, so they cannot be compared with "
                         "other hosts' until the start is given");
    }
  }
  if (clocks.size() > 1) warnings.push_back("traces are on different clocks (some aligned, some not)");
  return warnings;
}

int64_t TolerancePs(int64_t tolerance_ns) {
  int64_t ps = 0;
  if (tolerance_ns <= 0) return 0;
  if (__builtin_mul_overflow(tolerance_ns, int64_t{1000}, &ps)) return std::numeric_limits<int64_t>::max();
  return ps;
}

void AddTo(ExtractCounts& sum, const ExtractCounts& add) {
  sum.bad_time += add.bad_time;
  sum.unpaired_starts += add.unpaired_starts;
  sum.unpaired_dones += add.unpaired_dones;
}

// Per family and overall: counts, skews, violations.
class Summariser {
 public:
  Summariser(const MatchResult& match, ValidationResult& result) : match_(match), result_(result) {}

  void Run(const ParticipantNamer& namer) {
    for (const auto& instance : match_.instances) {
      const InstanceSkew skew = SkewOf(instance);
      Skews& family = skews_[instance.family];
      for (Skews* s : {&family, &all_}) {
        s->start.push_back(skew.start_ps);
        s->end.push_back(skew.end_ps);
      }
      Record(CheckInstance(instance, result_.tolerance_ps, namer));
    }
    for (const auto& transfer : match_.transfers) Record(CheckTransfer(transfer, result_.tolerance_ps, namer));
    Families();
    result_.start_skew = Summarise(all_.start);
    result_.end_skew = Summarise(all_.end);
    std::stable_sort(result_.violations.begin(), result_.violations.end(),
                     [](const Violation& a, const Violation& b) { return a.by_ps > b.by_ps; });
    result_.violations_total = static_cast<int64_t>(result_.violations.size());
  }

 private:
  struct Skews {
    std::vector<int64_t> start;
    std::vector<int64_t> end;
  };

  void Record(std::optional<Violation> v) {
    if (!v) return;
    ++violations_[v->family];
    result_.violations.push_back(std::move(*v));
  }

  void Families() {
    for (const auto& [name, counts] : match_.families) {
      FamilySummary f;
      f.family = name;
      f.dependency = counts.dependency;
      f.events = counts.events;
      f.matched_instances = counts.matched_instances;
      f.unmatched_events = counts.unmatched_events;
      f.checked_instances = counts.checked_instances;
      f.violations = violations_[name];
      f.start_skew = Summarise(skews_[name].start);
      f.end_skew = Summarise(skews_[name].end);
      f.notes.assign(counts.notes.begin(), counts.notes.end());
      result_.events += f.events;
      result_.unmatched_events += f.unmatched_events;
      result_.families.push_back(std::move(f));
    }
    result_.matched_instances = static_cast<int64_t>(match_.instances.size() + match_.transfers.size());
    result_.checked_instances =
        std::count_if(match_.instances.begin(), match_.instances.end(), [](const auto& i) { return i.checked; }) +
        std::count_if(match_.transfers.begin(), match_.transfers.end(), [](const auto& t) { return t.checked; });
  }

  const MatchResult& match_;
  ValidationResult& result_;
  std::map<std::string, Skews> skews_;
  Skews all_;
  std::map<std::string, int64_t> violations_;
};

}  // namespace

ValidationResult ValidateTraces(const std::vector<const HostTrace*>& traces, const ValidateOptions& options) {
  ValidationResult result;
  result.hosts = HostNames(traces);
  result.tolerance_ps = TolerancePs(options.tolerance_ns);
  result.warnings = Warnings(traces, result.hosts);

  std::vector<std::vector<CollectiveEvent>> per_trace(traces.size());
  std::vector<std::optional<int64_t>> ranks(traces.size());
  size_t total = 0;
  for (size_t i = 0; i < traces.size(); ++i) {
    ExtractCounts counts;
    per_trace[i] = ExtractCollectives(*traces[i], i, &counts);
    total += per_trace[i].size();
    AddTo(result.skipped, counts);
    ranks[i] = i < options.ranks.size() && options.ranks[i] ? options.ranks[i] : TraceRank(*traces[i]);
  }
  std::vector<CollectiveEvent> events;
  events.reserve(total);
  for (auto& host : per_trace) std::move(host.begin(), host.end(), std::back_inserter(events));
  per_trace.clear();
  const MatchResult match = MatchCollectives(events, ranks);
  const ParticipantNamer namer = [&](const CollectiveEvent& e) {
    return e.participant.empty() ? result.hosts[e.trace] : result.hosts[e.trace] + " " + e.participant;
  };
  Summariser(match, result).Run(namer);
  return result;
}

}  // namespace chronolink::trace
