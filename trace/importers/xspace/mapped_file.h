// A file's bytes mapped read-only for one pass, without copying them
// (`chronolink-trace align` rewrites each host's file straight from its
// page-cache pages: reading 659 MB costs 0.04 instead of 0.09-0.12 CPU s).
//
// A mapped file that shrinks while it is read would raise SIGBUS on the
// pages past its new end and kill the process. MappedFile installs, once,
// a SIGBUS handler that puts a zero page where such a fault hit (inside the
// one file mapped at the time) and marks the mapping torn; the reader then
// reads zeros, and must check torn() after its pass and throw away what it
// read. A SIGBUS anywhere else keeps its default action (the process dies,
// as it would have). One MappedFile may be open at a time in a process;
// not for threads.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace chronolink::trace {

class MappedFile {
 public:
  MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() { Close(); }

  // Maps a regular, non-empty file of at most `max_bytes`; false with *why
  // otherwise, or when another MappedFile is open.
  bool Open(const std::filesystem::path& path, size_t max_bytes, std::string* why);
  void Close();

  std::string_view bytes() const { return {data_, size_}; }
  // The file shrank under the mapping: some bytes read were zeros, not the file's.
  bool torn() const;

 private:
  const char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace chronolink::trace
