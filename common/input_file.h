// Opening a file a user named as input (offsets, edges): a clear reason when
// it cannot be read as one, instead of an empty read or "read error after
// line 0" (a directory opens as a stream and fails only on the first read).
// Pipes and process substitutions (<(...)) are fine.
#pragma once

#include <fstream>
#include <string>

namespace chronolink {

// Opens `path` for reading into *in; false with *error ("<path>: is a
// directory, not a file", "<path>: cannot open: <reason>").
bool OpenInputFile(const std::string& path, std::ifstream* in, std::string* error);

}  // namespace chronolink
