#include "trace/importers/chrome_json/byte_cursor.h"

#include <cerrno>
#include <cstring>

namespace chronolink::trace {

ByteCursor::ByteCursor(std::string_view bytes)
    : begin_(bytes.data()), pos_(bytes.data()), end_(bytes.data() + bytes.size()) {}

ByteCursor::ByteCursor(std::FILE* file, size_t chunk) : file_(file), buffer_(chunk) {
  begin_ = pos_ = end_ = buffer_.data();
}

bool ByteCursor::Refill() {
  if (file_ == nullptr || !read_error_.empty()) return false;
  base_offset_ += static_cast<uint64_t>(end_ - begin_);
  const size_t n = std::fread(buffer_.data(), 1, buffer_.size(), file_);
  begin_ = pos_ = buffer_.data();
  end_ = begin_ + n;
  if (n == 0 && std::ferror(file_)) {
    read_error_ = std::string("read failed: ") + std::strerror(errno);
  }
  return n > 0;
}

}  // namespace chronolink::trace
