// Helpers shared by the Chrome trace tests: a DOM parse that keeps every
// float's text (so values are compared exactly as written, not as doubles),
// event comparison with ts/dur compared on the writer's time grid, and sample
// documents in the flavours real producers write.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "trace/importers/chrome_json/micros_text.h"

namespace chronolink::trace::testing {

// Floats become the string "#num:<text as written>".
class TextKeepingDomParser : public nlohmann::detail::json_sax_dom_parser<nlohmann::json> {
 public:
  using json_sax_dom_parser::json_sax_dom_parser;
  bool number_float(double, const std::string& text) {
    std::string marked = "#num:" + text;
    return json_sax_dom_parser::string(marked);
  }
};

inline nlohmann::json ParseKeepingNumbers(std::string_view text) {
  nlohmann::json doc;
  TextKeepingDomParser sax(doc, /*allow_exceptions=*/false);
  if (!nlohmann::json::sax_parse(text.begin(), text.end(), &sax)) return nlohmann::json();
  return doc;
}

// A µs value as written (an integer or a kept float's text), in ps.
inline __int128 WrittenPs(const nlohmann::json& v) {
  NsPs t;
  if (v.is_number_integer()) {
    EXPECT_TRUE(MicrosIntToNs(v.get<int64_t>(), &t));
  } else {
    EXPECT_TRUE(v.is_string() && v.get<std::string>().rfind("#num:", 0) == 0) << v.dump();
    EXPECT_EQ(ParseMicrosText(v.get<std::string>().substr(5), &t), MicrosParse::kOk);
  }
  return static_cast<__int128>(t.ns) * 1000 + t.ps;
}

// The writer puts times on a grid of 2^-10 µs (trace/exporters/micros_grid.h):
// an instant is rounded to the nearest tick, about 0.98 ns. These compare
// times on that grid, counted from the epoch (every base in these tests is
// a whole microsecond, so the writer's ticks from its base are these).
inline std::string GridTick(__int128 ps) {
  const __int128 twice = 2 * ps * 1024 + 1'000'000;  // round half up: floor((2·ps·1024 + 10^6) / 2·10^6)
  __int128 q = twice / 2'000'000;
  if (twice % 2'000'000 != 0 && twice < 0) --q;
  std::string digits;
  for (__int128 m = q < 0 ? -q : q; digits.empty() || m != 0; m /= 10) digits.insert(digits.begin(), char('0' + m % 10));
  return std::string("tick:") + (q < 0 ? "-" : "") + digits;
}

// Whether a value as written is on the grid: exactly a double, ts + dur too.
inline bool OnTimeGrid(const nlohmann::json& v) {
  const __int128 scaled = WrittenPs(v) * 1024;
  return scaled % 1'000'000 == 0;
}

// The document's events with ts replaced by its grid tick and dur by the
// end's tick less the start's (what the writer writes), both from the
// epoch, so that a document and what was written from it compare equal.
inline std::vector<nlohmann::json> NormalisedEvents(const nlohmann::json& doc) {
  const nlohmann::json& events = doc.is_array() ? doc : doc.at("traceEvents");
  const __int128 base_ps =
      doc.is_object() && doc.contains("baseTimeNanoseconds")
          ? static_cast<__int128>(doc["baseTimeNanoseconds"].get<int64_t>()) * 1000
          : 0;
  std::vector<nlohmann::json> out;
  for (auto e : events) {
    if (e.value("ph", "") == "M") {  // metadata events keep ts verbatim
      out.push_back(e);
      continue;
    }
    const bool has_ts = e.contains("ts");
    const __int128 start = has_ts ? base_ps + WrittenPs(e["ts"]) : 0;
    if (e.contains("dur")) {
      e["dur"] = "end " + GridTick(start + WrittenPs(e["dur"])) + " from " + (has_ts ? GridTick(start) : "0");
    }
    if (has_ts) e["ts"] = GridTick(start);
    out.push_back(e);
  }
  return out;
}

// Events grouped by (pid, tid) in file order: the order the model keeps.
inline std::map<std::string, std::vector<std::string>> EventsByThread(const nlohmann::json& doc) {
  std::map<std::string, std::vector<std::string>> by;
  for (const auto& e : NormalisedEvents(doc)) {
    const std::string key = e.value("pid", nlohmann::json()).dump() + "/" +
                            (e.contains("tid") ? e["tid"].dump() : std::string("-"));
    by[key].push_back(e.dump());
  }
  return by;
}

inline std::vector<std::string> SortedDumps(const std::vector<nlohmann::json>& events) {
  std::vector<std::string> dumps;
  for (const auto& e : events) dumps.push_back(e.dump());
  std::sort(dumps.begin(), dumps.end());
  return dumps;
}

// A PyTorch/Kineto trace as libkineto's output_json.cpp writes it (2024+:
// ts relative to baseTimeNanoseconds, "{}.{:03}" µs), with the keys and
// event kinds it produces and a few it does not, to show they survive.
inline std::string KinetoDocument() {
  return R"JSON({
  "schemaVersion": 1,
  "deviceProperties": [{"id": 0, "name": "NVIDIA H100", "totalGlobalMem": 85031714816,
                        "computeMajor": 9, "computeMinor": 0, "clockRate": 1.98e6}],
  "distributedInfo": {"backend": "nccl", "rank": 1, "world_size": 4, "pg_count": 1,
                      "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl",
                                     "pg_size": 4, "ranks": [0, 1, 2, 3]}], "nccl_version": "2.21.5"},
  "record_shapes": 1,
  "with_stack": false,
  "cuda_runtime_version": null,
  "displayTimeUnit": "ms",
  "baseTimeNanoseconds": 1727740800000000000,
  "traceEvents": [
  {"ph": "M", "name": "process_name", "ts": 17.125, "pid": 4242, "tid": 0, "args": {"name": "python 4242"}},
  {"ph": "M", "name": "process_labels", "ts": 17.125, "pid": 4242, "tid": 0, "args": {"labels": "CPU"}},
  {"ph": "M", "name": "process_sort_index", "ts": 17.125, "pid": 4242, "tid": 0, "args": {"sort_index": 4242}},
  {"ph": "M", "name": "thread_name", "ts": 17.125, "pid": 4242, "tid": 4243, "args": {"name": "thread 4243 (python)"}},
  {"ph": "M", "name": "thread_sort_index", "ts": 17.125, "pid": 4242, "tid": 4243, "args": {"sort_index": 4243}},
  {"ph": "M", "name": "process_name", "ts": 17.125, "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
  {"ph": "M", "name": "thread_name", "ts": 17.125, "pid": 0, "tid": 7, "args": {"name": "stream 7 "}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 4242, "tid": 4243,
   "ts": 5391843215.123, "dur": 12.345,
   "args": {"External id": 17, "Record function id": 0, "Ev Idx": 16,
            "Input Dims": [[2, 3], [2, 3], []], "Input type": ["float", "float", "Scalar"],
            "Input Strides": [[3, 1], [3, 1], []], "Concrete Inputs": ["", "", "1"],
            "Fwd thread id": 0, "Sequence number": -1, "alpha": 1.50, "scale": 0.125,
            "ratio": 1e-07, "huge": 18446744073709551615, "negative": -42,
            "path": "C:/x \"quoted\" \u00e9\n", "flag": true, "none": null}},
  {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 4242, "tid": 4243,
   "ts": 5391843230.000, "dur": 150.500,
   "args": {"External id": 18, "Collective name": "allreduce", "dtype": "Float",
            "In msg nelems": 1048576, "Out msg nelems": 1048576, "Group size": 4,
            "In split size": "[]", "Out split size": "[]", "Global rank start": 0,
            "Global rank stride": 1, "Process Group Name": "0",
            "Process Group Description": "default_pg", "Process Group Ranks": "[0, 1, 2, 3]",
            "Rank": 1, "Seq": 12, "Comms Id": 81985529216486895, "Is asynchronized op": false}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4242, "tid": 4243,
   "ts": 5391843240.001, "dur": 4.999, "args": {"External id": 18, "cbid": 211, "correlation": 1001}},
  {"ph": "s", "id": 1001, "pid": 4242, "tid": 4243, "ts": 5391843240.001, "cat": "ac2g", "name": "ac2g"},
  {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
   "pid": 0, "tid": 7, "ts": 5391843260.250, "dur": 98.750,
   "args": {"External id": 18, "queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": 1001,
            "registers per thread": 96, "shared memory": 0, "blocks per SM": 0.0,
            "warps per SM": 0.0, "grid": [4, 1, 1], "block": [640, 1, 1], "est. achieved occupancy %": 0,
            "Collective name": "allreduce", "In msg nelems": 1048576, "Out msg nelems": 1048576,
            "Group size": 4, "dtype": "Float"}},
  {"ph": "f", "id": 1001, "pid": 0, "tid": 7, "ts": 5391843260.250, "cat": "ac2g", "name": "ac2g", "bp": "e"},
  {"ph": "X", "cat": "gpu_user_annotation", "name": "step 3", "pid": 0, "tid": 7,
   "ts": 5391843260.249, "dur": 0, "args": {"External id": 19}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "checkpoint", "pid": 4242, "tid": 4243,
   "ts": 5391843300.5, "args": {}},
  {"ph": "C", "cat": "gpu_memory", "name": "Memory 0", "pid": 0, "tid": 0, "ts": 5391843301,
   "args": {"allocated": 1234567, "reserved": 2.5e9}},
  {"ph": "B", "name": "region", "pid": 4242, "tid": 4243, "ts": 5391843310.0101, "tts": 12.5, "cname": "good"},
  {"ph": "E", "name": "region", "pid": 4242, "tid": 4243, "ts": 5391843320, "tts": 20.25, "args": {"result": "ok"}},
  {"ph": "b", "cat": "async", "name": "load", "id2": {"local": "0x1f"}, "scope": "io", "pid": 4242, "tid": 4243, "ts": 5391843315},
  {"ph": "e", "cat": "async", "name": "load", "id2": {"local": "0x1f"}, "scope": "io", "pid": 4242, "tid": 4243, "ts": 5391843318.75},
  {"ph": "X", "cat": "python_function", "name": "model.py(12): forward", "pid": 4242, "tid": 4243,
   "ts": 5391843200, "dur": 200.123456, "tdur": 199.5, "sf": 3, "stack": ["a", "b"], "unknown_key": {"x": [1, {"y": null}]}},
  {"ph": "Z", "name": "future kind", "pid": 4242, "tid": 4243, "ts": 5391843400, "args": {"v": 1}},
  {"ph": "X", "cat": "Trace", "ts": 5391843100.000, "dur": 400.000, "pid": "Spans", "tid": "PyTorch Profiler",
   "name": "PyTorch Profiler (0)", "args": {"Op count": 0}},
  {"name": "process_sort_index", "ph": "M", "ts": 5391843100.000, "pid": "Spans", "tid": 0,
   "args": {"sort_index": 536870912}},
  {"name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g", "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": 5391843100.000},
  {"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": 5391843500.500}
  ],
  "traceName": "/tmp/rank1.pt.trace.json"
})JSON";
}

// What the legacy PyTorch profiler (torch 1.13 without Kineto,
// EventList.export_chrome_trace) writes: a bare array, ts in µs relative to
// the profiler's start, pid "CPU functions", empty args.
inline std::string LegacyDocument() {
  return R"JSON([{"name": "aten::zeros", "ph": "X", "ts": 12.3456, "dur": 40.1, "tid": 140213, "pid": "CPU functions", "args": {}}, {"name": "c10d::allreduce_", "ph": "X", "ts": 60.5, "dur": 1200.25, "tid": 140213, "pid": "CPU functions", "args": {}}, {"name": "gloo:all_reduce", "ph": "X", "ts": 70, "dur": 1100.125, "tid": 140299, "pid": "CPU functions", "args": {}}, {"name": "aten::add", "ph": "s", "ts": 60.5, "tid": 140213, "pid": "CPU functions", "id": 0, "cat": "cpu_to_cuda", "args": {}}, {"name": "remote", "ph": "X", "ts": 1300, "dur": 2, "tid": " node_id:1, thread_id:9 ", "pid": "CPU functions", "args": {}}])JSON";
}

}  // namespace chronolink::trace::testing
