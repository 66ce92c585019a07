// The cluster key: hex parsing, the key file (its permissions checked before
// a byte is read) and the self-wiping key type.
#include "agent/wire/cluster_key.h"

#include <fcntl.h>
#include <pwd.h>
#include <sodium.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace chronolink {
namespace {

// POSIX access ACL as the kernel stores it in "system.posix_acl_access"
// (include/uapi/linux/posix_acl_xattr.h): a little-endian u32 version 2, then
// 8-byte entries {u16 tag, u16 perm, u32 id}.
constexpr uint32_t kAclXattrVersion = 2;
constexpr uint16_t kAclUserObj = 0x01;
constexpr uint16_t kAclUser = 0x02;
constexpr uint16_t kAclGroupObj = 0x04;
constexpr uint16_t kAclGroup = 0x08;
constexpr uint16_t kAclMask = 0x10;
constexpr uint16_t kAclOther = 0x20;
constexpr uint16_t kAclReadWrite = 0x4 | 0x2;

struct AclEntry {
  uint16_t tag = 0;
  uint16_t perm = 0;
  uint32_t id = 0;
};

uint32_t LittleEndian(const unsigned char* p, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

bool ParseAcl(std::string_view xattr, std::vector<AclEntry>* out) {
  const auto* p = reinterpret_cast<const unsigned char*>(xattr.data());
  if (xattr.size() < 4 || (xattr.size() - 4) % 8 != 0 || LittleEndian(p, 4) != kAclXattrVersion) {
    return false;
  }
  for (size_t off = 4; off < xattr.size(); off += 8) {
    out->push_back({static_cast<uint16_t>(LittleEndian(p + off, 2)),
                    static_cast<uint16_t>(LittleEndian(p + off + 2, 2)), LittleEndian(p + off + 4, 4)});
  }
  return true;
}

std::string Octal(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

std::string UserName(uid_t uid) {
  const passwd* pw = getpwuid(uid);
  return "uid " + std::to_string(uid) + (pw != nullptr ? " (" + std::string(pw->pw_name) + ")" : "");
}

// Access ACL of an open file: "" when it has none (or the filesystem has no ACLs).
bool ReadAccessAcl(int fd, std::string* acl, std::string* error) {
  acl->clear();
  for (int attempt = 0; attempt < 3; ++attempt) {
    const ssize_t size = ::fgetxattr(fd, "system.posix_acl_access", nullptr, 0);
    if (size < 0) {
      if (errno == ENODATA || errno == ENOTSUP) return true;
      *error = std::string("cannot read its ACL: ") + std::strerror(errno);
      return false;
    }
    acl->resize(static_cast<size_t>(size));
    const ssize_t got = ::fgetxattr(fd, "system.posix_acl_access", acl->data(), acl->size());
    if (got >= 0) {
      acl->resize(static_cast<size_t>(got));
      return true;
    }
    if (errno != ERANGE) break;  // ERANGE: it grew in between; ask again
  }
  *error = std::string("cannot read its ACL: ") + std::strerror(errno);
  return false;
}

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

// Who owns the file and who else may read or write it; "" when it is fine.
std::string CheckKeyFileAccess(int fd, const struct stat& st, const std::string& path) {
  const uid_t self = ::geteuid();
  const std::string fix = "make it readable by the agent's user only: chmod 600 '" + path +
                          "' (chown root, or the user the agent runs as)";
  if (st.st_uid != 0 && st.st_uid != self) {
    return "is owned by " + UserName(st.st_uid) + ", neither root nor the agent's " + UserName(self) +
           ": that user could replace the cluster key; " + fix;
  }
  std::string acl, why;
  if (!ReadAccessAcl(fd, &acl, &why)) return why;
  const std::string others = KeyFileForeignAccess(st.st_mode, acl, self);
  if (others.empty()) return "";
  return "may be read or written by " + others + ": other users could learn or change the cluster key; " +
         fix + (acl.empty() ? "" : " and remove the ACL (setfacl -b)");
}

}  // namespace

ClusterKey::~ClusterKey() { sodium_memzero(data(), size()); }

std::string KeyFileForeignAccess(mode_t mode, std::string_view acl_xattr, uid_t self) {
  if (acl_xattr.empty()) {
    if (mode & (S_IRGRP | S_IWGRP)) return "its group (mode " + Octal(mode) + ")";
    if (mode & (S_IROTH | S_IWOTH)) return "others (mode " + Octal(mode) + ")";
    return "";
  }
  std::vector<AclEntry> entries;
  if (!ParseAcl(acl_xattr, &entries)) return "anyone its unreadable access ACL names";
  // Named users and groups and the owning group get at most the mask.
  uint16_t mask = kAclReadWrite;
  for (const AclEntry& e : entries) {
    if (e.tag == kAclMask) mask = e.perm;
  }
  for (const AclEntry& e : entries) {
    const uint16_t rw = e.perm & kAclReadWrite;
    switch (e.tag) {
      case kAclUserObj:
      case kAclMask: break;
      case kAclUser:
        if ((rw & mask) && e.id != 0 && e.id != self) return "uid " + std::to_string(e.id) + " (ACL)";
        break;
      case kAclGroupObj:
        if (rw & mask) return "its group (ACL)";
        break;
      case kAclGroup:
        if (rw & mask) return "gid " + std::to_string(e.id) + " (ACL)";
        break;
      case kAclOther:
        if (rw) return "others (ACL)";
        break;
      default: return "anyone its unreadable access ACL names";
    }
  }
  return "";
}

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
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = "cannot open " + where + ": " + std::strerror(errno);
    return false;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    *error = "cannot stat " + where + ": " + std::strerror(errno);
    ::close(fd);
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    *error = where + " is not a regular file";
    ::close(fd);
    return false;
  }
  if (const std::string refusal = CheckKeyFileAccess(fd, st, path); !refusal.empty()) {
    *error = where + " " + refusal;
    ::close(fd);
    return false;
  }
  // Read at most a little more than the largest valid file; anything longer
  // is refused without reading it all.
  constexpr size_t kMaxFile = 4096;
  std::string data(kMaxFile + 1, '\0');
  WipeOnExit wipe(data);
  size_t got = 0;
  while (got < data.size()) {
    const ssize_t n = ::read(fd, data.data() + got, data.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      *error = "cannot read " + where + ": " + std::strerror(errno);
      ::close(fd);
      return false;
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);

  const std::string expect = " (expected " + std::to_string(2 * kClusterKeySize) +
                             " hex characters or exactly " +
                             std::to_string(kClusterKeySize) + " raw bytes)";
  if (got > kMaxFile) {
    *error = where + " is too large" + expect;
    return false;
  }
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
