// A name from a trace (a plane's, a line's, a host's) as it appears in a
// message: in single quotes, control characters and quotes escaped (\n, \t,
// \', \x1f), long names cut with "..." after 120 bytes (at a UTF-8
// boundary). A message then stays one line whatever a producer put in a
// name, and a terminal prints it as text.
//
// Pure function; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace chronolink::trace {

std::string QuotedName(std::string_view name);

}  // namespace chronolink::trace
