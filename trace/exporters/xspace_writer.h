// Writes a HostTrace's XSpace to `<host>.xplane.pb` atomically, through
// AtomicOutputFile (atomic_output_file.h): serialized to a temporary file in
// the same directory, fsync'd, renamed over `path`, and the directory
// fsync'd. Whatever fails, the temporary file is removed and `path` is
// either its old self or absent, never half written.
//
// Serialization is deterministic (map entries sorted by key), so a file
// read and written again is byte for byte the same, unknown fields included
// (protobuf writes them after the known fields of their message). The file
// ends where the message ends: no trailing bytes.
//
// Stateless; writing different paths from several threads is safe.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "trace/model/host_trace.h"

namespace chronolink::trace {

bool WriteXSpaceFile(const HostTrace& trace, const std::filesystem::path& path, std::string* error);

// Already serialised XSpace bytes (the wire-level align's output), written
// the same way: whole or not at all, with one write() where the kernel takes it.
// From a 4 KiB-aligned buffer of 1 MiB or more (WireOutput's), the whole
// 4 KiB blocks are written with O_DIRECT (straight to the disk, not copied
// into the page cache; the file is then not cached for a later reader) and
// the rest through the cache; a file system that refuses O_DIRECT gets it
// all through the cache.
bool WriteXSpaceBytesFile(std::string_view bytes, const std::filesystem::path& path, std::string* error);

// The same bytes WriteXSpaceFile writes (deterministic), for tests and
// tools that hash or compare. False when the message is 2 GiB or more.
bool SerializeXSpace(const xspace::XSpace& space, std::string* bytes, std::string* error);

}  // namespace chronolink::trace
