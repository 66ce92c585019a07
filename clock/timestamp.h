// Clock-domain-tagged timestamps. Every instant in chronolink is int64
// nanoseconds plus the clock it was read from; converting between domains is
// an explicit step with an error bound, never an implicit cast.
#pragma once

#include <cstdint>
#include <string_view>

namespace chronolink {

enum class ClockDomain : uint8_t {
  kNodeRealtime = 0,  // CLOCK_REALTIME of this node (after any test-only virtual skew)
  kMonotonic = 1,     // CLOCK_MONOTONIC (BPF bpf_ktime_get_ns)
  kTai = 2,           // CLOCK_TAI (BPF bpf_ktime_get_tai_ns)
  kBoottime = 3,      // CLOCK_BOOTTIME (rocprofiler-sdk)
  kPeerRealtime = 4,  // a peer's node clock, as echoed on the wire
  kMonotonicRaw = 5,  // CLOCK_MONOTONIC_RAW (amdkfd's CPU clock counter)
  kGpuDevice = 6,     // a GPU's own counter, unwrapped, in ns at its nominal rate
};

std::string_view ClockDomainName(ClockDomain d);

struct Timestamp {
  int64_t ns = 0;
  ClockDomain domain = ClockDomain::kNodeRealtime;

  friend bool operator==(const Timestamp&, const Timestamp&) = default;
};

// Difference of two instants of the same domain, in ns. Differences, unlike
// epoch instants, are small enough to carry in a double when a fit needs it.
inline int64_t DeltaNs(int64_t later, int64_t earlier) { return later - earlier; }

// Where a packet timestamp came from, best last. The numeric values travel on
// the wire (docs/protocol.md), so never renumber them.
enum class StampSource : uint8_t {
  kNone = 0,
  kUserspace = 1,       // clock_gettime around sendmsg/recvmsg
  kSocketSched = 2,     // SO_TIMESTAMPING TX_SCHED (enters the qdisc)
  kSocketSoftware = 3,  // SO_TIMESTAMPING TX_SOFTWARE / RX_SOFTWARE (driver)
  kBpfTc = 4,           // eBPF tc/tcx classifier, egress or ingress
  kBpfXdp = 5,          // eBPF at the driver: XDP on RX, tp_btf/net_dev_start_xmit on TX
  kHardware = 6,        // NIC PHC, converted to the node clock
};
constexpr int kNumStampSources = 7;

// Which way a stamped packet went, for the preference below.
enum class StampDirection : uint8_t { kReceive, kTransmit };

// Preference when several sources stamped the same packet: closest to the
// wire first (DESIGN.md §4), and at the same point the stamp read on
// CLOCK_REALTIME itself over an eBPF stamp, which is MONOTONIC converted
// with an error of tens of ns (kernel_clock_mapping.h).
// TX: TX_SCHED < tc egress < net_dev_start_xmit < TX_SOFTWARE < NIC. The
// tracepoint and TX_SOFTWARE are both the driver's transmit; on the test
// bed the converted one made the errors 0.065 us p50 against 0.02 us
// (PERFORMANCE §4). The tracepoint counts where a driver gives no
// TX_SOFTWARE. RX: tc ingress < RX_SOFTWARE < XDP < NIC: XDP runs before
// NAPI batching and GRO, which on a NIC delay RX_SOFTWARE by µs.
// The wire values above are not an order; this is.
constexpr int SourceRank(StampSource s, StampDirection d) {
  switch (s) {
    case StampSource::kNone: return 0;
    case StampSource::kUserspace: return 1;
    case StampSource::kSocketSched: return 2;
    case StampSource::kBpfTc: return 3;
    case StampSource::kSocketSoftware: return d == StampDirection::kTransmit ? 5 : 4;
    case StampSource::kBpfXdp: return d == StampDirection::kTransmit ? 4 : 5;
    case StampSource::kHardware: return 6;
  }
  return 0;
}

std::string_view StampSourceName(StampSource s);
bool ParseStampSource(std::string_view name, StampSource* out);

// A source class groups the sources a window may be estimated from; one
// window uses one class on both ends so the bounds are comparable.
enum class SourceClass : uint8_t {
  kUserspace = 0,  // userspace stamps only
  kKernel = 1,     // best kernel stamp (software, else sched)
};
std::string_view SourceClassName(SourceClass c);
bool ParseSourceClass(std::string_view name, SourceClass* out);

}  // namespace chronolink
