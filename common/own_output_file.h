// An output file appended to over a long run (edges.jsonl, offsets.jsonl,
// the stamp log), opened so that nothing another user left at its path is
// written through: O_NOFOLLOW (a symbolic link is refused), O_NONBLOCK (a
// FIFO cannot block the open), and the file must be a regular file of this
// process's own user with one link (a hard link to someone's file is
// refused). An output directory others can write is where such a plant
// could be; refusing it there is the caller's message, with the fix.
#pragma once

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace chronolink {

// Why a file this process opened to write must not be used, or "": it is
// not a regular file, another user's, or linked elsewhere too. The rule
// the clock page (agent/export/clock_mapping_publisher.h) applies as well,
// with one more check of its own.
std::string OwnFileRefusal(const struct stat& st);

enum class OwnOutputMode { kAppend, kTruncate };

// The descriptor (created 0644 when missing; emptied for kTruncate only
// once it has passed the checks), or -1 with a message that names the path
// and what was found there.
int OpenOwnOutput(const std::filesystem::path& path, OwnOutputMode mode, std::string* error);

// The same, appending, as a stream.
std::FILE* OpenOwnOutputForAppend(const std::filesystem::path& path, std::string* error);

}  // namespace chronolink
