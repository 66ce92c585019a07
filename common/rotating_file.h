// An output file of a long run that is rotated when full (offsets.jsonl,
// cluster-timebase.jsonl: both grow with the cluster's size): renamed
// <stem>.<N><ext> (N = 000001, 000002, ... on from the highest there), a new
// one started at the path, and the full one gzip-compressed in the
// background (<stem>.<N><ext>.gz; common/gzip_file.h). Readers take the set
// as one (RotatedSet). The writer decides where a file may end (after a
// whole instant) by when it calls RotateIfFull.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/gzip_file.h"

namespace chronolink {

struct FileRotation {
  int64_t max_bytes = 256LL << 20;  // 0: never rotated
  bool compress = true;
};

// A file rotated out of <stem><ext>: <stem>.<N><ext>, then .gz once
// compressed (.gz.tmp while being compressed).
struct RotatedName {
  uint64_t index = 0;  // N, from 1
  enum class State { kPlain, kCompressed, kCompressing } state = State::kPlain;
};
std::optional<RotatedName> ParseRotatedName(const std::string& file_name, const std::string& stem,
                                            const std::string& ext);

// <stem>.<N><ext> beside `path` (<stem><ext>).
std::string RotatedFileName(const std::string& path, uint64_t n);

// `path` read as a set: the files rotated out of it beside it, oldest first
// (the .gz where a compression finished but the plain file was not yet
// removed), then `path` itself. A path that is itself a rotated file, or
// not a .jsonl, is alone.
std::vector<std::string> RotatedSet(const std::string& path);

class RotatingFile {
 public:
  RotatingFile();
  ~RotatingFile();
  RotatingFile(const RotatingFile&) = delete;
  RotatingFile& operator=(const RotatingFile&) = delete;

  // Opens `path` to append (never through what another user left there);
  // numbering goes on from the rotated files beside it, and one a crash
  // left plain is compressed now.
  bool Open(const std::filesystem::path& path, FileRotation rotation, std::string* error);
  bool Append(std::string_view bytes, std::string* error);
  // Flushes; false too when a background compression failed since.
  bool Flush(std::string* error);
  // At a point where the file may end: rotates when it is full.
  bool RotateIfFull(std::string* error);
  // Closes, and waits for the compressions queued.
  void Close();

  bool is_open() const { return file_ != nullptr; }
  const std::string& path() const { return path_; }
  uint64_t rotations() const { return rotated_; }

 private:
  std::FILE* file_ = nullptr;
  std::string path_;
  FileRotation rotation_;
  int64_t bytes_ = 0;        // in the current file
  uint64_t last_index_ = 0;  // the newest rotated file's N
  uint64_t rotated_ = 0;
  std::unique_ptr<BackgroundGzip> gzip_;
};

}  // namespace chronolink
