// The bounded pool of CUPTI activity buffers.
#include "collector/device/cuda/cupti_buffer_pool.h"

#include <algorithm>

namespace chronolink::collector {

void CuptiBufferPool::Configure(size_t count, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  max_count_ = std::max(max_count_, count);
  // Buffers already made keep their size; new ones use the larger.
  bytes_ = std::max(bytes_, (bytes + 7) / 8 * 8);
}

uint8_t* CuptiBufferPool::Take(size_t* size) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!free_.empty()) {
    uint8_t* b = free_.back();
    free_.pop_back();
    for (size_t i = 0; i < owned_.size(); ++i) {
      if (reinterpret_cast<uint8_t*>(owned_[i].get()) == b) *size = owned_bytes_[i];
    }
    return b;
  }
  if (owned_.size() >= max_count_ || bytes_ == 0) {
    ++refused_;
    *size = 0;
    return nullptr;
  }
  owned_.push_back(std::make_unique<uint64_t[]>(bytes_ / 8));
  owned_bytes_.push_back(bytes_);
  *size = bytes_;
  return reinterpret_cast<uint8_t*>(owned_.back().get());
}

void CuptiBufferPool::Give(uint8_t* buffer) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& b : owned_) {
    if (reinterpret_cast<uint8_t*>(b.get()) == buffer) {
      if (std::find(free_.begin(), free_.end(), buffer) == free_.end()) free_.push_back(buffer);
      return;
    }
  }
}

uint64_t CuptiBufferPool::refused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}

size_t CuptiBufferPool::allocated() const {
  std::lock_guard<std::mutex> lock(mu_);
  return owned_.size();
}

CuptiBufferPool& ProcessCuptiBufferPool() {
  // Never destroyed: CUPTI may hand buffers back during exit.
  static CuptiBufferPool* pool = new CuptiBufferPool();
  return *pool;
}

}  // namespace chronolink::collector
