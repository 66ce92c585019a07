#include "common/quoted_text.h"

#include <algorithm>
#include <cstddef>

namespace chronolink {
namespace {

constexpr char kHex[] = "0123456789abcdef";

void AppendHexByte(unsigned char c, std::string* out) {
  *out += "\\x";
  *out += kHex[c >> 4];
  *out += kHex[c & 15];
}

// The length of the well-formed UTF-8 sequence at s[i] (2..4), or 0 when
// the bytes there are not one (overlong forms and surrogates included).
size_t Utf8SequenceAt(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // bounds of the second byte
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (i + n > s.size() || b(1) < lo || b(1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if ((b(k) & 0xc0) != 0x80) return 0;
  }
  return n;
}

}  // namespace

std::string QuotedText(std::string_view text, size_t max_bytes) {
  std::string out = "'";
  size_t i = 0;
  while (i < text.size() && i < max_bytes) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const size_t n = Utf8SequenceAt(text, i);
      if (n == 0) {
        AppendHexByte(c, &out);
        ++i;
      } else if (n == 2 && c == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0) {
        out += "\\u00";  // a C1 control
        out += kHex[(text[i + 1] >> 4) & 15];
        out += kHex[text[i + 1] & 15];
        i += 2;
      } else {
        if (i + n > max_bytes) break;  // never cut a character in two
        out.append(text.substr(i, n));
        i += n;
      }
      continue;
    }
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '\'': out += "\\'"; break;
      case '\\': out += "\\\\"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          AppendHexByte(c, &out);
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  if (i < text.size()) out += "...";
  return out + "'";
}

std::string ShownName(std::string_view name) {
  const bool plain = !name.empty() && name.size() <= kQuotedTextBytes &&
                     std::all_of(name.begin(), name.end(), [](char c) {
                       return c > 0x20 && c < 0x7f && c != '\'' && c != '"' && c != '\\';
                     });
  return plain ? std::string(name) : QuotedText(name);
}

}  // namespace chronolink
