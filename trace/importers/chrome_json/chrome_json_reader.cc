#include "trace/importers/chrome_json/chrome_json_reader.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <utility>

#include "trace/importers/chrome_json/byte_cursor.h"
#include "trace/importers/chrome_json/chrome_json_parser.h"
#include "trace/importers/chrome_json/chrome_json_tokenizer.h"

namespace chronolink::trace {
namespace {

// A fresh model whose arena grows in blocks up to 1 MiB instead of the
// default 8 KiB: a large trace then costs a few thousand allocations, not
// hundreds of thousands.
HostTrace LargeArenaTrace() {
  HostTrace trace;
  google::protobuf::ArenaOptions arena_options;
  arena_options.start_block_size = 64 << 10;
  arena_options.max_block_size = 1 << 20;
  trace.arena = std::make_unique<google::protobuf::Arena>(arena_options);
  trace.space = google::protobuf::Arena::CreateMessage<xspace::XSpace>(trace.arena.get());
  return trace;
}

bool ReadFrom(ByteCursor* cursor, const ChromeReadOptions& options, HostTrace* out,
              std::string* error) {
  HostTrace trace = LargeArenaTrace();
  trace.host = options.host;
  ChromeTraceBuilder builder(&trace);
  if (!TokenizeChromeJson(cursor, &builder, error)) return false;
  if (!builder.Finish(options.origin_ns, error)) return false;
  *out = std::move(trace);
  return true;
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

}  // namespace

bool ReadChromeJsonFile(const std::filesystem::path& path, const ChromeReadOptions& options,
                        HostTrace* out, std::string* error) {
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file) {
    *error = path.string() + ": cannot open: " + std::strerror(errno);
    return false;
  }
  ByteCursor cursor(file.get());
  std::string why;
  if (!ReadFrom(&cursor, options, out, &why)) {
    *error = path.string() + ": " + why;
    return false;
  }
  out->source = path;
  return true;
}

bool ParseChromeJson(std::string_view bytes, const ChromeReadOptions& options, HostTrace* out,
                     std::string* error) {
  ByteCursor cursor(bytes);
  return ReadFrom(&cursor, options, out, error);
}

}  // namespace chronolink::trace
