// The cluster key: hex parsing, the key file (its permissions checked before
// a byte is read) and the self-wiping key type.
#include "agent/wire/cluster_key.h"

#include <sodium.h>

#include <cstring>

#include "agent/wire/private_file.h"

namespace chronolink {
namespace {

// Wipes a buffer that held key material, on every way out of a scope.
class WipeOnExit {
 public:
  explicit WipeOnExit(std::string& s) : s_(s) {}
  ~WipeOnExit() { sodium_memzero(s_.data(), s_.size()); }
  WipeOnExit(const WipeOnExit&) = delete;
  WipeOnExit& operator=(const WipeOnExit&) = delete;

 private:
  std::string& s_;
};

bool IsHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
uint8_t HexValue(char c) {
  if (c >= '0' && c <= '9') return static_cast<uint8_t>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<uint8_t>(c - 'a' + 10);
  return static_cast<uint8_t>(c - 'A' + 10);
}

bool IsAllZero(const ClusterKey& key) {
  uint8_t acc = 0;
  for (uint8_t b : key) acc |= b;
  return acc == 0;
}

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

}  // namespace

ClusterKey::~ClusterKey() { sodium_memzero(data(), size()); }

bool ParseClusterKeyHex(std::string_view hex, ClusterKey* key, std::string* error) {
  constexpr size_t kHexChars = 2 * kClusterKeySize;
  if (hex.size() != kHexChars) {
    *error = "cluster key must be exactly " + std::to_string(kHexChars) +
             " hex characters (" + std::to_string(kClusterKeySize) + " bytes), got " +
             std::to_string(hex.size()) + " characters";
    return false;
  }
  for (size_t i = 0; i < hex.size(); ++i) {
    if (!IsHex(hex[i])) {
      *error = "cluster key has a non-hex character at position " + std::to_string(i) +
               " (expected 0-9, a-f or A-F)";
      return false;
    }
  }
  ClusterKey parsed{};  // wipes itself
  for (size_t i = 0; i < kClusterKeySize; ++i) {
    parsed[i] = static_cast<uint8_t>((HexValue(hex[2 * i]) << 4) | HexValue(hex[2 * i + 1]));
  }
  if (IsAllZero(parsed)) {
    *error = "cluster key is all zeros; generate a random key (e.g. `openssl rand -hex 32`)";
    return false;
  }
  *key = parsed;
  return true;
}

bool LoadClusterKeyFile(const std::string& path, ClusterKey* key, std::string* error) {
  const std::string where = "cluster key file '" + path + "'";
  // Read at most a little more than the largest valid file; anything longer
  // is refused without reading it all.
  constexpr size_t kMaxFile = 4096;
  std::string data;
  WipeOnExit wipe(data);
  if (!ReadPrivateFile(path, where, "the cluster key", kMaxFile, &data, error)) return false;
  const size_t got = data.size();

  const std::string expect = " (expected " + std::to_string(2 * kClusterKeySize) +
                             " hex characters or exactly " +
                             std::to_string(kClusterKeySize) + " raw bytes)";
  if (got == kClusterKeySize) {
    ClusterKey raw{};
    std::memcpy(raw.data(), data.data(), kClusterKeySize);
    if (IsAllZero(raw)) {
      *error = where + " holds an all-zero key; generate a random key";
      return false;
    }
    *key = raw;
    return true;
  }
  // Trimmed in place (the buffer is not resized, so the wipe covers it all).
  size_t b = 0, e = got;
  while (b < e && IsSpace(data[b])) ++b;
  while (e > b && IsSpace(data[e - 1])) --e;
  const std::string_view text(data.data() + b, e - b);
  if (text.empty()) {
    *error = where + " is empty" + expect;
    return false;
  }
  if (text.size() != 2 * kClusterKeySize) {
    *error = where + " has the wrong size: " + std::to_string(got) + " bytes, " +
             std::to_string(text.size()) + " without surrounding whitespace" + expect;
    return false;
  }
  std::string parse_error;
  if (!ParseClusterKeyHex(text, key, &parse_error)) {
    *error = where + ": " + parse_error;
    return false;
  }
  return true;
}

}  // namespace chronolink
