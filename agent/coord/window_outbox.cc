#include "agent/coord/window_outbox.h"

#include <algorithm>

namespace chronolink {

void WindowOutbox::Add(std::span<const WindowSummary> windows, int64_t now_ns) {
  for (const WindowSummary& w : windows) entries_.push_back(Entry{w, now_ns, false});
  published_ += windows.size();
}

std::vector<WindowSummary> WindowOutbox::Pending(size_t max) const {
  std::vector<WindowSummary> out;
  const size_t end = std::min(entries_.size(), delivered_upto_ + max);
  for (size_t i = delivered_upto_; i < end; ++i) out.push_back(entries_[i].window);
  return out;
}

void WindowOutbox::MarkDelivered(size_t n) {
  n = std::min(n, pending());
  for (size_t i = delivered_upto_; i < delivered_upto_ + n; ++i) {
    // Resends after a rewind are not new deliveries.
    if (!entries_[i].ever_delivered) ++delivered_;
    entries_[i].ever_delivered = true;
  }
  delivered_upto_ += n;
}

void WindowOutbox::Rewind(int64_t since_ns) {
  size_t first = 0;
  while (first < delivered_upto_ && entries_[first].added_ns < since_ns) ++first;
  delivered_upto_ = first;
}

void WindowOutbox::Expire(int64_t now_ns) {
  while (!entries_.empty() && now_ns - entries_.front().added_ns > retention_ns_) {
    if (!entries_.front().ever_delivered) ++dropped_;
    entries_.pop_front();
    if (delivered_upto_ > 0) --delivered_upto_;
  }
}

}  // namespace chronolink
