// The randomness behind the test input generators (xspace_generator.h,
// chrome_trace_generator.h): a seeded PRNG for property tests, or the bytes
// a fuzzer gives for structure-aware fuzz targets, behind one interface.
//
// Only the standard library: the generators are compiled into libFuzzer
// targets too.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace chronolink::trace::testing {

// Randomness that is either a seeded PRNG (xoshiro256**, seeded through
// splitmix64) or a byte string a fuzzer gives, consumed byte by byte, zeros
// once it is exhausted: one generator then serves property tests and a
// structure-aware fuzz target. Zero bytes mean the plain choice everywhere
// (Below gives 0, Chance gives false), so a short or empty input still
// yields a small, ordinary file and every loop ends.
class GeneratorRandom {
 public:
  explicit GeneratorRandom(uint64_t seed);
  GeneratorRandom(const uint8_t* data, size_t size);

  uint64_t Next();                          // 64 bits (8 fuzz bytes)
  uint64_t Below(uint64_t n);               // [0, n); 0 when n <= 1
  int64_t Between(int64_t lo, int64_t hi);  // [lo, hi], lo <= hi
  bool Chance(double p);                    // true with probability p

 private:
  uint64_t FuzzBytes(int count);  // big-endian, zeros past the end

  bool fuzz_ = false;
  std::array<uint64_t, 4> state_{};
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t pos_ = 0;
};

}  // namespace chronolink::trace::testing
