// An output file that appears whole or not at all: written to a temporary
// file in the destination directory (`.<name>.tmp.XXXXXX`), flushed and
// fsync'd, then renamed over the destination and the directory fsync'd.
// Destroyed without Commit() (any failure on the way), the temporary file
// is closed and removed, and the destination is untouched.
//
// The temporary file is made by mkstemp (a new name, O_EXCL): a link or file
// another user planted at the destination or at a guessable temporary name
// is never written through, and rename replaces a link at the destination
// rather than following it.
//
// Streaming: text goes into buffer() and out in 1 MiB pieces, so the caller
// never holds the whole document; a writer with its own buffering (protobuf's
// FileOutputStream) writes to descriptor() instead. Not thread-safe.
#pragma once

#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

namespace chronolink {

class AtomicOutputFile {
 public:
  AtomicOutputFile() = default;
  ~AtomicOutputFile();
  AtomicOutputFile(const AtomicOutputFile&) = delete;
  AtomicOutputFile& operator=(const AtomicOutputFile&) = delete;

  bool Open(const std::filesystem::path& path, std::string* error);
  // The buffer callers append to; flushed by MaybeFlush() and Commit().
  std::string* buffer() { return &buffer_; }
  // Writes the buffer out once it holds 1 MiB or more.
  bool MaybeFlush(std::string* error);
  // The temporary file's descriptor, for writers that stream through it
  // themselves; do not mix with buffer(). -1 when not open.
  int descriptor() const;
  // The temporary file's path, for a tool that writes it by name (e.g. a
  // converter run as a child process) before Commit().
  const std::filesystem::path& temp_path() const { return temp_; }
  bool Commit(std::string* error);

 private:
  bool WriteBuffer(std::string* error);
  void Discard();

  std::filesystem::path path_;
  std::filesystem::path temp_;
  std::FILE* file_ = nullptr;
  std::string buffer_;
};

// `contents` into `path` through an AtomicOutputFile, mode 0644.
bool WriteFileAtomically(const std::filesystem::path& path, std::string_view contents, std::string* error);

}  // namespace chronolink
