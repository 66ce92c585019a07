#include "trace/importers/xspace/large_buffer.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace chronolink::trace {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

}  // namespace

LargeBuffer::~LargeBuffer() {
  if (data_ != nullptr) ::munmap(data_, capacity_);
}

bool LargeBuffer::Grow(size_t bytes, size_t keep) {
  if (bytes <= capacity_) return true;
  if (bytes > SIZE_MAX / 4) return false;  // no address space is that large; and no overflow below
  const size_t capacity = (std::max(bytes, capacity_ + capacity_ / 2) + kHugePage - 1) / kHugePage * kHugePage;
  // Over-map by one huge page and trim, so that the buffer starts on a 2 MiB boundary.
  void* raw = ::mmap(nullptr, capacity + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return false;
  char* base = static_cast<char*>(raw);
  char* aligned = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(base) + kHugePage - 1) & ~(kHugePage - 1));
  if (aligned > base) ::munmap(base, static_cast<size_t>(aligned - base));
  const size_t tail = static_cast<size_t>(base + capacity + kHugePage - (aligned + capacity));
  if (tail > 0) ::munmap(aligned + capacity, tail);
  ::madvise(aligned, capacity, MADV_HUGEPAGE);  // advice: refused where THP is off, which is fine
  if (data_ != nullptr) {
    std::memcpy(aligned, data_, std::min(keep, capacity_));
    ::munmap(data_, capacity_);
  }
  data_ = aligned;
  capacity_ = capacity;
  return true;
}

}  // namespace chronolink::trace
