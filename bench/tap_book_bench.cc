// Cost of the tap record book (agent/probe/tap_stamp_book.*) per record, for
// honest traffic and under a flood of forged receive records whose ids an
// off-path sender chose to collide under the book's old unkeyed hash (MAC
// bytes 0-7, sequence number, index; issue 29 finding 5). Uses only the
// book's public calls, so the same file builds against the old book for the
// before figure (docs/PERFORMANCE.md):
//
//   build/bench/tap_book_bench --benchmark_min_time=1
//
// honest: per packet, its XDP and tc-ingress records and then its authentic
// datagram (what a received probe costs the agent), with the book in steady
// state (remembered pool full). flood/<n>: per forged record, one of n ids
// that all share MAC bytes 0-7, sequence number and index (they differ in
// MAC bytes 8-15 and the sender's epoch), the held pool full (4 096) so each
// record also evicts the oldest. Time is per iteration (a packet, a
// record); per_record is per record.
#include <benchmark/benchmark.h>

#include <cstdint>

#include "agent/probe/tap_stamp_book.h"

namespace chronolink {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64: MAC-like bytes for honest packets
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

TapStamp Record(uint32_t hook, const PacketKey& key, const PacketMac& mac, int64_t ns) {
  TapStamp t;
  t.hook = hook;
  t.ifindex = 2;
  t.key = key;
  t.mac = mac;
  t.stamp = {ns, TapHookSource(hook)};
  return t;
}

struct Honest {
  uint64_t seq = 0;
  // Two receive records and the datagram of the next honest packet.
  void Packet(TapStampBook& book) {
    ++seq;
    const PacketKey key{MessageType::kForward, 2, 1, 0xE, seq, static_cast<uint8_t>(seq & 1)};
    PacketMac mac;
    const uint64_t a = Mix(seq), b = Mix(~seq);
    for (int i = 0; i < 8; ++i) {
      mac[i] = static_cast<uint8_t>(a >> (8 * i));
      mac[8 + i] = static_cast<uint8_t>(b >> (8 * i));
    }
    const int64_t ns = static_cast<int64_t>(seq) * 1000;
    book.OnRecord(Record(CHRONOLINK_HOOK_XDP, key, mac, ns));
    book.OnRecord(Record(CHRONOLINK_HOOK_TC_INGRESS, key, mac, ns + 100));
    benchmark::DoNotOptimize(book.OnAuthenticDatagram(key, mac));
  }
};

struct Forger {
  uint64_t n;
  uint64_t i = 0;
  // The next of n ids colliding under the old hash; new to the book while
  // n exceeds the held pool (4 096).
  void Record1(TapStampBook& book) {
    const uint64_t k = i++ % n;
    const PacketKey key{MessageType::kForward, 2, 1, 0x1000 + k, 77, 0};
    PacketMac mac;
    mac.fill(0x5A);
    for (int b = 0; b < 8; ++b) mac[8 + b] = static_cast<uint8_t>(k >> (8 * (b & 3)));
    book.OnRecord(Record(CHRONOLINK_HOOK_XDP, key, mac, static_cast<int64_t>(i)));
  }
};

// Time per record, printed with an SI prefix ("250n" is 250 ns).
benchmark::Counter PerRecord(double records) {
  return benchmark::Counter(records, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_Honest(benchmark::State& state) {
  TapStampBook book;
  Honest honest;
  for (int i = 0; i < 20'000; ++i) honest.Packet(book);
  for (auto _ : state) honest.Packet(book);
  state.counters["per_record"] = PerRecord(static_cast<double>(state.iterations()) * 2);
}
BENCHMARK(BM_Honest)->Name("honest");

void BM_Flood(benchmark::State& state) {
  TapStampBook book;
  Forger forger{static_cast<uint64_t>(state.range(0))};
  for (int i = 0; i < 10'000; ++i) forger.Record1(book);
  for (auto _ : state) forger.Record1(book);
  state.counters["per_record"] = PerRecord(static_cast<double>(state.iterations()));
}
BENCHMARK(BM_Flood)->Name("flood")->Arg(10'000);

}  // namespace
}  // namespace chronolink

BENCHMARK_MAIN();
