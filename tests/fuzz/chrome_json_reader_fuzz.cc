// libFuzzer target for the Chrome trace JSON reader (and the writer behind
// it). Each input is parsed with ParseChromeJson.
// Invariants: no crash, hang or sanitizer report; a refusal is one message
// starting "byte N: "; whatever parses is written back (faithful layout)
// without error, that output parses again, and writing it once more gives
// the same bytes (the writer's output is a fixed point of read + write).
// What it writes is also read as a viewer reads it (nlohmann::json, numbers
// as doubles): it parses, and every event's ts and dur lie on the 2^-10 µs
// grid (a coarser one past 2^53 ticks), so a reader's ts + dur is exact
// (trace/exporters/micros_grid.h).
//
// Sources it needs (the lead's tests/fuzz/CMakeLists.txt compiles them with
// the fuzzer flags): trace/importers/chrome_json/*.cc,
// trace/exporters/{chrome_json_writer,chrome_event_writer}.cc, common/atomic_output_file.cc,
// trace/model/{trace_time,xplane_edit}.cc and the generated proto/xplane.pb.cc;
// libprotobuf.
//
// Built with -DCHRONOLINK_FUZZ_CORPUS_GEN the same file is a small program
// that writes a seed corpus into a directory: `chrome_json_corpus_gen DIR`.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "trace/exporters/chrome_json_writer.h"
#include "trace/importers/chrome_json/chrome_json_reader.h"

namespace {

using chronolink::trace::ChromeWriteOptions;
using chronolink::trace::HostTrace;
using chronolink::trace::ParseChromeJson;
using chronolink::trace::WriteChromeJsonString;

[[noreturn]] void Violated(const char* what, const std::string& detail) {
  std::fprintf(stderr, "invariant violated: %s\n%s\n", what, detail.c_str());
  std::abort();
}

std::string WriteBack(const HostTrace& trace) {
  std::string out, error;
  if (!WriteChromeJsonString({&trace}, ChromeWriteOptions{}, &out, &error)) {
    Violated("a parsed trace could not be written", error);
  }
  return out;
}

// A time as a double reader gets it must be a whole number of ticks of the
// finest grid (2^-10 µs, coarser only past 2^53 ticks) that holds it.
bool ExactForDoubleReaders(const nlohmann::json& v) {
  if (!v.is_number()) return false;
  for (int e = 10; e >= -60; --e) {
    const double ticks = std::ldexp(v.get<double>(), e);
    if (std::fabs(ticks) < 9007199254740992.0) return std::trunc(ticks) == ticks;
  }
  return false;
}

void CheckAsAViewerReadsIt(const std::string& written) {
  const auto doc = nlohmann::json::parse(written, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) Violated("the output is not JSON to nlohmann::json", written);
  const nlohmann::json& events = doc.is_array() ? doc : doc["traceEvents"];
  for (const auto& e : events) {
    if (e.value("ph", "") == "M") continue;  // metadata ts are kept verbatim
    for (const char* key : {"ts", "dur"}) {
      if (e.contains(key) && !ExactForDoubleReaders(e[key])) Violated("a time off the grid", e.dump());
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  HostTrace trace;
  std::string error;
  if (!ParseChromeJson(input, {}, &trace, &error)) {
    if (error.rfind("byte ", 0) != 0) Violated("error without a byte offset", error);
    return 0;
  }
  const std::string first = WriteBack(trace);
  CheckAsAViewerReadsIt(first);
  HostTrace again;
  if (!ParseChromeJson(first, {}, &again, &error)) Violated("written output does not parse", error);
  const std::string second = WriteBack(again);
  if (first != second) Violated("read + write is not a fixed point", first + "\n---\n" + second);
  return 0;
}

#ifdef CHRONOLINK_FUZZ_CORPUS_GEN
int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const char* seeds[] = {
      R"({"schemaVersion":1,"distributedInfo":{"backend":"nccl","rank":0,"world_size":2},)"
      R"("baseTimeNanoseconds":1727740800000000000,"traceEvents":[)"
      R"({"ph":"M","name":"process_name","ts":0.000,"pid":7,"tid":0,"args":{"name":"python 7"}},)"
      R"({"ph":"X","cat":"cpu_op","name":"aten::add","pid":7,"tid":8,"ts":12.345,"dur":1.5,)"
      R"("args":{"Input Dims":[[2,3]],"External id":3,"alpha":1.50}},)"
      R"({"ph":"s","id":1,"pid":7,"tid":8,"ts":13,"cat":"ac2g","name":"ac2g"},)"
      R"({"ph":"i","s":"g","name":"end","pid":"","tid":"","ts":20.5}],"traceName":"t"})",
      R"([{"name": "aten::zeros", "ph": "X", "ts": 12.3456, "dur": 40.1, "tid": 1, )"
      R"("pid": "CPU functions", "args": {}}])",
      R"([{"ph":"C","name":"mem","pid":1,"ts":1699999999999999.123,"args":{"v":2.5e9}},)"
      R"({"ph":"B","name":"r","pid":1,"tid":2,"ts":1699999999999999},{"ph":"E","pid":1,"tid":2,"ts":1700000000000000}])",
  };
  int n = 0;
  for (const char* seed : seeds) {
    const std::string path = std::string(argv[1]) + "/chrome_seed_" + std::to_string(n++) + ".json";
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr || std::fputs(seed, f) < 0 || std::fclose(f) != 0) {
      std::perror(path.c_str());
      return 1;
    }
  }
  return 0;
}
#endif
