// Files holding secrets (the cluster key, the etcd password, a TLS private
// key): read only when nobody but their owner, root or the agent's own user,
// may read or write them. Pure functions or one file read; thread-safe.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace chronolink {

// Reads a secret file of at most max_bytes. Refused, with a message that
// starts with `where` and says how to fix it, when the file is readable or
// writable by anyone but its owner (mode bits, or a POSIX ACL granting a
// group, other, or a user other than root and the caller), when it is owned
// by a user other than root and the caller's effective uid, or when it is
// not a regular file or larger than max_bytes. `what` names the secret in
// that message ("the cluster key"). Callers wipe *contents after use.
bool ReadPrivateFile(const std::string& path, const std::string& where, const std::string& what,
                     size_t max_bytes, std::string* contents, std::string* error);

// Who besides the owner may read or write a file of this mode and access ACL
// (the raw value of the "system.posix_acl_access" extended attribute; empty
// when the file has none), given that root and `self` are trusted: "" when
// nobody, else e.g. "its group (mode 0640)". Pure, for the check above and
// its tests.
std::string KeyFileForeignAccess(mode_t mode, std::string_view acl_xattr, uid_t self);

}  // namespace chronolink
