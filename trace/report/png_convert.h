// PNG output for the report, when Debian's `rsvg-convert` (package
// librsvg2-bin) is installed: it is run as a child process, never through
// a shell, so a path with spaces or quotes cannot inject anything. Not a
// dependency: callers ask RsvgConvertPath() first and say what to install
// when it is absent. Thread-safe (no shared state; one child per call).
#pragma once

#include <optional>
#include <string>

namespace chronolink::trace {

// The rsvg-convert found on PATH, or nullopt.
std::optional<std::string> RsvgConvertPath();

// Renders the SVG file `svg_path` into `png_path` (written to
// "<png_path>.partial" and renamed, so no half-written PNG is left), at
// `zoom` times its size. False with *error saying why: the tool is not
// installed, it failed (its exit status), or the output is not a PNG.
bool ConvertSvgToPng(const std::string& svg_path, const std::string& png_path, double zoom, std::string* error);

}  // namespace chronolink::trace
