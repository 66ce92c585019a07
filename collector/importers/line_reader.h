// Lines of a text file with bounded memory, for the importers' CSV and JSONL
// readers: the file is read in fixed-size chunks, a line longer than the
// limit is cut there and flagged (the rest of it skipped), "\r\n" ends a
// line like "\n", and every line carries its 1-based number for error
// messages. Reads a file or a caller's buffer (tests, fuzzing).
//
// Not thread-safe; one reader per input.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace chronolink::collector {

class LineReader {
 public:
  // Reads the buffer; it must outlive the reader.
  LineReader(std::string_view bytes, size_t max_line_bytes);
  // Opens `path` (check ok()).
  LineReader(const std::filesystem::path& path, size_t max_line_bytes);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }  // open or read failure

  // The next line without its terminator; false at the end or on a read
  // error (then error() says so). *truncated: the line was longer than the
  // limit and holds its first max_line_bytes bytes.
  bool Next(std::string* line, bool* truncated);
  uint64_t line_number() const { return line_number_; }  // of the line Next returned

 private:
  bool Refill();

  std::string_view buffer_;
  std::FILE* file_ = nullptr;
  std::vector<char> chunk_;
  size_t pos_ = 0;
  size_t end_ = 0;
  bool eof_ = false;
  size_t max_line_bytes_;
  uint64_t line_number_ = 0;
  std::string error_;
  std::string path_;
};

}  // namespace chronolink::collector
