// Text for the SVG report: everything that ends up between tags or in an
// attribute goes through XmlText, because host names, file paths and
// collective names come from input files and may hold markup, control
// bytes or broken UTF-8. Numbers are formatted here too, with the report's
// conventions (a real minus sign, units chosen by magnitude, no epoch ns
// in a double). Pure functions; thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace chronolink::trace::report {

// `text` escaped for XML character data and attribute values: & < > " '
// become entities, bytes that are not valid UTF-8 and characters XML 1.0
// forbids (controls other than tab, newline, return) become U+FFFD.
std::string XmlText(std::string_view text);

// At most `max_chars` code points of (valid or not) UTF-8 `text`, with "…"
// in place of what was cut. Never splits a multi-byte character.
std::string Ellipsize(std::string_view text, size_t max_chars);

// `text` broken at spaces into lines of at most `max_chars` code points (a
// longer word is cut); at least one line.
std::vector<std::string> WrapText(std::string_view text, size_t max_chars);

// printf into a std::string.
std::string Printf(const char* format, ...) __attribute__((format(printf, 1, 2)));

// "−1.25", "0", "3" with `decimals` digits, U+2212 for the minus sign.
std::string FormatNumber(double value, int decimals);
// A duration or offset in ns, scaled to ns/µs/ms/s with 3 significant
// digits: "41.2 ns", "−1.50 µs", "23.0 ms".
std::string FormatDurationNs(double ns);
// Milliseconds with ns resolution, for corrections: "−23.001234 ms".
std::string FormatMsPrecise(double ns);
// An integer with thin-space thousands separators: "1 234 567".
std::string FormatCount(int64_t count);
// An epoch instant in ns as UTC, "2026-11-25 10:00:00.123 UTC"; values
// outside 1970..9999 are printed as "<n> ns".
std::string FormatUtc(int64_t epoch_ns);
std::string FormatUtc(std::chrono::system_clock::time_point when);

}  // namespace chronolink::trace::report
