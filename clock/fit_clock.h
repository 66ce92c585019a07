// The clock the agent fits offsets in (docs/clocks.md "The fit clock"): the
// node's CLOCK_MONOTONIC_RAW, which no clock daemon steers, scaled by
// REALTIME's rate at the agent's start and set to REALTIME there:
//
//   F = realtime0 + (raw − raw0)·(1 + rate0).
//
// A daemon's frequency changes, slews and steps stay out of every fit
// between nodes: F follows the oscillator alone (its wander). F leaves
// REALTIME slowly, by what the daemon corrects after the start (ms a day at
// 0.01-1 ppm), and every instant the agent hands out in REALTIME is mapped
// through the node's own REALTIME/RAW samples (FitTimebase). The leader
// maps solved offsets back to REALTIME with each node's FitPoint.
//
// Kernel and eBPF stamps are REALTIME; FitTimebase converts them through
// the samples around them (RealtimeRawMap). A stamp is read after it was
// taken, so a stamp newer than the newest sample makes FitClock take one
// there and then: every stamp lies between two samples. Extrapolating
// instead would err by the rate change since the newest sample × the time
// since it, and chronyd slews at up to 83 000 ppm (maxslewrate).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "clock/clock_reader.h"
#include "clock/fit_clock_remap.h"
#include "clock/fit_point.h"
#include "clock/realtime_raw_map.h"
#include "clock/timebase_knots.h"

namespace chronolink {

struct FitTimebaseStats {
  uint64_t samples = 0;
  uint64_t on_demand = 0;     // samples taken because a stamp was newer than the newest
  uint64_t extrapolated = 0;  // stamps newer (or older) than every sample: along the nearest one's rate
  uint64_t unmapped = 0;      // stamps at a REALTIME a step made ambiguous: along the newest sample before it
  uint64_t steps = 0;         // REALTIME steps between samples (the map's breaks)
  uint64_t reanchors = 0;     // new anchors: F had left REALTIME by more than allowed
};

// The samples and the anchors, safe to share between threads (the probe
// loop converts stamps, the leader's thread reads the clock). F has one
// anchor until it leaves REALTIME by more than the fit clock allows; then
// a new one starts at that RAW instant (FitClock::Poll), and each anchor
// keeps the stretch of F it made (its start to where the next began).
class FitTimebase {
 public:
  // The first sample anchors F.
  explicit FitTimebase(const ClockPairSample& first, size_t capacity = 8192);

  void Add(const ClockPairSample& s);
  // Takes `s` because a stamp was newer than the newest sample.
  void AddOnDemand(const ClockPairSample& s);
  // A new anchor from sample `s` on, at REALTIME's rate `rate_fine`: F
  // jumps to `s`'s REALTIME there. F under the old anchor at that instant.
  int64_t Reanchor(const ClockPairSample& s, int64_t rate_fine);
  // A new rate from sample `s` on, F keeping its value there: F bends
  // there, without a step, so that a value alone says which rate made it;
  // the remap returned carries the values before it onto the new rate's
  // line drawn back (fit_clock_remap.h), for fits across the bend.
  FitClockRemap ContinueAtRate(const ClockPairSample& s, int64_t rate_fine);

  FitAnchor anchor() const;  // the newest
  // The anchor that made F value `fit_ns`: the newest whose stretch holds
  // it (where F jumped back, two do: the newest, whose windows around the
  // jump are discarded anyway).
  FitAnchor AnchorFor(int64_t fit_ns) const;
  uint64_t steps() const;  // REALTIME steps the samples showed

  // F of a RAW instant: through the anchor in force then.
  int64_t FitOfRaw(int64_t raw_ns) const;
  int64_t FitOfRealtime(int64_t realtime_ns) const;
  // The same for a REALTIME no newer than the newest sample; nullopt for a
  // newer one (take a sample first: one lock for the common case).
  std::optional<int64_t> FitOfSampledRealtime(int64_t realtime_ns) const;
  int64_t RealtimeOfFit(int64_t fit_ns) const;
  FitPoint PointAt(int64_t fit_ns) const;
  // F at the first sample: before it no REALTIME was read, and a point
  // there is only the first sample's rate carried back.
  int64_t first_fit_ns() const { return first_fit_ns_; }
  FitTimebaseStats stats() const;

