// Secret files: the owner and access checks (mode bits and POSIX ACLs)
// done on the open file before a byte is read.
#include "agent/wire/private_file.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
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

// Who owns the file and who else may read or write it; "" when it is fine.
std::string CheckFileAccess(int fd, const struct stat& st, const std::string& path, const std::string& what) {
  const uid_t self = ::geteuid();
  const std::string fix = "make it readable by the agent's user only: chmod 600 '" + path +
                          "' (chown root, or the user the agent runs as)";
  if (st.st_uid != 0 && st.st_uid != self) {
    return "is owned by " + UserName(st.st_uid) + ", neither root nor the agent's " + UserName(self) +
           ": that user could replace " + what + "; " + fix;
  }
  std::string acl, why;
  if (!ReadAccessAcl(fd, &acl, &why)) return why;
  const std::string others = KeyFileForeignAccess(st.st_mode, acl, self);
  if (others.empty()) return "";
  return "may be read or written by " + others + ": other users could learn or change " + what + "; " +
         fix + (acl.empty() ? "" : " and remove the ACL (setfacl -b)");
}

}  // namespace

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

bool ReadPrivateFile(const std::string& path, const std::string& where, const std::string& what,
                     size_t max_bytes, std::string* contents, std::string* error) {
  contents->clear();
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
  if (const std::string refusal = CheckFileAccess(fd, st, path, what); !refusal.empty()) {
    *error = where + " " + refusal;
    ::close(fd);
    return false;
  }
  // One byte more than allowed tells a file that is too large without
  // reading it all.
  contents->assign(max_bytes + 1, '\0');
  size_t got = 0;
  while (got < contents->size()) {
    const ssize_t n = ::read(fd, contents->data() + got, contents->size() - got);
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
  if (got > max_bytes) {
    *error = where + " is too large (more than " + std::to_string(max_bytes) + " bytes)";
    return false;
  }
  // Shrinking keeps the buffer: the caller's wipe covers every byte read.
  contents->resize(got);
  return true;
}

}  // namespace chronolink
