// Authenticated etcd values (docs/security.md, docs/formats.md "Sealed
// etcd values"). Anyone who can write to etcd, or who sits on its path, can
// put any value under chronolink's prefix; so every value chronolink writes
// there is sealed: a one-line header naming who wrote it, under which lease
// (the writer's term), with which sequence and when, and a keyed MAC over
// the etcd key, that header and the body, under a subkey of the cluster
// key. The header is parsed with fixed rules and the MAC checked before any
// byte of the body is parsed. What a reader then demands of a sealed value
// (which writer, which lease, how fresh) is etcd_value_codec.h's.
//
// Layout, one header line and the body:
//   chronolink-sealed-v1 writer=<u32> term=<i64> seq=<u64> t_ns=<i64> mac=<64 hex>\n<body>
//
// Thread-safe: the seal is immutable after construction.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "agent/wire/probe_codec.h"

namespace chronolink {

struct SealHeader {
  uint32_t writer = 0;  // node id of the writer
  int64_t term = 0;     // the etcd lease the value is bound to (0: none)
  uint64_t seq = 0;     // the writer's sequence (per process, or the snapshot's)
  int64_t t_ns = 0;     // the writer's CLOCK_REALTIME when it wrote
  friend bool operator==(const SealHeader&, const SealHeader&) = default;
};

enum class SealResult : uint8_t {
  kOk = 0,
  kUnsealed,  // not in the sealed layout at all (a foreign or an old writer)
  kBadMac,    // the layout is right, the MAC is not: forged or damaged
};

class EtcdValueSeal {
 public:
  static constexpr size_t kMacSize = 32;
  static constexpr size_t kMaxHeaderBytes = 200;

  explicit EtcdValueSeal(const ClusterKey& cluster_key);
  ~EtcdValueSeal();
  EtcdValueSeal(const EtcdValueSeal&) = delete;
  EtcdValueSeal& operator=(const EtcdValueSeal&) = delete;

  // The value to store under `etcd_key` (the full key, prefix included).
  std::string Seal(std::string_view etcd_key, const SealHeader& header, std::string_view body) const;

  // kOk fills *header and points *body into `value`; anything else leaves
  // them untouched.
  SealResult Open(std::string_view etcd_key, std::string_view value, SealHeader* header,
                  std::string_view* body) const;

 private:
  std::array<uint8_t, kMacSize> Mac(std::string_view etcd_key, const SealHeader& header,
                                    std::string_view body) const;

  std::array<uint8_t, 32> subkey_{};
};

}  // namespace chronolink
