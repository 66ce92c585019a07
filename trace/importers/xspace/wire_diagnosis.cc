#include "trace/importers/xspace/wire_diagnosis.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>

#include "proto/xplane.pb.h"

namespace chronolink::trace {
namespace {

using google::protobuf::io::CodedInputStream;
using google::protobuf::internal::WireFormatLite;

std::string FieldName(int number) {
  switch (number) {
    case 1: return "1 (planes)";
    case 2: return "2 (errors)";
    case 3: return "3 (warnings)";
    case 4: return "4 (hostnames)";
    default: return std::to_string(number) + " (unknown to this schema)";
  }
}

// One length-delimited top-level field whose length fits: does its content
// parse? Returns an empty string when it does.
std::string CheckDelimited(CodedInputStream* in, int field, int offset, uint32_t length,
                           int* plane_index) {
  const auto limit = in->PushLimit(static_cast<int>(length));
  std::string problem;
  if (field == 1) {
    xspace::XPlane plane;
    if (!plane.MergeFromCodedStream(in) || !in->ConsumedEntireMessage()) {
      problem = "plane #" + std::to_string(*plane_index) + " at byte " + std::to_string(offset) +
                " (" + std::to_string(length) +
                " bytes) is corrupt: its wire data does not parse, or a string in it is not UTF-8";
    }
    ++*plane_index;
  } else if (field >= 2 && field <= 4) {
    std::string bytes;
    if (!in->ReadString(&bytes, static_cast<int>(length))) {
      problem = "field " + FieldName(field) + " at byte " + std::to_string(offset) + " cannot be read";
    } else {
      // Reparse the field alone: the only way a string fails is bad UTF-8.
      std::string one;
      {
        google::protobuf::io::StringOutputStream sink(&one);
        google::protobuf::io::CodedOutputStream out(&sink);
        out.WriteTag(WireFormatLite::MakeTag(field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
        out.WriteVarint32(length);
        out.WriteString(bytes);
      }
      xspace::XSpace probe;
      if (!probe.ParseFromString(one)) {
        problem = "field " + FieldName(field) + " at byte " + std::to_string(offset) +
                  " is not valid UTF-8";
      }
    }
  } else if (!in->Skip(static_cast<int>(length))) {
    problem = "field " + FieldName(field) + " at byte " + std::to_string(offset) + " cannot be read";
  }
  in->PopLimit(limit);
  return problem;
}

}  // namespace

std::string DiagnoseXSpaceWire(google::protobuf::io::ZeroCopyInputStream* input, int64_t size) {
  CodedInputStream in(input);
  in.SetTotalBytesLimit(static_cast<int>(size));
  int plane_index = 0;
  while (true) {
    const int offset = in.CurrentPosition();
    if (offset >= size) break;
    const uint32_t tag = in.ReadTag();
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    const auto wire_type = WireFormatLite::GetTagWireType(tag);
    if (tag == 0 && size - offset < 5) {  // a tag is at most 5 bytes
      return "truncated: the file ends inside a field tag at byte " + std::to_string(offset);
    }
    if (tag == 0 || field == 0 || wire_type > WireFormatLite::WIRETYPE_FIXED32) {
      return "invalid field tag at byte " + std::to_string(offset) + " (not protobuf wire data)";
    }
    const std::string where = "field " + FieldName(field) + " at byte " + std::to_string(offset);
    if (wire_type == WireFormatLite::WIRETYPE_END_GROUP) {
      return "stray end-group tag for " + where + " (trailing bytes that are not an XSpace?)";
    }
    if (wire_type != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      // protobuf keeps a field of an unexpected wire type as unknown: so do we.
      if (!WireFormatLite::SkipField(&in, tag)) return "truncated or invalid " + where;
      continue;
    }
    uint32_t length = 0;
    if (!in.ReadVarint32(&length)) return "truncated: " + where + " has no complete length";
    const int64_t remaining = size - in.CurrentPosition();
    if (static_cast<int64_t>(length) > remaining) {
      return "truncated: " + where + " declares " + std::to_string(length) +
             " bytes but only " + std::to_string(remaining) + " remain";
    }
    std::string problem = CheckDelimited(&in, field, offset, length, &plane_index);
    if (!problem.empty()) return problem;
  }
  return "the top-level structure is intact but protobuf refused the message "
         "(nesting too deep, or a limit)";
}

}  // namespace chronolink::trace
