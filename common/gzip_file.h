// gzip for the long-run outputs that are rotated (offsets.jsonl): a rotated
// file is compressed in the background, atomically (a reader sees the
// uncompressed file or the whole .gz, never half of one), and read back line
// by line whether it was compressed or not (zlib tells them apart).
#pragma once

#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>

namespace chronolink {

// Compresses `src` into `src`.gz: written as `src`.gz.tmp (created anew,
// never through what another user left there), synced, renamed, and only
// then `src` removed. False with why; `src` stays where anything failed.
bool GzipFileInPlace(const std::filesystem::path& src, std::string* error);

// One worker thread compressing files one after the other, so that the
// thread which rotates a file (the leader's) never waits for zlib. The
// destructor finishes what was queued: a stop loses nothing.
class BackgroundGzip {
 public:
  BackgroundGzip() = default;
  ~BackgroundGzip();
  BackgroundGzip(const BackgroundGzip&) = delete;
  BackgroundGzip& operator=(const BackgroundGzip&) = delete;

  void Compress(std::filesystem::path src);
  // Waits until everything queued so far is done.
  void Drain();
  uint64_t compressed() const;
  // The last failure's message ("" when none), for the caller's log.
  std::string TakeError();

 private:
  void Run();

  mutable std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<std::filesystem::path> queue_;
  bool busy_ = false, stopping_ = false;
  uint64_t compressed_ = 0;
  std::string error_;
  std::thread worker_;
};

// Reads a file line by line, gzip-compressed or plain.
class LineFileReader {
 public:
  LineFileReader() = default;
  ~LineFileReader();
  LineFileReader(const LineFileReader&) = delete;
  LineFileReader& operator=(const LineFileReader&) = delete;

  // False with "<path>: why".
  bool Open(const std::string& path, std::string* error);
  // The next line without its newline; false at the end or on an error
  // (then error() says what, e.g. a truncated or corrupt .gz).
  bool Next(std::string* line);
  const std::string& error() const { return error_; }

 private:
  void* file_ = nullptr;  // gzFile
  std::string path_, error_;
};

}  // namespace chronolink
