#pragma once

#include <cstdint>

// Protobuf's wire types (the low three bits of a tag), for the readers that
// walk XSpace's bytes without parsing them (the span scan, the in-place
// rewrite). Groups (3, 4) are not here: both refuse them.
namespace chronolink::trace {

enum ProtobufWireType : uint32_t { kVarint = 0, kFixed64 = 1, kLen = 2, kFixed32 = 5 };

}  // namespace chronolink::trace