 private:
  struct AnchorStretch {
    FitAnchor anchor;
    int64_t fit_end_ns = INT64_MAX;  // F where the next anchor began
  };
  const FitAnchor& AnchorForRawLocked(int64_t raw_ns) const;
  // Ends the newest stretch at RAW `raw_ns` and starts an anchor there, F
  // reading fit_ns; returns F there under the anchor before.
  int64_t StartAnchorLocked(int64_t raw_ns, int64_t fit_ns, int64_t rate_fine);
  const FitAnchor& AnchorForFitLocked(int64_t fit_ns) const;
  void AddLocked(const ClockPairSample& s);
  int64_t RealtimeOfFitLocked(int64_t fit_ns) const;
  int64_t FitOfRealtimeLocked(int64_t realtime_ns) const;
  // Along sample s's rate (else the chord to the one before it).
  int64_t RawAlong(const ClockPairSample& s, size_t index, int64_t realtime_ns) const;
  int64_t RealtimeAlong(const ClockPairSample& s, size_t index, int64_t raw_ns) const;
  int64_t RateAt(size_t index) const;  // REALTIME's rate against RAW at sample `index`, fine
  size_t NewestAtOrBeforeRaw(int64_t raw_ns) const;

  mutable std::mutex mutex_;
  std::vector<AnchorStretch> anchors_;
  RealtimeRawMap map_;
  int64_t first_fit_ns_ = 0;
  mutable FitTimebaseStats stats_;
};

// Which clock the agent fits in: its fit clock (the default), or REALTIME
// as it was before, kept to compare the two and for nodes whose REALTIME
// nothing disciplines.
enum class FitClockMode { kRaw, kRealtime };

// An edge window's fit clock: the anchor that made its F, and the node's
// REALTIME at its centre (what edges.jsonl and the summaries carry); for
// the leader, the node's REALTIME/RAW knots over the window, with which it
// maps back exactly where the daemon bent REALTIME inside it.
struct FitWindowClock {
  FitAnchor anchor;
  FitPoint point;
  std::optional<TimebaseExcerpt> knots;
};

// What a poll of the fit clock did.
struct FitClockPoll {
  std::optional<ClockPairSample> sample;  // the sample, when it took one
  // F left REALTIME by more than allowed, or the start's check found its
  // anchor off REALTIME's mean rate (`at_start_check`), and a new anchor
  // began: F jumped from `fit_before_ns` to `fit_after_ns` (a step of F,
  // which the agent treats as a clock step), its rate from
  // `rate_before_fine` to `rate_after_fine`.
  bool reanchored = false;
  bool at_start_check = false;
  int64_t fit_before_ns = 0, fit_after_ns = 0;
  int64_t rate_before_fine = 0, rate_after_fine = 0;
  // At the start's check F keeps its value and takes the new rate alone
  // (fit_before_ns == fit_after_ns): no step, but a map every value taken
  // before goes through (fit_clock_remap.h).
  std::optional<FitClockRemap> remap;
};

// The node clock as the agent's estimation sees it: Now, the stamps it
// ingests and the deadlines it hands the kernel, all in F. Copies share
// the timebase.
//
// F runs at REALTIME's rate at its anchor. Anchored during a daemon's slew
// (chronyd slews at up to 8 %, the PLL's phase up to 12.5 %/s), or as the
// daemon retrains its frequency, F leaves REALTIME steadily: ms a second
// after a slew. Far enough apart (`max_divergence_ns`), the nodes' window
// grids no longer line up and an edge's drift between fit clocks is the
// slew's. So when F is that far from REALTIME, a new anchor starts at
// REALTIME, at REALTIME's mean rate over the last 32-64 s (a slew averages
// out of it): a step of F, once, after which F follows the daemon's
// frequency.
//
// A daemon still settling when the agent starts (a node just booted: steps,
// then slews of hundreds of ppm for seconds) made that step come at a time
// set by how far off the first anchor was: in one 5-node run three nodes a
// minute in and one after three minutes, each costing its windows around
// it and the span chooser's history; and a new anchor taken a minute in
// runs at a mean that still holds the start's slews, tens of ppm off. So
// two baselines (64 s) after the start, the anchor in force is checked
// once against REALTIME's mean rate over the last baseline alone: more
// than kStartRateToleranceFine off it (F would leave REALTIME by 20 ms
// within about three hours), F is anchored again there and then, at that
// mean, while the start-up is disturbed anyway, instead of at a time no
// one chose. A daemon that had settled before the agent started passes.
// Where F is then within a quarter of the divergence allowed of REALTIME
// (0.2-3.4 ms in the test bed's runs of 2026-12-06, one of five nodes 17
// ms), that check changes F's rate alone, F keeping its value: no step, so
// the agent and its peers carry every window and history across it
// through the remap (fit_clock_remap.h); as a step it cost the loaded
// 2-node p99 16-17 ns in two of four runs, once a minute in. Further off,
// F jumps back to REALTIME as before: at a bend it would keep less than
// three quarters of the allowed divergence, and reach it, at a time no one
// chose, sooner.
class FitClock {
 public:
  // REALTIME's mean rate for a new anchor is taken over the last
  // `rate_baseline_ns` to 4x that.
  explicit FitClock(NodeClock node = NodeClock(), FitClockMode mode = FitClockMode::kRaw,
                    int64_t sample_interval_ns = 1'000'000, int64_t max_divergence_ns = 20'000'000,
                    int64_t rate_baseline_ns = 32'000'000'000);

  int64_t Now() const;
  // A kernel CLOCK_REALTIME instant (a packet stamp), in F.
  int64_t Ingest(int64_t kernel_realtime_ns) const;
  // Back to the kernel's CLOCK_REALTIME, for deadlines handed to the kernel.
  int64_t ToReal(int64_t fit_ns) const;
  // The node's REALTIME at fit instant `fit_ns`, and its rate there.
  FitPoint PointAt(int64_t fit_ns) const;
  // The fit instant of REALTIME's first reading (INT64_MIN fitting in
  // REALTIME, always read): a point before it is that reading's rate
  // carried back, which a daemon's start-up slew makes hundreds of µs wrong
  // within a second.
  int64_t FirstRead() const;

  // Takes a sample of REALTIME and RAW unless the last one is younger than
  // the interval (judged by the caller's CLOCK_MONOTONIC read: a turn of the
  // loop within it costs a comparison), and re-anchors F when it is too far
  // from REALTIME.
  FitClockPoll Poll(int64_t monotonic_ns);

  // 2 ppm, in the fine units of REALTIME's rate (1e-15 per ns).
  static constexpr int64_t kStartRateToleranceFine = 2'000'000'000;

  FitClockMode mode() const { return mode_; }
  // F's definition now; nullopt when fitting in REALTIME.
  std::optional<FitAnchor> anchor() const;
  // The anchor that made F value `fit_ns` (an edge window's, for its record).
  std::optional<FitAnchor> AnchorFor(int64_t fit_ns) const;
  FitTimebaseStats stats() const;
  const NodeClock& node() const { return node_; }

 private:
  std::optional<int64_t> MeanRealtimeRate(const ClockPairSample& now);
  // Over the last 1-1.25 baselines only (a mean of the history's newest
  // sample at least a baseline old): none of a slew ended before it.
  std::optional<int64_t> RecentMeanRealtimeRate(const ClockPairSample& now) const;

  NodeClock node_;
  FitClockMode mode_;
  int64_t sample_interval_ns_;
  int64_t max_divergence_ns_;
  int64_t rate_baseline_ns_;
  std::shared_ptr<FitTimebase> timebase_;
  int64_t last_sample_monotonic_ns_ = 0;
  // Samples every baseline/4 over the last 4 baselines, for REALTIME's
  // mean rate; none across a step.
  std::deque<ClockPairSample> history_;
  uint64_t history_steps_ = 0;
  bool start_rate_checked_ = false;  // the anchor in force two baselines in, against the last one's mean
};

}  // namespace chronolink
