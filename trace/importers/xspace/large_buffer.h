// Memory for a whole file's bytes, kept and reused from file to file:
// anonymous pages with transparent huge pages asked for (MADV_HUGEPAGE),
// 2 MiB aligned. An 80 MB trace read into it and walked costs ~40 page
// faults and TLB entries instead of ~20 000 (`chronolink-trace align`
// reads each host into one and rewrites it into another). Where the
// kernel gives no huge pages it is ordinary memory. Move-only.
#pragma once

#include <cstddef>

namespace chronolink::trace {

class LargeBuffer {
 public:
  LargeBuffer() = default;
  LargeBuffer(const LargeBuffer&) = delete;
  LargeBuffer& operator=(const LargeBuffer&) = delete;
  ~LargeBuffer();

  char* data() const { return data_; }
  size_t capacity() const { return capacity_; }
  // At least `bytes` of room; the first `keep` bytes are kept. False when
  // the memory cannot be had (the buffer is then unchanged).
  bool Grow(size_t bytes, size_t keep);

 private:
  char* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace chronolink::trace
