// Explains why bytes that protobuf refused are not an XSpace. The protobuf
// parser only says "failed"; this walks the top-level wire format once more
// and names the first thing that is wrong and its byte offset: a field that
// runs past the end (a truncated file), a bad tag or wire type, a stray
// end-group tag, or the plane (index, offset, size) whose contents do not
// parse. Only called after a failed parse, so its cost does not matter.
//
// Stateless; thread-compatible.
#pragma once

#include <google/protobuf/io/zero_copy_stream.h>

#include <cstdint>
#include <string>

namespace chronolink::trace {

// `input` holds `size` bytes that failed to parse as an XSpace. Returns a
// sentence without the file name, e.g. "truncated: field 1 (planes) at byte
// 120 declares 4096 bytes but only 80 remain".
std::string DiagnoseXSpaceWire(google::protobuf::io::ZeroCopyInputStream* input, int64_t size);

}  // namespace chronolink::trace
