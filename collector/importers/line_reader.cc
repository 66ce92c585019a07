// Bounded-memory line reading (line_reader.h).
#include "collector/importers/line_reader.h"

#include <cerrno>
#include <cstring>

namespace chronolink::collector {

namespace {
constexpr size_t kChunkBytes = 1 << 16;
}  // namespace

LineReader::LineReader(std::string_view bytes, size_t max_line_bytes)
    : buffer_(bytes), end_(bytes.size()), eof_(true), max_line_bytes_(max_line_bytes) {}

LineReader::LineReader(const std::filesystem::path& path, size_t max_line_bytes)
    : max_line_bytes_(max_line_bytes), path_(path.string()) {
  file_ = std::fopen(path.c_str(), "rb");
  if (file_ == nullptr) {
    error_ = "cannot open " + path_ + ": " + std::strerror(errno);
    eof_ = true;
    return;
  }
  chunk_.resize(kChunkBytes);
}

LineReader::~LineReader() {
  if (file_ != nullptr) std::fclose(file_);
}

bool LineReader::Refill() {
  if (eof_ || file_ == nullptr) return false;
  const size_t n = std::fread(chunk_.data(), 1, chunk_.size(), file_);
  if (n == 0) {
    eof_ = true;
    if (std::ferror(file_)) error_ = "cannot read " + path_ + ": " + std::strerror(errno);
    return false;
  }
  buffer_ = std::string_view(chunk_.data(), n);
  pos_ = 0;
  end_ = n;
  return true;
}

bool LineReader::Next(std::string* line, bool* truncated) {
  line->clear();
  *truncated = false;
  bool any = false;  // something was read for this line (a terminator counts)
  while (true) {
    if (pos_ == end_ && !Refill()) break;
    any = true;
    const char* begin = buffer_.data() + pos_;
    const void* nl = std::memchr(begin, '\n', end_ - pos_);
    const size_t take =
        nl != nullptr ? static_cast<size_t>(static_cast<const char*>(nl) - begin) : end_ - pos_;
    const size_t room = line->size() < max_line_bytes_ ? max_line_bytes_ - line->size() : 0;
    if (take > room) *truncated = true;
    line->append(begin, take < room ? take : room);
    pos_ += take;
    if (nl != nullptr) {
      ++pos_;  // past '\n'
      break;
    }
  }
  if (!any || !error_.empty()) return false;
  if (!line->empty() && line->back() == '\r') line->pop_back();
  ++line_number_;
  return true;
}

}  // namespace chronolink::collector
