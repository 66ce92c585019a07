#include "trace/report/svg_text.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <ctime>

namespace chronolink::trace::report {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
constexpr std::string_view kMinus = "\xE2\x88\x92";        // U+2212

// Length of the valid UTF-8 sequence at text[i], or 0 when it is not one
// (overlong forms, surrogates and values past U+10FFFF included).
size_t Utf8SequenceLength(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  size_t length = 0;
  uint32_t code = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, code = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, code = lead & 0x0F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, code = lead & 0x07;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i + k) & 0x3F);
  }
  const bool overlong = (length == 3 && code < 0x800) || (length == 4 && code < 0x10000);
  const bool surrogate = code >= 0xD800 && code <= 0xDFFF;
  if (overlong || surrogate || code > 0x10FFFF) return 0;
  // U+FFFE and U+FFFF are not XML characters either.
  if (code == 0xFFFE || code == 0xFFFF) return 0;
  return length;
}

void AppendEscapedAscii(char c, std::string* out) {
  switch (c) {
    case '&': *out += "&amp;"; break;
    case '<': *out += "&lt;"; break;
    case '>': *out += "&gt;"; break;
    case '"': *out += "&quot;"; break;
    case '\'': *out += "&#39;"; break;
    case '\t': case '\n': case '\r': out->push_back(c); break;
    default:
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
        *out += kReplacement;
      } else {
        out->push_back(c);
      }
  }
}

}  // namespace

std::string XmlText(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t length = Utf8SequenceLength(text, i);
    if (length == 0) {
      out += kReplacement;
      ++i;
    } else if (length == 1) {
      AppendEscapedAscii(text[i], &out);
      ++i;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  return out;
}

std::string Ellipsize(std::string_view text, size_t max_chars) {
  if (max_chars == 0) return "";
  size_t chars = 0;
  size_t cut = text.size();
  for (size_t i = 0; i < text.size(); ++chars) {
    if (chars + 1 == max_chars) cut = i;  // where "…" goes if the rest does not fit
    if (chars == max_chars) return std::string(text.substr(0, cut)) + "\xE2\x80\xA6";
    const size_t length = Utf8SequenceLength(text, i);
    i += length == 0 ? 1 : length;
  }
  return std::string(text);
}

namespace {

size_t CodePoints(std::string_view text) {
  size_t chars = 0;
  for (size_t i = 0; i < text.size(); ++chars) {
    const size_t length = Utf8SequenceLength(text, i);
    i += length == 0 ? 1 : length;
  }
  return chars;
}

// The byte length of the first `chars` code points of `text`.
size_t PrefixBytes(std::string_view text, size_t chars) {
  size_t i = 0;
  for (; i < text.size() && chars > 0; --chars) {
    const size_t length = Utf8SequenceLength(text, i);
    i += length == 0 ? 1 : length;
  }
  return i;
}

}  // namespace

std::vector<std::string> WrapText(std::string_view text, size_t max_chars) {
  max_chars = std::max<size_t>(max_chars, 1);
  std::vector<std::string> lines(1);
  size_t line_chars = 0;
  while (!text.empty()) {
    const size_t space = text.find(' ');
    std::string_view word = text.substr(0, space);
    text = space == std::string_view::npos ? std::string_view() : text.substr(space + 1);
    size_t word_chars = CodePoints(word);
    if (line_chars > 0 && line_chars + 1 + word_chars > max_chars) {
      lines.emplace_back();
      line_chars = 0;
    }
    while (word_chars > max_chars) {  // a word longer than a line: cut it
      const size_t cut = PrefixBytes(word, max_chars - line_chars);
      lines.back() += word.substr(0, cut);
      lines.emplace_back();
      word = word.substr(cut);
      word_chars = CodePoints(word);
      line_chars = 0;
    }
    if (line_chars > 0) {
      lines.back() += ' ';
      ++line_chars;
    }
    lines.back() += word;
    line_chars += word_chars;
  }
  return lines;
}

std::string Printf(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list copy;
  va_copy(copy, args);
  const int size = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  std::string out(size > 0 ? static_cast<size_t>(size) : 0, '\0');
  if (size > 0) std::vsnprintf(out.data(), out.size() + 1, format, args);
  va_end(args);
  return out;
}

std::string FormatNumber(double value, int decimals) {
  if (!std::isfinite(value)) return std::isnan(value) ? "n/a" : (value > 0 ? "∞" : "−∞");
  std::string text = Printf("%.*f", decimals, std::fabs(value));
  // A value that rounds to zero is printed without a sign.
  const bool negative = value < 0 && text.find_first_not_of("0.") != std::string::npos;
  return negative ? std::string(kMinus) + text : text;
}

std::string FormatDurationNs(double ns) {
  if (!std::isfinite(ns)) return FormatNumber(ns, 0);
  struct Unit {
    double scale;
    const char* name;
  };
  static constexpr Unit kUnits[] = {{1, "ns"}, {1e3, "µs"}, {1e6, "ms"}, {1e9, "s"}};
  const double magnitude = std::fabs(ns);
  size_t u = 0;
  // 999.95 ns prints as "1.00 µs", not "1000 ns".
  while (u + 1 < std::size(kUnits) && magnitude >= kUnits[u + 1].scale * 0.99995) ++u;
  const double scaled = ns / kUnits[u].scale;
  const double abs_scaled = std::fabs(scaled);
  const int decimals = abs_scaled == 0 || abs_scaled >= 99.95 ? 0 : abs_scaled >= 9.995 ? 1 : 2;
  if (u == 0 && magnitude == std::floor(magnitude)) return FormatNumber(ns, 0) + " ns";
  return FormatNumber(scaled, decimals) + " " + kUnits[u].name;
}

std::string FormatMsPrecise(double ns) { return FormatNumber(ns / 1e6, 6) + " ms"; }

std::string FormatCount(int64_t count) {
  std::string digits = std::to_string(count < 0 ? -static_cast<uint64_t>(count) : count);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += "\xE2\x80\x89";  // thin space
    out.push_back(digits[i]);
  }
  return count < 0 ? std::string(kMinus) + out : out;
}

std::string FormatUtc(int64_t epoch_ns) {
  constexpr int64_t kYear10000 = 253'402'300'800;  // seconds, 10000-01-01
  const int64_t seconds = epoch_ns >= 0 ? epoch_ns / 1'000'000'000 : -1;
  if (seconds < 0 || seconds >= kYear10000) return FormatCount(epoch_ns) + " ns";
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[64];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &tm);
  return Printf("%s.%03d UTC", text, static_cast<int>(epoch_ns / 1'000'000 % 1000));
}

std::string FormatUtc(std::chrono::system_clock::time_point when) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(when.time_since_epoch());
  return FormatUtc(static_cast<int64_t>(ns.count()));
}

}  // namespace chronolink::trace::report
