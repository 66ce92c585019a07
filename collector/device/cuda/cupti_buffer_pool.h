// The activity buffers handed to CUPTI: at most `count` buffers of `bytes`
// each, allocated on first use and then reused, so the memory CUPTI can
// fill is bounded. When every buffer is with CUPTI a request gets none, and
// CUPTI drops (and counts) the records it cannot store.
//
// One pool per process that lives until exit: CUPTI returns buffers from
// its own thread, possibly after the backend that asked for them is gone,
// so the memory must outlive any backend. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace chronolink::collector {

class CuptiBufferPool {
 public:
  // Raises the limits (never lowers them: buffers may be with CUPTI).
  void Configure(size_t count, size_t bytes);

  // A free buffer (8-byte aligned, as CUPTI requires) and its size, or
  // nullptr when all are in use.
  uint8_t* Take(size_t* size);
  // Back from CUPTI; a pointer this pool did not hand out, or one already
  // back, is ignored.
  void Give(uint8_t* buffer);

  uint64_t refused() const;  // requests answered with no buffer
  size_t allocated() const;

 private:
  mutable std::mutex mu_;
  size_t max_count_ = 0;
  size_t bytes_ = 0;
  std::vector<std::unique_ptr<uint64_t[]>> owned_;
  std::vector<size_t> owned_bytes_;
  std::vector<uint8_t*> free_;
  uint64_t refused_ = 0;
};

CuptiBufferPool& ProcessCuptiBufferPool();

}  // namespace chronolink::collector
