// Both solvers evaluate each estimate at its prober's instant of the
// reference instant T (docs/solver.md "The problem at one reference
// instant T"): T is on the reference clock, an estimate's x0 on its
// prober's, and alpha x the prober's offset apart (45 ppm x 3.7 ms = 166
// ns). The probers' offsets come from a pass evaluated where the pass
// before put them, each pass erring alpha x the last one's error: alpha^k
// x the offset after k. Pure arithmetic on the estimates and a solution.
#pragma once

#include <span>
#include <vector>

#include "agent/solve/global_solver.h"

namespace chronolink {

// Each estimate moved onto the reference clock: x0 less its prober's solved
// offset (unchanged where the prober has none).
std::vector<EdgeEstimate> ShiftedToProbers(std::span<const EdgeEstimate> edges, const SolveResult& probers);

// The passes of the probers' offsets (1 to 4) that leave max|alpha|^(k+1) x
// the largest offset between two nodes of `first` (the first pass's
// solution) under 0.1 ns: 1 at the agents' fit clocks (≲ 1 ppm apart), 2 at
// ±100 ppm and ±50 ms, 3 at thousands of ppm.
int ProberPasses(std::span<const EdgeEstimate> edges, const SolveResult& first);

}  // namespace chronolink
