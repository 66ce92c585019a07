#include "agent/coord/etcd/etcd_value_seal.h"

#include <sodium.h>

#include <charconv>
#include <cstdlib>

namespace chronolink {

namespace {

constexpr std::string_view kMagic = "chronolink-sealed-v1";
// Domain separation: the cluster key also authenticates probes and the
// coordination channel; etcd values get a subkey of their own.
constexpr std::string_view kSubkeyLabel = "chronolink etcd values v1";

void EnsureSodium() {
  static const int rc = sodium_init();
  if (rc < 0) std::abort();  // no randomness source: nothing would be safe
}

const uint8_t* Bytes(std::string_view s) { return reinterpret_cast<const uint8_t*>(s.data()); }

void PutBigEndian(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (56 - 8 * i));
}

// Strict decimal: digits, and a leading '-' only where the type is
// signed; no spaces, no '+'. (The MAC covers the numbers, not the text.)
template <typename Int>
bool ParseNumber(std::string_view text, Int* out) {
  if (text.empty()) return false;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

// Reads "<name>=<value>" at the front of *rest, up to the next space (or
// the end), and advances past it.
bool TakeField(std::string_view* rest, std::string_view name, std::string_view* value) {
  if (rest->size() <= name.size() || rest->substr(0, name.size()) != name || (*rest)[name.size()] != '=') {
    return false;
  }
  rest->remove_prefix(name.size() + 1);
  const size_t end = rest->find(' ');
  *value = rest->substr(0, end);
  rest->remove_prefix(end == std::string_view::npos ? rest->size() : end + 1);
  return true;
}

bool ParseHeader(std::string_view line, SealHeader* h, std::array<uint8_t, EtcdValueSeal::kMacSize>* mac) {
  if (line.substr(0, kMagic.size()) != kMagic || line.size() <= kMagic.size() || line[kMagic.size()] != ' ') {
    return false;
  }
  std::string_view rest = line.substr(kMagic.size() + 1);
  std::string_view writer, term, seq, t_ns, mac_hex;
  if (!TakeField(&rest, "writer", &writer) || !TakeField(&rest, "term", &term) ||
      !TakeField(&rest, "seq", &seq) || !TakeField(&rest, "t_ns", &t_ns) ||
      !TakeField(&rest, "mac", &mac_hex) || !rest.empty()) {
    return false;
  }
  if (!ParseNumber(writer, &h->writer) || !ParseNumber(term, &h->term) || !ParseNumber(seq, &h->seq) ||
      !ParseNumber(t_ns, &h->t_ns) || mac_hex.size() != 2 * EtcdValueSeal::kMacSize) {
    return false;
  }
  // Lower-case hex only, as the writer spells it: one sealed value, one
  // spelling (etcd_value_fuzz found "…9De9…" accepted beside "…9de9…").
  for (const char c : mac_hex) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  size_t length = 0;
  return sodium_hex2bin(mac->data(), mac->size(), mac_hex.data(), mac_hex.size(), nullptr, &length, nullptr) ==
             0 &&
         length == mac->size();
}

}  // namespace

EtcdValueSeal::EtcdValueSeal(const ClusterKey& cluster_key) {
  EnsureSodium();
  crypto_generichash(subkey_.data(), subkey_.size(), Bytes(kSubkeyLabel), kSubkeyLabel.size(),
                     cluster_key.data(), cluster_key.size());
}

EtcdValueSeal::~EtcdValueSeal() { sodium_memzero(subkey_.data(), subkey_.size()); }

std::array<uint8_t, EtcdValueSeal::kMacSize> EtcdValueSeal::Mac(std::string_view etcd_key,
                                                                 const SealHeader& header,
                                                                 std::string_view body) const {
  // Fixed-width fields and length-prefixed strings: no two different
  // (key, header, body) triples hash the same bytes.
  uint8_t fixed[8 * 6];
  PutBigEndian(fixed, etcd_key.size());
  PutBigEndian(fixed + 8, header.writer);
  PutBigEndian(fixed + 16, static_cast<uint64_t>(header.term));
  PutBigEndian(fixed + 24, header.seq);
  PutBigEndian(fixed + 32, static_cast<uint64_t>(header.t_ns));
  PutBigEndian(fixed + 40, body.size());
  std::array<uint8_t, kMacSize> mac{};
  crypto_generichash_state st;
  crypto_generichash_init(&st, subkey_.data(), subkey_.size(), mac.size());
  crypto_generichash_update(&st, Bytes(kMagic), kMagic.size());
  crypto_generichash_update(&st, fixed, sizeof(fixed));
  crypto_generichash_update(&st, Bytes(etcd_key), etcd_key.size());
  crypto_generichash_update(&st, Bytes(body), body.size());
  crypto_generichash_final(&st, mac.data(), mac.size());
  return mac;
}

std::string EtcdValueSeal::Seal(std::string_view etcd_key, const SealHeader& header,
                                std::string_view body) const {
  const std::array<uint8_t, kMacSize> mac = Mac(etcd_key, header, body);
  char hex[2 * kMacSize + 1];
  sodium_bin2hex(hex, sizeof(hex), mac.data(), mac.size());
  std::string out;
  out.reserve(kMaxHeaderBytes + body.size());
  out.append(kMagic);
  out += " writer=" + std::to_string(header.writer) + " term=" + std::to_string(header.term) +
         " seq=" + std::to_string(header.seq) + " t_ns=" + std::to_string(header.t_ns) + " mac=";
  out.append(hex, 2 * kMacSize);
  out += '\n';
  out.append(body);
  return out;
}

SealResult EtcdValueSeal::Open(std::string_view etcd_key, std::string_view value, SealHeader* header,
                               std::string_view* body) const {
  const size_t newline = value.substr(0, kMaxHeaderBytes).find('\n');
  if (newline == std::string_view::npos) return SealResult::kUnsealed;
  SealHeader h;
  std::array<uint8_t, kMacSize> claimed{};
  if (!ParseHeader(value.substr(0, newline), &h, &claimed)) return SealResult::kUnsealed;
  const std::string_view b = value.substr(newline + 1);
  const std::array<uint8_t, kMacSize> expected = Mac(etcd_key, h, b);
  if (sodium_memcmp(expected.data(), claimed.data(), kMacSize) != 0) return SealResult::kBadMac;
  *header = h;
  *body = b;
  return SealResult::kOk;
}

}  // namespace chronolink
