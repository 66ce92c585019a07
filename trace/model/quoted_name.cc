#include "trace/model/quoted_name.h"

namespace chronolink::trace {
namespace {

constexpr size_t kMaxShown = 120;

// Where to cut at most `limit` bytes of `s` without splitting a UTF-8 sequence.
size_t CutAt(std::string_view s, size_t limit) {
  if (s.size() <= limit) return s.size();
  size_t cut = limit;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xc0) == 0x80) --cut;
  return cut;
}

}  // namespace

std::string QuotedName(std::string_view name) {
  static constexpr char kHex[] = "0123456789abcdef";
  const size_t shown = CutAt(name, kMaxShown);
  std::string out = "'";
  for (size_t i = 0; i < shown; ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '\'': out += "\\'"; break;
      case '\\': out += "\\\\"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += "\\x";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  if (shown < name.size()) out += "...";
  return out + "'";
}

}  // namespace chronolink::trace
