#include "tests/support/generator_random.h"

#include <bit>
#include <limits>

namespace chronolink::trace::testing {

namespace {

uint64_t SplitMix64(uint64_t* x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

GeneratorRandom::GeneratorRandom(uint64_t seed) {
  for (auto& word : state_) word = SplitMix64(&seed);
}

GeneratorRandom::GeneratorRandom(const uint8_t* data, size_t size) : fuzz_(true), data_(data), size_(size) {}

uint64_t GeneratorRandom::FuzzBytes(int count) {
  uint64_t v = 0;
  for (int i = 0; i < count; ++i) v = (v << 8) | (pos_ < size_ ? data_[pos_++] : 0);
  return v;
}

uint64_t GeneratorRandom::Next() {
  if (fuzz_) return FuzzBytes(8);
  // xoshiro256** (Blackman and Vigna).
  const uint64_t result = std::rotl(state_[1] * 5, 7) * 9;
  const uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = std::rotl(state_[3], 45);
  return result;
}

uint64_t GeneratorRandom::Below(uint64_t n) {
  if (n <= 1) return 0;
  // A fuzzer's bytes are spent sparingly: only as many as n needs.
  if (fuzz_) return FuzzBytes(static_cast<int>((std::bit_width(n - 1) + 7) / 8)) % n;
  const uint64_t threshold = (0 - n) % n;  // rejection keeps it unbiased
  for (;;) {
    const uint64_t r = Next();
    if (r >= threshold) return r % n;
  }
}

int64_t GeneratorRandom::Between(int64_t lo, int64_t hi) {
  const uint64_t range = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
  if (range == std::numeric_limits<uint64_t>::max()) return static_cast<int64_t>(Next());
  return static_cast<int64_t>(static_cast<uint64_t>(lo) + Below(range + 1));
}

bool GeneratorRandom::Chance(double p) {
  // A zero fuzz byte reads as "no" for any p < 1: exhausted input means the
  // plain choice, and loops of Chance end.
  if (fuzz_) return (255.5 - static_cast<double>(FuzzBytes(1))) / 256.0 < p;
  return static_cast<double>(Next() >> 11) * 0x1.0p-53 < p;
}

}  // namespace chronolink::trace::testing
