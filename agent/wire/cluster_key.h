// The cluster key: 32 bytes shared by every node, under which probes are
// MACed and the coordination channel and etcd values are keyed. Parsing it
// from hex, loading it from a file (refused when other users could read or
// replace it), and a key type that wipes itself. Functions here are pure or
// read one file; they are safe from any thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <sys/types.h>

#include "agent/wire/private_file.h"  // KeyFileForeignAccess

namespace chronolink {

constexpr size_t kClusterKeySize = 32;

// A std::array of the key's bytes (use it as one: k[i], k.data(), ==) that
// zeroes itself with sodium_memzero when destroyed, so that the copies in the
// config, the codec and the channels leave no key bytes in freed memory.
// Still an aggregate: `ClusterKey k{};` is an all-zero key.
struct ClusterKey : std::array<uint8_t, kClusterKeySize> {
  ~ClusterKey();
};

// Key from 64 hex characters; false with a message in *error otherwise.
bool ParseClusterKeyHex(std::string_view hex, ClusterKey* key, std::string* error);

// Key file: 64 hex characters (surrounding whitespace ignored) or 32 raw
// bytes. Refused, with a message saying how to fix it, when the file is
// readable or writable by anyone but its owner (mode bits, or a POSIX ACL
// granting a group, other, or a user other than root and the caller), or
// when it is owned by a user other than root and the caller's effective uid.
// The file's contents are wiped from memory once parsed.
bool LoadClusterKeyFile(const std::string& path, ClusterKey* key, std::string* error);

}  // namespace chronolink
