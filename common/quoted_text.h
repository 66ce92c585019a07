// A string from outside (a trace's names, a file name, an etcd key, a user
// name, a config value) as it appears in a log line or an error message:
// in single quotes, with control characters, quotes, backslashes and bytes
// that are not UTF-8 escaped (\n, \t, \', \\, \x1b), C1 controls
// (U+0080..U+009F, which some terminals act on) escaped as \u0085, and long
// strings cut with "..." after 120 bytes (or max_bytes) at a character boundary. A
// message then stays one line whatever a sender put in the string, and a
// terminal prints it as text: a key with a newline cannot forge a log line,
// an escape sequence cannot drive the terminal. Every outside string that
// reaches a message goes through here.
//
// Pure function; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace chronolink {

constexpr size_t kQuotedTextBytes = 120;
std::string QuotedText(std::string_view text, size_t max_bytes = kQuotedTextBytes);

// A name (a host's, a file's) as messages show it: as it is when it is
// short, printable ASCII without quotes, backslashes or spaces (the usual
// host name), else QuotedText. Summaries stay readable; a name with a
// newline or an escape sequence is shown escaped.
std::string ShownName(std::string_view name);

}  // namespace chronolink
