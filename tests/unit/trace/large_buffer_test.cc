// LargeBuffer (trace/importers/xspace/large_buffer.h): room as asked, 2 MiB
// aligned (huge pages where the kernel gives them; O_DIRECT needs at least
// page alignment), contents kept across growth as asked, and room reused.
#include "trace/importers/xspace/large_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace chronolink::trace {
namespace {

constexpr size_t kTwoMiB = size_t{2} << 20;

TEST(LargeBufferTest, GrowsAlignedKeepsWhatItIsToldToAndReusesItsRoom) {
  LargeBuffer b;
  EXPECT_EQ(b.data(), nullptr);
  ASSERT_TRUE(b.Grow(100, 0));
  ASSERT_NE(b.data(), nullptr);
  EXPECT_GE(b.capacity(), 100u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % kTwoMiB, 0u);
  std::memcpy(b.data(), "chronolink", 10);

  char* before = b.data();
  ASSERT_TRUE(b.Grow(b.capacity(), 10));  // within its room: nothing moves
  EXPECT_EQ(b.data(), before);

  ASSERT_TRUE(b.Grow(3 * kTwoMiB + 1, 10));
  EXPECT_GE(b.capacity(), 3 * kTwoMiB + 1);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % kTwoMiB, 0u);
  EXPECT_EQ(std::memcmp(b.data(), "chronolink", 10), 0);
  b.data()[b.capacity() - 1] = 'x';  // every byte of the room is writable
  EXPECT_EQ(b.data()[b.capacity() - 1], 'x');
}

TEST(LargeBufferTest, RefusesWhatCannotBeMappedAndStaysAsItWas) {
  LargeBuffer b;
  ASSERT_TRUE(b.Grow(4096, 0));
  char* before = b.data();
  const size_t capacity = b.capacity();
  EXPECT_FALSE(b.Grow(SIZE_MAX / 2, 0));
  EXPECT_EQ(b.data(), before);
  EXPECT_EQ(b.capacity(), capacity);
}

}  // namespace
}  // namespace chronolink::trace
