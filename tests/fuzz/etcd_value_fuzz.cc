// libFuzzer target for the sealed etcd values (agent/coord/etcd/etcd_value_seal.h)
// and their readers (etcd_value_codec.h): whatever anyone who can write to
// etcd puts under chronolink's prefix. The first byte picks what the rest is:
//  0  a raw value read at one of the codec's keys, with a lease: the seal's
//     header parser and every reader. A value the seal accepts is the one
//     spelling its writer produces (resealing its header and body gives the
//     same bytes), and each reader's acceptance keeps its rules (writer,
//     lease binding, key).
//  1  header fields and a body chosen by the input, sealed with the cluster
//     key (as a key holder, or a buggy peer, would): the seal opens to the
//     same header and body, under no other etcd key and no other cluster
//     key; the readers then parse the authentic body behind the MAC.
//  2  a member built from the input, sealed by the codec's own SealMember:
//     the reader accepts it back unchanged.
// Invariants also: no crash, hang or sanitizer report; every refusal is a
// named reason.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "agent/coord/etcd/etcd_value_codec.h"

namespace {

using chronolink::ClusterKey;
using chronolink::EtcdKeyValue;
using chronolink::EtcdRefusal;
using chronolink::EtcdValueCodec;
using chronolink::EtcdValueSeal;
using chronolink::LeaderClaim;
using chronolink::SealHeader;
using chronolink::SealResult;

constexpr uint32_t kSelf = 3;
constexpr int64_t kNow = 1'700'000'000'000'000'000;
const std::string kPrefix = "/chronolink/fuzz/";

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "etcd_value_fuzz invariant violated: %s\n", what);
  std::abort();
}

ClusterKey Key(uint8_t salt) {
  ClusterKey k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(salt ^ (i * 13));
  return k;
}

EtcdValueCodec& Codec() {
  static EtcdValueCodec codec(Key(0x5A), kPrefix, kSelf);
  return codec;
}
const EtcdValueSeal& Seal() {
  static const EtcdValueSeal seal(Key(0x5A));
  return seal;
}
const EtcdValueSeal& OtherSeal() {
  static const EtcdValueSeal seal(Key(0xA5));
  return seal;
}

void CheckReason(const std::optional<EtcdRefusal>& r) {
  if (r && chronolink::EtcdRefusalName(*r) == "unknown") Fail("unnamed refusal");
}

// Every reader on one key-value; what each accepts keeps its rules.
void ReadAll(const EtcdKeyValue& kv, uint32_t member_id) {
  SealHeader h;
  std::string_view body;
  const SealResult sealed = Seal().Open(kv.key, kv.value, &h, &body);
  const bool bound = sealed == SealResult::kOk && h.term != 0 && h.term == kv.lease;

  chronolink::Member m;
  auto r = Codec().OpenMember(kv, member_id, &m);
  CheckReason(r);
  if (!r && (!bound || h.writer != member_id || m.id != member_id)) Fail("member accepted against its rules");

  LeaderClaim claim;
  r = Codec().OpenLeader(kv, &claim);
  CheckReason(r);
  if (!r && (!bound || claim.id != h.writer || claim.term != h.term)) Fail("leader accepted against its rules");
}

std::string PickKey(FuzzedDataProvider* in, uint32_t* member_id) {
  *member_id = in->ConsumeIntegralInRange<uint32_t>(1, 9);
  switch (in->ConsumeIntegralInRange<int>(0, 3)) {
    case 0: return Codec().MemberKey(*member_id);
    case 1: return Codec().LeaderKey();
    case 2: return Codec().GraphKey();
    default: return in->ConsumeRandomLengthString(64);
  }
}

void RawValue(FuzzedDataProvider* in) {
  EtcdKeyValue kv;
  uint32_t member_id = 0;
  kv.key = PickKey(in, &member_id);
  kv.lease = in->ConsumeIntegralInRange<int64_t>(-1, 3);
  kv.value = in->ConsumeRemainingBytesAsString();
  SealHeader h;
  std::string_view body;
  if (Seal().Open(kv.key, kv.value, &h, &body) == SealResult::kOk &&
      Seal().Seal(kv.key, h, body) != kv.value)
    Fail("an accepted sealed value is not its writer's spelling");
  ReadAll(kv, member_id);
}

void KeyHolderValue(FuzzedDataProvider* in) {
  EtcdKeyValue kv;
  uint32_t member_id = 0;
  kv.key = PickKey(in, &member_id);
  SealHeader h;
  h.writer = in->ConsumeBool() ? member_id : in->ConsumeIntegral<uint32_t>();
  h.term = in->ConsumeIntegralInRange<int64_t>(-1, 3);
  h.seq = in->ConsumeIntegral<uint64_t>();
  h.t_ns = in->ConsumeBool() ? kNow + in->ConsumeIntegralInRange<int64_t>(-200'000'000'000, 200'000'000'000)
                             : in->ConsumeIntegral<int64_t>();
  kv.lease = in->ConsumeBool() ? h.term : in->ConsumeIntegralInRange<int64_t>(-1, 3);
  const std::string body = in->ConsumeRemainingBytesAsString();
  kv.value = Seal().Seal(kv.key, h, body);

  SealHeader got;
  std::string_view got_body;
  if (Seal().Open(kv.key, kv.value, &got, &got_body) != SealResult::kOk || got != h || got_body != body)
    Fail("a sealed value does not open to what was sealed");
  if (Seal().Open(kv.key + "x", kv.value, &got, &got_body) != SealResult::kBadMac)
    Fail("a sealed value opens under another etcd key");
  if (OtherSeal().Open(kv.key, kv.value, &got, &got_body) != SealResult::kBadMac)
    Fail("a sealed value opens under another cluster key");
  ReadAll(kv, member_id);
}

void CodecRoundTrip(FuzzedDataProvider* in) {
  const int64_t lease = in->ConsumeIntegralInRange<int64_t>(1, 1'000'000);
  chronolink::Member m;
  m.id = kSelf;
  m.port = in->ConsumeIntegralInRange<uint16_t>(1, 65535);
  // Printable ASCII: an agent's address is an IP literal from its config.
  m.address = in->ConsumeRandomLengthString(40);
  for (char& c : m.address) c = static_cast<char>(0x20 + (static_cast<uint8_t>(c) % 0x5F));
  if (m.address.empty()) m.address = "10.0.0.3";
  EtcdKeyValue kv{Codec().MemberKey(kSelf), Codec().SealMember(m, lease, kNow), 1, 1, 1, lease};
  chronolink::Member got;
  if (Codec().OpenMember(kv, kSelf, &got) || !(got == m)) Fail("a sealed member does not read back");

}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  FuzzedDataProvider in(data + 1, size - 1);
  switch (data[0] % 3) {
    case 0: RawValue(&in); break;
    case 1: KeyHolderValue(&in); break;
    default: CodecRoundTrip(&in); break;
  }
  return 0;
}
