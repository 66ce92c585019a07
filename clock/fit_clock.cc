#include "clock/fit_clock.h"

#include "clock/clock_trajectory.h"

namespace chronolink {
namespace {

// REALTIME's mean rate against RAW from `from` to `to`, less 1, in fine
// units: a chord between two samples, or a mean over a baseline.
int64_t RealtimeRateBetween(const ClockPairSample& from, const ClockPairSample& to) {
  const int64_t d_raw = to.raw_ns - from.raw_ns;
  return RoundedQuotient(static_cast<__int128>((to.realtime_ns - from.realtime_ns) - d_raw) * kFinePerNs, d_raw);
}

}  // namespace

FitTimebase::FitTimebase(const ClockPairSample& first, size_t capacity)
    : map_(capacity), first_fit_ns_(first.realtime_ns) {  // F = REALTIME at the first anchor
  anchors_.push_back({{first.raw_ns, first.realtime_ns, first.rate_fine == kRateUnknown ? 0 : first.rate_fine}});
  map_.Add(first);
  stats_.samples = 1;
}

void FitTimebase::Add(const ClockPairSample& s) {
  std::lock_guard lock(mutex_);
  AddLocked(s);
}

void FitTimebase::AddLocked(const ClockPairSample& s) {
  if (s.raw_ns > map_.samples().back().raw_ns) ++stats_.samples;  // the map ignores the rest
  map_.Add(s);
  stats_.steps = map_.breaks();
}

int64_t FitTimebase::StartAnchorLocked(int64_t raw_ns, int64_t fit_ns, int64_t rate_fine) {
  const int64_t before = AnchorForRawLocked(raw_ns).FitOfRaw(raw_ns);
  anchors_.back().fit_end_ns = before;
  anchors_.push_back({{raw_ns, fit_ns, rate_fine}});
  ++stats_.reanchors;
  return before;
}

int64_t FitTimebase::Reanchor(const ClockPairSample& s, int64_t rate_fine) {
  std::lock_guard lock(mutex_);
  return StartAnchorLocked(s.raw_ns, s.realtime_ns, rate_fine);
}

FitClockRemap FitTimebase::ContinueAtRate(const ClockPairSample& s, int64_t rate_fine) {
  std::lock_guard lock(mutex_);
  const FitAnchor before = AnchorForRawLocked(s.raw_ns);
  const int64_t at = before.FitOfRaw(s.raw_ns);
  StartAnchorLocked(s.raw_ns, at, rate_fine);
  return {at, before.rate_fine, rate_fine};
}

FitAnchor FitTimebase::anchor() const {
  std::lock_guard lock(mutex_);
  return anchors_.back().anchor;
}

FitAnchor FitTimebase::AnchorFor(int64_t fit_ns) const {
  std::lock_guard lock(mutex_);
  return AnchorForFitLocked(fit_ns);
}

uint64_t FitTimebase::steps() const {
  std::lock_guard lock(mutex_);
  return map_.breaks();
}

const FitAnchor& FitTimebase::AnchorForRawLocked(int64_t raw_ns) const {
  for (size_t i = anchors_.size(); i-- > 1;) {
    if (anchors_[i].anchor.raw_ns <= raw_ns) return anchors_[i].anchor;
  }
  return anchors_.front().anchor;
}

const FitAnchor& FitTimebase::AnchorForFitLocked(int64_t fit_ns) const {
  for (size_t i = anchors_.size(); i-- > 1;) {
    if (anchors_[i].anchor.realtime_ns <= fit_ns && fit_ns <= anchors_[i].fit_end_ns) return anchors_[i].anchor;
  }
  return anchors_.front().anchor;
}

int64_t FitTimebase::FitOfRaw(int64_t raw_ns) const {
  std::lock_guard lock(mutex_);
  return AnchorForRawLocked(raw_ns).FitOfRaw(raw_ns);
}

void FitTimebase::AddOnDemand(const ClockPairSample& s) {
  std::lock_guard lock(mutex_);
  AddLocked(s);
  ++stats_.on_demand;
}

int64_t FitTimebase::RateAt(size_t i) const {
  const auto& ss = map_.samples();
  if (ss[i].rate_fine != kRateUnknown) return ss[i].rate_fine;
  // The chord to a neighbour on the same side of every step.
  size_t a = i, b = i;
  if (i > 0 && !map_.BreakBefore(i)) {
    a = i - 1;
  } else if (i + 1 < ss.size() && !map_.BreakBefore(i + 1)) {
    b = i + 1;
  } else {
    return 0;
  }
  return RealtimeRateBetween(ss[a], ss[b]);
}

int64_t FitTimebase::RawAlong(const ClockPairSample& s, size_t index, int64_t realtime_ns) const {
  const __int128 rate = kFinePerNs + static_cast<__int128>(RateAt(index));
  return s.raw_ns + RoundedQuotient(static_cast<__int128>(realtime_ns - s.realtime_ns) * kFinePerNs, rate);
}

int64_t FitTimebase::RealtimeAlong(const ClockPairSample& s, size_t index, int64_t raw_ns) const {
  const int64_t d = raw_ns - s.raw_ns;
  return s.realtime_ns + d + RoundedQuotient(static_cast<__int128>(d) * RateAt(index), kFinePerNs);
}

size_t FitTimebase::NewestAtOrBeforeRaw(int64_t raw_ns) const {
  const auto& ss = map_.samples();
  for (size_t i = ss.size(); i-- > 0;) {
    if (ss[i].raw_ns <= raw_ns) return i;
  }
  return 0;
}

int64_t FitTimebase::FitOfRealtime(int64_t realtime_ns) const {
  std::lock_guard lock(mutex_);
  return FitOfRealtimeLocked(realtime_ns);
}

std::optional<int64_t> FitTimebase::FitOfSampledRealtime(int64_t realtime_ns) const {
  std::lock_guard lock(mutex_);
  if (realtime_ns > map_.samples().back().realtime_ns) return std::nullopt;
  return FitOfRealtimeLocked(realtime_ns);
}

int64_t FitTimebase::FitOfRealtimeLocked(int64_t realtime_ns) const {
  if (const std::optional<int64_t> raw = map_.RawOf(realtime_ns)) return AnchorForRawLocked(*raw).FitOfRaw(*raw);
  const auto& ss = map_.samples();
  const size_t newest = ss.size() - 1;
  if (realtime_ns > ss[newest].realtime_ns) {
    ++stats_.extrapolated;
    const int64_t raw = RawAlong(ss[newest], newest, realtime_ns);
    return AnchorForRawLocked(raw).FitOfRaw(raw);
  }
  if (realtime_ns < ss.front().realtime_ns && map_.breaks() == 0) {
    ++stats_.extrapolated;
    const int64_t raw = RawAlong(ss.front(), 0, realtime_ns);
    return AnchorForRawLocked(raw).FitOfRaw(raw);
  }
  // A REALTIME a step skipped or read twice: the newest sample at or before
  // it decides (a stamp is converted soon after it was taken).
  ++stats_.unmapped;
  size_t i = newest;
  while (i > 0 && ss[i].realtime_ns > realtime_ns) --i;
  const int64_t raw = RawAlong(ss[i], i, realtime_ns);
  return AnchorForRawLocked(raw).FitOfRaw(raw);
}

int64_t FitTimebase::RealtimeOfFit(int64_t fit_ns) const {
  std::lock_guard lock(mutex_);
  return RealtimeOfFitLocked(fit_ns);
}

int64_t FitTimebase::RealtimeOfFitLocked(int64_t fit_ns) const {
  const int64_t raw = AnchorForFitLocked(fit_ns).RawOfFit(fit_ns);
  if (const std::optional<int64_t> rt = map_.RealtimeOf(raw)) return *rt;
  const size_t i = NewestAtOrBeforeRaw(raw);
  return RealtimeAlong(map_.samples()[i], i, raw);
}

FitPoint FitTimebase::PointAt(int64_t fit_ns) const {
  std::lock_guard lock(mutex_);
  FitPoint p;
  p.fit_ns = fit_ns;
  p.realtime_ns = RealtimeOfFitLocked(fit_ns);
  const FitAnchor& anchor = AnchorForFitLocked(fit_ns);
  const int64_t raw = anchor.RawOfFit(fit_ns);
  const auto& ss = map_.samples();
  size_t i = NewestAtOrBeforeRaw(raw);
  // Past the kink between this sample and the next, the next one's rate holds.
  if (i + 1 < ss.size() && !map_.BreakBefore(i + 1)) {
    if (const auto k = RateKink(ss[i], ss[i + 1]); k && k->raw_ns <= raw) ++i;
  }
  const __int128 realtime_rate = kFinePerNs + static_cast<__int128>(RateAt(i));
  const __int128 fit_rate = kFinePerNs + static_cast<__int128>(anchor.rate_fine);
  p.rate_fine = RoundedQuotient(realtime_rate * kFinePerNs, fit_rate) - kFinePerNs;
  return p;
}

FitTimebaseStats FitTimebase::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

FitClock::FitClock(NodeClock node, FitClockMode mode, int64_t sample_interval_ns, int64_t max_divergence_ns,
                   int64_t rate_baseline_ns)
    : node_(std::move(node)),
      mode_(mode),
      sample_interval_ns_(sample_interval_ns),
      max_divergence_ns_(max_divergence_ns),
      rate_baseline_ns_(rate_baseline_ns),
      timebase_(std::make_shared<FitTimebase>(node_.SamplePair())) {}

int64_t FitClock::Now() const {
  if (mode_ == FitClockMode::kRealtime) return node_.Now();
  return timebase_->FitOfRaw(node_.RawNow());
}

int64_t FitClock::Ingest(int64_t kernel_realtime_ns) const {
  const int64_t realtime = node_.Ingest(kernel_realtime_ns);
  if (mode_ == FitClockMode::kRealtime) return realtime;
  if (const std::optional<int64_t> fit = timebase_->FitOfSampledRealtime(realtime)) return *fit;
  // Taken before now: a sample now lies after it.
  timebase_->AddOnDemand(node_.SamplePair());
  return timebase_->FitOfRealtime(realtime);
}

int64_t FitClock::ToReal(int64_t fit_ns) const {
  if (mode_ == FitClockMode::kRealtime) return node_.ToReal(fit_ns);
  return node_.ToReal(timebase_->RealtimeOfFit(fit_ns));
}

FitPoint FitClock::PointAt(int64_t fit_ns) const {
  if (mode_ == FitClockMode::kRealtime) return {fit_ns, fit_ns, 0};
  return timebase_->PointAt(fit_ns);
}

FitClockPoll FitClock::Poll(int64_t monotonic_ns) {
  FitClockPoll out;
  if (last_sample_monotonic_ns_ != 0 && monotonic_ns - last_sample_monotonic_ns_ < sample_interval_ns_) return out;
  last_sample_monotonic_ns_ = monotonic_ns;
  const ClockPairSample s = node_.SamplePair();
  timebase_->Add(s);
  out.sample = s;
  if (mode_ != FitClockMode::kRaw) return out;
  std::optional<int64_t> mean_rate = MeanRealtimeRate(s);
  if (!mean_rate) return out;
  const int64_t fit = timebase_->FitOfRaw(s.raw_ns);
  if (std::llabs(fit - s.realtime_ns) <= max_divergence_ns_) {
    // The start's anchor, checked once against the last baseline's mean
    // rate, two baselines in (fit_clock.h).
    if (start_rate_checked_ || s.raw_ns - history_.front().raw_ns < 2 * rate_baseline_ns_) return out;
    start_rate_checked_ = true;
    mean_rate = RecentMeanRealtimeRate(s);
    if (!mean_rate || std::llabs(timebase_->anchor().rate_fine - *mean_rate) <= kStartRateToleranceFine) return out;
    out.at_start_check = true;
  }
  out.reanchored = true;
  out.rate_before_fine = timebase_->anchor().rate_fine;
  out.rate_after_fine = *mean_rate;
  if (out.at_start_check && std::llabs(fit - s.realtime_ns) <= max_divergence_ns_ / 4) {
    // F is still close to REALTIME: only the rate was wrong, and a new rate
    // alone needs no step (fit_clock.h).
    out.remap = timebase_->ContinueAtRate(s, *mean_rate);
    out.fit_before_ns = out.fit_after_ns = out.remap->at_fit_ns;
    return out;
  }
  out.fit_before_ns = timebase_->Reanchor(s, *mean_rate);
  out.fit_after_ns = s.realtime_ns;
  return out;
}

std::optional<int64_t> FitClock::MeanRealtimeRate(const ClockPairSample& now) {
  const int64_t every = rate_baseline_ns_ / 4;
  constexpr size_t kKeep = 16;
  const uint64_t steps = timebase_->steps();
  if (steps != history_steps_) {  // nothing across a step
    history_.clear();
    history_steps_ = steps;
  }
  if (history_.empty() || now.raw_ns - history_.back().raw_ns >= every) history_.push_back(now);
  while (history_.size() > kKeep) history_.pop_front();
  const ClockPairSample& from = history_.front();
  if (now.raw_ns - from.raw_ns < rate_baseline_ns_) return std::nullopt;
  return RealtimeRateBetween(from, now);
}

std::optional<int64_t> FitClock::RecentMeanRealtimeRate(const ClockPairSample& now) const {
  for (auto it = history_.rbegin(); it != history_.rend(); ++it) {
    if (now.raw_ns - it->raw_ns >= rate_baseline_ns_) return RealtimeRateBetween(*it, now);
  }
  return std::nullopt;
}

std::optional<FitAnchor> FitClock::anchor() const {
  if (mode_ == FitClockMode::kRealtime) return std::nullopt;
  return timebase_->anchor();
}

int64_t FitClock::FirstRead() const { return mode_ == FitClockMode::kRealtime ? INT64_MIN : timebase_->first_fit_ns(); }

std::optional<FitAnchor> FitClock::AnchorFor(int64_t fit_ns) const {
  if (mode_ == FitClockMode::kRealtime) return std::nullopt;
  return timebase_->AnchorFor(fit_ns);
}

FitTimebaseStats FitClock::stats() const { return timebase_->stats(); }

}  // namespace chronolink
