#pragma once

#include <cerrno>
#include <cstring>
#include <string>

namespace chronolink {

// "what: <strerror(errno)>", the form of every file error the common
// writers and readers report. Call it before anything else can set errno.
inline std::string ErrnoMessage(const std::string& what) { return what + ": " + std::strerror(errno); }

}  // namespace chronolink
