// The bytes the Chrome trace reader parses, from a file read in fixed-size
// chunks (so a 1 GB trace never sits in memory whole) or from a caller's
// buffer, with a running count of bytes consumed: nlohmann's SAX callbacks
// carry no position, and every error the reader reports names a byte
// offset.
//
// ByteIterator is the input iterator nlohmann::json::sax_parse(first, last)
// pulls from; all iterators of one cursor share its position (single pass).
// Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace chronolink::trace {

class ByteCursor {
 public:
  explicit ByteCursor(std::string_view bytes);          // reads the buffer, no copy
  explicit ByteCursor(std::FILE* file, size_t chunk = 1 << 20);  // does not close it

  // True when a byte is available (refills from the file as needed).
  bool HasByte() {
    return pos_ != end_ || Refill();
  }
  char Peek() const { return *pos_; }
  void Advance() { ++pos_; }

  // Bytes consumed so far (the parser reads one byte ahead of a token).
  uint64_t Offset() const { return base_offset_ + static_cast<uint64_t>(pos_ - begin_); }
  // Non-empty after a read error on the file.
  const std::string& ReadError() const { return read_error_; }

 private:
  bool Refill();

  std::FILE* file_ = nullptr;
  std::vector<char> buffer_;
  const char* begin_ = nullptr;
  const char* pos_ = nullptr;
  const char* end_ = nullptr;
  uint64_t base_offset_ = 0;
  std::string read_error_;
};

class ByteIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = char;

  ByteIterator() = default;  // the end
  explicit ByteIterator(ByteCursor* cursor) : cursor_(cursor) {}

  char operator*() const { return cursor_->Peek(); }
  ByteIterator& operator++() {
    cursor_->Advance();
    return *this;
  }
  ByteIterator operator++(int) {
    ByteIterator before = *this;
    cursor_->Advance();
    return before;
  }
  friend bool operator==(const ByteIterator& a, const ByteIterator& b) {
    return a.AtEnd() == b.AtEnd();
  }

 private:
  bool AtEnd() const { return cursor_ == nullptr || !cursor_->HasByte(); }

  ByteCursor* cursor_ = nullptr;
};

// Runs a nlohmann SAX `handler` (with an `error()` saying why it stopped)
// over the cursor's bytes, strictly. A read error of the file comes first,
// with its byte offset; then the handler's reason.
template <typename Handler>
bool SaxParseCursor(ByteCursor* cursor, Handler* handler, std::string* error) {
  const bool ok = nlohmann::json::sax_parse(ByteIterator(cursor), ByteIterator(), handler,
                                            nlohmann::json::input_format_t::json, /*strict=*/true);
  if (!cursor->ReadError().empty()) {
    *error = "byte " + std::to_string(cursor->Offset()) + ": " + cursor->ReadError();
    return false;
  }
  if (!ok) {
    *error = handler->error().empty() ? "the JSON parser stopped without a reason" : handler->error();
    return false;
  }
  return true;
}

}  // namespace chronolink::trace
