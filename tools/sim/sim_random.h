// Deterministic random numbers for the simulator. The standard library's
// distributions are implementation-defined (libstdc++ and libc++ draw
// different numbers from the same engine), so the transforms are written
// out here: a --seed reproduces the same run on any platform.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>

namespace chronolink::sim {

// splitmix64's finaliser: a bijective 64-bit mix.
inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A seed for one independent stream, derived from the run's seed and the
// stream's coordinates (what it is for, which node or edge).
inline uint64_t StreamSeed(uint64_t seed, std::initializer_list<uint64_t> coordinates) {
  uint64_t h = Mix64(seed);
  for (uint64_t c : coordinates) h = Mix64(h ^ Mix64(c));
  return h;
}

// xoshiro256** (Blackman and Vigna), seeded through splitmix64.
class SimRandom {
 public:
  explicit SimRandom(uint64_t seed) {
    for (uint64_t& s : s_) {
      seed += 0x9e3779b97f4a7c15ULL;
      s = Mix64(seed);
    }
  }

  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1), 53 bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  bool Chance(double p) { return Uniform() < p; }
  // Exponential with the given mean (0 for a mean of 0).
  double Exponential(double mean) { return mean > 0 ? -mean * std::log1p(-Uniform()) : 0.0; }
  // Standard normal (Box–Muller; one of the pair is dropped for simplicity).
  double Normal() {
    const double u = 1.0 - Uniform();  // (0, 1]: log(u) finite
    return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * Uniform());
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace chronolink::sim
