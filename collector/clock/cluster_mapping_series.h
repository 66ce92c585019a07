// Every clock → cluster mapping the collector read from its agent's clock
// page while it ran ("ok" reads only), for the run's clock plane: the page
// changes with each solved instant, and between them every 100 ms where the
// node's daemon bent its clock (a republication on the same line is not
// kept), and `chronolink-trace align --recorded-mapping` interpolates
// between them as it does between offsets.jsonl's instants
// (trace/correct/recorded_mapping.h).
//
// Bounded: when full, every other mapping but the newest is dropped (the
// run's whole span stays covered, at half the density), and counted.
// Not thread-safe (the collector holds its sample lock).
#pragma once

#include <cstddef>
#include <cstdint>

#include "include/chronolink/clock_mapping_page.h"
#include "trace/correct/recorded_mapping.h"

namespace chronolink::collector {

class ClusterMappingSeries {
 public:
  // 32 768 mappings: 18 hours of 2 s windows on an undisciplined clock, an
  // hour of a daemon bending it every 100 ms, before the first thinning.
  explicit ClusterMappingSeries(size_t capacity = 32'768) : capacity_(capacity < 2 ? 2 : capacity) {}

  // A mapping read "ok". The same reference instant again replaces the
  // last one (the page is read many times per window); another node's
  // mapping (a different agent behind the page) starts the series afresh.
  // `read_ns`: the host instant of the read.
  void Add(const ClockMapping& m, int64_t read_ns);

  const trace::RecordedMappings& recorded() const { return recorded_; }
  bool empty() const { return recorded_.mappings.empty(); }
  uint64_t thinned() const { return thinned_; }     // dropped to stay within the capacity
  uint64_t discarded() const { return discarded_; }  // dropped when the page's node changed

 private:
  void Thin();

  size_t capacity_;
  trace::RecordedMappings recorded_;
  uint64_t thinned_ = 0;
  uint64_t discarded_ = 0;
};

}  // namespace chronolink::collector
