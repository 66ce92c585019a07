// One XSpace host through every way chronolink-trace aligns it, compared:
// the model path (parse, AlignPlannedHost, serialise: what a streamed run
// does for a host the rewrite declines, and --no-wire-rewrite for all),
// the hold-all path (AlignHosts on the parsed host, --hold-all), and the
// wire-level rewrite on an exact plan and on a plan whose last instant is
// only guessed (a predicted plan's case). Every output must parse with
// protobuf and with the project's reader; the wire outputs, where the
// rewrite does not decline, must parse to the model's XSpace (NaN equal to
// NaN) with the same HostAlignment; a decline needs a reason and may never
// be the rewrite's own output check failing (that is a bug caught late).
// Also tallied: how often each path ran, why the rewrite declined, and the
// lines and planes whose length prefix changed varint width on the way
// (127/128, 16 383/16 384, 2 097 151/2 097 152 bytes), in each direction.
//
// For property tests over generated inputs (tests/support/
// xspace_generator.h) and the structure-aware fuzz target. Not thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "proto/xplane.pb.h"
#include "trace/align/trace_aligner.h"
#include "trace/correct/clock_correction.h"
#include "trace/correct/host_clock_map.h"

namespace chronolink::trace::testing {

// Node 1's clock map against reference node 2, solved every 2 s from
// `from_ns` to `to_ns`: an offset and drift chosen by `variant` (positive
// and negative, ms to tens of ms, up to ±100 ppm), a gap of unreachable
// instants in some variants.
struct TestClockMap {
  std::shared_ptr<ClusterCorrection> cluster;
  std::unique_ptr<HostClockMap> map;
};
TestClockMap MakeTestClockMap(int64_t from_ns, int64_t to_ns, uint64_t variant);

// An XSpace's bytes as protobuf writes them deterministically (maps sorted,
// unknown fields as stored): equal messages give equal bytes.
std::string CanonicalBytes(const xspace::XSpace& space);

struct AlignPathsTally {
  int64_t hosts = 0;
  int64_t unrepresentable = 0;  // refused by every path: an offset past int64 ps once re-based
  int64_t outputs_parsed = 0;  // outputs of any path, each parsed by protobuf and by ParseXSpace
  int64_t wire_aligned = 0;
  int64_t wire_declined = 0;
  std::map<std::string, int64_t> decline_reasons;
  // [0 line, 1 plane][boundary 128, 16 384, 2 097 152][0 grew past it, 1 shrank below it]
  std::array<std::array<std::array<int64_t, 2>, 3>, 2> width_crossings{};

  void Add(const AlignPathsTally& other);
  std::string Summary() const;
};

// Every path on the host file `bytes`; false with *failure (what broke,
// which path) when an invariant does not hold. The model path must align
// the host (the generator's hosts are valid and lie within the map) but
// for one case: a line whose events lie so far from its own timestamp (~106
// days) that an offset re-based on the line's mapped start passes int64
// picoseconds; the model refuses it with that reason, the rewrite declines.
bool CheckAlignPaths(std::string_view bytes, const HostClockMap& map, const AlignOptions& options,
                     AlignPathsTally* tally, std::string* failure);

}  // namespace chronolink::trace::testing
