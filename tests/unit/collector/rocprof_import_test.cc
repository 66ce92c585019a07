// rocprof import: the checked-in sample files (tests/data/rocprof/, written
// from the documented formats by make_samples.py, with a known BOOTTIME
// skew) land within 1 us of their true REALTIME instants, inside their
// bounds, and stay there through a written file, the XSpace reader and
// alignment; corrupt files give clear errors or counted refusals.
#include "collector/importers/rocprof_import.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "collector/importers/host_clocks_loader.h"
#include "collector/importers/rocprof_csv.h"
#include "collector/importers/rocprof_json.h"
#include "trace/align/trace_aligner.h"
#include "trace/exporters/xspace_writer.h"
#include "trace/importers/xspace/run_directory.h"
#include "trace/importers/xspace/xspace_reader.h"
#include "trace/model/xplane_edit.h"

namespace chronolink::collector {
namespace {

namespace fs = std::filesystem;

const fs::path kData = fs::path(CHRONOLINK_SOURCE_DIR) / "tests" / "data" / "rocprof";

// A device event as read back from an XSpace.
struct ReadEvent {
  uint32_t gpu = 0;
  std::string name;
  uint64_t correlation_id = 0;
  int64_t start_ns = 0;  // the trace's clock
  int64_t end_ns = 0;
  int64_t gpu_bound_ns = -1;     // chronolink_gpu_bound_ns
  double aligned_bound_ns = -1;  // chronolink_bound_ns, after alignment with annotation
};

std::vector<ReadEvent> DeviceEvents(const trace::HostTrace& t) {
  std::vector<ReadEvent> out;
  for (const auto& plane : t.space->planes()) {
    if (plane.name().rfind("/device:GPU:", 0) != 0) continue;
    std::map<int64_t, std::string> stat_names;
    for (const auto& [id, m] : plane.stat_metadata()) stat_names[id] = m.name();
    for (const auto& line : plane.lines()) {
      for (const auto& e : line.events()) {
        ReadEvent r;
        r.gpu = static_cast<uint32_t>(plane.id());
        r.name = plane.event_metadata().at(e.metadata_id()).name();
        // Whole ns here: the importer writes ns, alignment whole ps.
        r.start_ns = t.line_base_ns + line.timestamp_ns() + e.offset_ps() / 1000;
        r.end_ns = r.start_ns + e.duration_ps() / 1000;
        for (const auto& s : e.stats()) {
          const std::string& n = stat_names[s.metadata_id()];
          if (n == "correlation_id") r.correlation_id = s.uint64_value();
          if (n == "chronolink_gpu_bound_ns") r.gpu_bound_ns = s.int64_value();
          if (n == "chronolink_bound_ns") r.aligned_bound_ns = s.double_value();
        }
        out.push_back(r);
      }
    }
  }
  return out;
}

struct TruthEvent {
  uint32_t gpu;
  std::string name;
  uint64_t correlation_id;
  int64_t start_ns, end_ns;  // true REALTIME
};

std::vector<TruthEvent> Truth(const std::string& file) {
  std::ifstream in(kData / "truth.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  std::vector<TruthEvent> out;
  for (const auto& e : j.at("files").at(file)) {
    out.push_back({e.at("gpu").get<uint32_t>(), e.at("name").get<std::string>(),
                   e.at("correlation_id").get<uint64_t>(), e.at("true_start_ns").get<int64_t>(),
                   e.at("true_end_ns").get<int64_t>()});
  }
  return out;
}

const TruthEvent* FindTruth(const std::vector<TruthEvent>& truth, const ReadEvent& e) {
  for (const TruthEvent& t : truth) {
    if (t.gpu != e.gpu) continue;
    if (t.correlation_id != 0 ? t.correlation_id == e.correlation_id : t.name == e.name) return &t;
  }
  return nullptr;
}

HostClocksFile LoadSampleClocks() {
  HostClocksFile clocks;
  std::string error;
  HostClocksLoadOptions o;  // no boot check: the samples come from a made-up boot
  EXPECT_TRUE(LoadHostClocksFile(kData / "host_clocks.jsonl", o, &clocks, &error)) << error;
  return clocks;
}

trace::HostTrace Import(const std::vector<fs::path>& files, const HostClocksFile& clocks,
                        RocprofImportResult* result) {
  trace::HostTrace t;
  t.host = "gpunode1";
  std::string error;
  EXPECT_TRUE(ImportRocprof(files, *clocks.track(HostClockDomain::kBoottime), RocprofReadOptions{}, &t,
                            result, &error))
      << error;
  return t;
}

class SampleFileTest : public ::testing::TestWithParam<const char*> {};

TEST_P(SampleFileTest, EveryEventLandsWithinOneMicrosecondOfTruthAndInsideItsBound) {
  const HostClocksFile clocks = LoadSampleClocks();
  RocprofImportResult result;
  const trace::HostTrace t = Import({kData / GetParam()}, clocks, &result);
  const std::vector<TruthEvent> truth = Truth(GetParam());
  const std::vector<ReadEvent> events = DeviceEvents(t);
  ASSERT_EQ(events.size(), truth.size());
  EXPECT_EQ(result.exported.events_unconvertible, 0);
  EXPECT_EQ(result.files.at(0).read.bad_rows, 0u);
  int64_t max_err = 0, max_bound = 0;
  for (const ReadEvent& e : events) {
    const TruthEvent* tr = FindTruth(truth, e);
    ASSERT_NE(tr, nullptr) << e.name;
    const int64_t start_err = std::llabs(e.start_ns - tr->start_ns);
    const int64_t end_err = std::llabs(e.end_ns - tr->end_ns);
    EXPECT_LE(start_err, 1'000) << e.name;
    EXPECT_LE(end_err, 1'000) << e.name;
    EXPECT_LE(start_err, e.gpu_bound_ns) << e.name << ": the bound must cover the error";
    EXPECT_LE(end_err, e.gpu_bound_ns) << e.name;
    EXPECT_GT(e.gpu_bound_ns, 0);
    max_err = std::max({max_err, start_err, end_err});
    max_bound = std::max(max_bound, e.gpu_bound_ns);
  }
  // The figure docs/PERFORMANCE.md §12 quotes.
  std::printf("figure: %s: %zu events, max |imported - true| %lld ns, max bound %lld ns\n", GetParam(),
              events.size(), static_cast<long long>(max_err), static_cast<long long>(max_bound));
}

INSTANTIATE_TEST_SUITE_P(RocprofSamples, SampleFileTest,
                         ::testing::Values("kernel_trace.csv", "results.json", "results.csv"));

TEST(RocprofImportTest, FormatsAreRecognisedAndGpusNumbered) {
  const HostClocksFile clocks = LoadSampleClocks();
  RocprofImportResult result;
  const trace::HostTrace t =
      Import({kData / "kernel_trace.csv", kData / "results.json", kData / "results.csv"}, clocks, &result);
  ASSERT_EQ(result.files.size(), 3u);
  EXPECT_EQ(result.files[0].read.format, RocprofFormat::kV3KernelCsv);
  EXPECT_EQ(result.files[1].read.format, RocprofFormat::kV3Json);
  EXPECT_EQ(result.files[2].read.format, RocprofFormat::kV1Csv);
  EXPECT_EQ(result.files[1].read.skipped, 1u);  // the host-to-host copy
  // "Agent 4" and "Agent 5" of the v3 CSV become GPUs 0 and 1.
  ASSERT_EQ(result.agent_ordinals.size(), 2u);
  EXPECT_EQ(result.agent_ordinals.at(4), 0u);
  EXPECT_EQ(result.agent_ordinals.at(5), 1u);
  const auto* gpu0 = trace::FindPlane(*t.space, "/device:GPU:0");
  ASSERT_NE(gpu0, nullptr);
  EXPECT_EQ(gpu0->id(), 0);
  bool copy_line = false;
  for (const auto& line : gpu0->lines()) copy_line |= line.name().find("MemcpyH2D") != std::string::npos;
  EXPECT_TRUE(copy_line);
  EXPECT_NE(trace::FindPlane(*t.space, "/device:GPU:1"), nullptr);
  const auto* clock = trace::FindPlane(*t.space, "/host:chronolink-gpu-clock");
  ASSERT_NE(clock, nullptr);
  EXPECT_EQ(trace::GetPlaneStatStr(*clock, "backend").value_or(""), "rocprof import");
  bool domain_line = false;
  for (const auto& line : clock->lines())
    domain_line |= line.name() == "boottime -> realtime" && line.events_size() > 30;
  EXPECT_TRUE(domain_line);
}

// A HostClockMap test double: cluster time = host time + a fixed offset.
class OffsetClockMap : public trace::HostClockMap {
 public:
  explicit OffsetClockMap(int64_t offset_ns) : offset_ns_(offset_ns) {}
  std::optional<trace::MappedInstant> Map(const trace::TraceInstant& host) const override {
    trace::MappedInstant m;
    m.cluster = {host.ns + offset_ns_, host.ps};
    m.uncertainty_ns = 200;
    m.correction_ns = static_cast<double>(offset_ns_);
    return m;
  }
  std::string Describe() const override { return "fixed offset (test double)"; }

 private:
  int64_t offset_ns_;
};

TEST(RocprofImportTest, TheWrittenFileIsReadBackAndAlignedLikeAnyHost) {
  const HostClocksFile clocks = LoadSampleClocks();
  RocprofImportResult result;
  trace::HostTrace imported = Import({kData / "results.json"}, clocks, &result);
  trace::SetHostnames(imported.space, {"gpunode1"});
  const fs::path logdir = fs::path(::testing::TempDir()) / "rocprof_roundtrip";
  fs::remove_all(logdir);
  fs::create_directories(trace::RunDirectoryPath(logdir, "2026_11_25_12_00_00"));
  std::string error;
  const fs::path file = trace::RunDirectoryPath(logdir, "2026_11_25_12_00_00") / "gpunode1.xplane.pb";
  ASSERT_TRUE(trace::WriteXSpaceFile(imported, file, &error)) << error;

  trace::ProfileRun run;
  ASSERT_TRUE(trace::FindRun(logdir, "", &run, &error)) << error;
  ASSERT_EQ(run.hosts.size(), 1u);
  trace::HostTrace back;
  ASSERT_TRUE(trace::ReadXSpaceFile(run.hosts[0].path, &back, &error)) << error;
  EXPECT_EQ(back.line_base_ns, imported.line_base_ns);

  const int64_t kOffset = -3'456'789;  // this node's clock is ahead of the cluster's
  const OffsetClockMap map(kOffset);
  trace::AlignOptions options;
  options.annotate_events = true;
  trace::AlignResult aligned;
  ASSERT_TRUE(trace::AlignHosts({&back}, {&map}, options, &aligned, &error)) << error;

  const std::vector<TruthEvent> truth = Truth("results.json");
  const std::vector<ReadEvent> events = DeviceEvents(back);
  ASSERT_EQ(events.size(), truth.size());
  for (const ReadEvent& e : events) {
    const TruthEvent* tr = FindTruth(truth, e);
    ASSERT_NE(tr, nullptr);
    const int64_t err = std::llabs(e.start_ns - (tr->start_ns + kOffset));
    EXPECT_LE(err, 1'000) << e.name;
    // The aligned bound: the correction's 200 ns plus the import's own.
    EXPECT_GE(e.aligned_bound_ns, 200.0 + static_cast<double>(e.gpu_bound_ns) - 1e-6);
    EXPECT_LE(static_cast<double>(err), e.aligned_bound_ns);
  }
}

// ---------------------------------------------------------------------------
// Corrupt and hostile input

std::string ReadText(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct CsvRead {
  bool ok = false;
  std::vector<RocprofRecord> records;
  RocprofReadResult result;
  std::string error;
};

CsvRead Csv(const std::string& text, RocprofReadOptions o = {}) {
  CsvRead r;
  r.ok = ParseRocprofCsv(text, o, &r.records, &r.result, &r.error);
  return r;
}

CsvRead Json(const std::string& text, RocprofReadOptions o = {}) {
  CsvRead r;
  r.ok = ParseRocprofJson(text, o, &r.records, &r.result, &r.error);
  return r;
}

TEST(RocprofCsvTest, SplitsQuotedFieldsAsRfc4180) {
  std::vector<std::string> f;
  ASSERT_TRUE(SplitCsvLine(R"(a,"b, c","say ""hi""",,"")", &f));
  EXPECT_EQ(f, (std::vector<std::string>{"a", "b, c", "say \"hi\"", "", ""}));
  ASSERT_TRUE(SplitCsvLine("x,", &f));
  EXPECT_EQ(f, (std::vector<std::string>{"x", ""}));
  EXPECT_FALSE(SplitCsvLine(R"(a,"unterminated)", &f));
  EXPECT_FALSE(SplitCsvLine(R"(a,"b"c)", &f));
}

TEST(RocprofCsvTest, ATruncatedFileLosesOnlyItsCutRow) {
  const std::string text = ReadText(kData / "kernel_trace.csv");
  const std::string cut = text.substr(0, text.size() - 40);  // mid-row: too few fields
  const CsvRead r = Csv(cut);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.result.bad_rows, 1u);
  EXPECT_EQ(r.result.accepted, 23u);
  ASSERT_EQ(r.result.bad_line_numbers.size(), 1u);
  EXPECT_EQ(r.result.bad_line_numbers[0], 25u);
  EXPECT_NE(r.result.first_bad_reason.find("line 25"), std::string::npos) << r.result.first_bad_reason;
}

TEST(RocprofCsvTest, AHeaderWithoutTimestampsIsNotATrace) {
  const CsvRead r = Csv("Name,Calls,TotalDurationNs,AverageNs,Percentage\n\"k\",3,300,100,100.0\n");
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("line 1"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("not a rocprof kernel trace"), std::string::npos) << r.error;
}

TEST(RocprofCsvTest, AHeaderMissingARequiredColumnSaysWhich) {
  const CsvRead r = Csv("Kind,Queue_Id,Start_Timestamp,End_Timestamp\nKERNEL_DISPATCH,1,10,20\n");
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("kernel name"), std::string::npos) << r.error;
}

TEST(RocprofCsvTest, BadRowsAreRefusedWithTheirLineNumbers) {
  const std::string header = "BeginNs,EndNs,KernelName,gpu-id,queue-id\n";
  std::string text = header;
  for (int i = 0; i < 20; ++i)
    text += std::to_string(1000 + i) + "," + std::to_string(2000 + i) + ",k" + std::to_string(i) + ",0,1\n";
  text += "abc,2000,knum,0,1\n";                              // line 22: non-numeric
  text += "3000,2000,kback,0,1\n";                            // line 23: end before start
  text += "99999999999999999999999,1,khuge,0,1\n";            // line 24: beyond int64 (and uint64)
  text += "9223372036854775808,9223372036854775809,k,0,1\n";  // line 25: just beyond int64
  text += "-5,10,kneg,0,1\n";                                 // line 26: negative
  text += "1e9,2e9,kexp,0,1\n";                               // line 27: not whole digits
  text += "10,20,k,0\n";                                      // line 28: a field short
  const CsvRead r = Csv(text);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.result.accepted, 20u);
  EXPECT_EQ(r.result.bad_rows, 7u);
  EXPECT_EQ(r.result.bad_line_numbers, (std::vector<uint64_t>{22, 23, 24, 25, 26, 27, 28}));
  EXPECT_NE(r.result.first_bad_reason.find("BeginNs"), std::string::npos) << r.result.first_bad_reason;
}

TEST(RocprofCsvTest, AFileThatIsMostlyGarbageFails) {
  std::string text = "BeginNs,EndNs,KernelName,gpu-id\n10,20,ok,0\n";
  for (int i = 0; i < 10; ++i) text += "\x01\x02garbage,,,\n";
  const CsvRead r = Csv(text);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("mostly not"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("line 3"), std::string::npos) << r.error;
}

TEST(RocprofCsvTest, EmptyAndBinaryInputsFailCleanly) {
  EXPECT_FALSE(Csv("").ok);
  EXPECT_FALSE(Csv("\n\n  \n").ok);
  std::string binary(4096, '\0');
  for (size_t i = 0; i < binary.size(); ++i) binary[i] = static_cast<char>((i * 131) & 0xff);
  EXPECT_FALSE(Csv(binary).ok);
}

TEST(RocprofCsvTest, OverlongRowsAndTooManyRecordsAreBounded) {
  RocprofReadOptions o;
  o.max_line_bytes = 64;
  std::string text =
      "BeginNs,EndNs,KernelName,gpu-id\n10,20," + std::string(500, 'k') + ",0\n10,20,short,0\n";
  CsvRead r = Csv(text, o);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.result.bad_rows, 1u);
  EXPECT_EQ(r.result.accepted, 1u);
  o = {};
  o.max_records = 3;
  text = "BeginNs,EndNs,KernelName,gpu-id\n";
  for (int i = 0; i < 5; ++i) text += "10,20,k,0\n";
  r = Csv(text, o);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("more than 3 records"), std::string::npos) << r.error;
}

TEST(RocprofCsvTest, MemoryCopiesNameTheirGpuSide) {
  const std::string text =
      "\"Kind\",\"Direction\",\"Source_Agent_Id\",\"Destination_Agent_Id\",\"Correlation_Id\",\"Start_"
      "Timestamp\","
      "\"End_Timestamp\"\n"
      "\"MEMORY_COPY\",\"MEMORY_COPY_HOST_TO_DEVICE\",0,1,0,14955949675563,14955950239443\n"
      "\"MEMORY_COPY\",\"MEMORY_COPY_DEVICE_TO_HOST\",1,0,0,14955952733485,14955953315285\n"
      "\"MEMORY_COPY\",\"MEMORY_COPY_HOST_TO_HOST\",0,0,0,14955952733485,14955953315285\n";
  const CsvRead r = Csv(text);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.result.format, RocprofFormat::kV3MemoryCopyCsv);
  ASSERT_EQ(r.records.size(), 2u);
  EXPECT_EQ(r.records[0].kind, ActivityKind::kMemcpyHtoD);
  EXPECT_EQ(r.records[0].agent_id, 1u);
  EXPECT_EQ(r.records[1].kind, ActivityKind::kMemcpyDtoH);
  EXPECT_EQ(r.records[1].agent_id, 1u);
  EXPECT_EQ(r.result.skipped, 1u);
}

TEST(RocprofJsonTest, TruncatedJsonFailsWithTheByteOffset) {
  const std::string text = ReadText(kData / "results.json");
  const CsvRead r = Json(text.substr(0, text.size() / 2));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("byte "), std::string::npos) << r.error;
}

TEST(RocprofJsonTest, JsonThatIsNotRocprofIsSaidToBeSo) {
  CsvRead r = Json(R"({"traceEvents": [{"ph": "X", "ts": 1}]})");
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("not rocprofv3 JSON"), std::string::npos) << r.error;
  r = Json("[1, 2, 3]");
  EXPECT_FALSE(r.ok);
}

TEST(RocprofJsonTest, DeepNestingIsRefusedNotRecursedInto) {
  const std::string text =
      "{\"rocprofiler-sdk-tool\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  const CsvRead r = Json(text);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("nested deeper"), std::string::npos) << r.error;
}

std::string OneDispatch(const std::string& start, const std::string& end, int agent_handle) {
  return R"({"correlation_id": {"internal": 5}, "start_timestamp": )" + start + R"(, "end_timestamp": )" +
         end + R"(, "dispatch_info": {"agent_id": {"handle": )" + std::to_string(agent_handle) +
         R"(}, "queue_id": {"handle": 1}, "kernel_id": 9}})";
}

std::string Doc(const std::vector<std::string>& dispatches) {
  std::string d;
  for (const std::string& x : dispatches) d += (d.empty() ? "" : ",") + x;
  return R"({"rocprofiler-sdk-tool": [{"agents": [{"id": {"handle": 1}, "type": 1, "node_id": 0},)"
         R"( {"id": {"handle": 2}, "type": 2, "node_id": 1}],)"
         R"( "kernel_symbols": [{"kernel_id": 9, "kernel_name": "k9"}],)"
         R"( "buffer_records": {"kernel_dispatch": [)" +
         d + "]}}]}";
}

TEST(RocprofJsonTest, BadRecordsAreRefusedWithTheirNumbers) {
  std::vector<std::string> d;
  for (int i = 0; i < 10; ++i) d.push_back(OneDispatch(std::to_string(100 + i), std::to_string(200 + i), 2));
  d.push_back(OneDispatch("300", "200", 2));      // record 11: ends before it starts
  d.push_back(OneDispatch("\"300\"", "400", 2));  // record 12: a string timestamp
  d.push_back(OneDispatch("1e30", "2e30", 2));    // record 13: not an integer
  d.push_back(OneDispatch("18446744073709551615", "18446744073709551615", 2));  // record 14: beyond int64
  d.push_back(OneDispatch("100", "200", 1));                                    // record 15: a CPU agent
  const CsvRead r = Json(Doc(d));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.result.accepted, 10u);
  EXPECT_EQ(r.result.bad_rows, 5u);
  EXPECT_EQ(r.result.bad_line_numbers, (std::vector<uint64_t>{11, 12, 13, 14, 15}));
  EXPECT_NE(r.result.first_bad_reason.find("record 11"), std::string::npos) << r.result.first_bad_reason;
  ASSERT_FALSE(r.records.empty());
  EXPECT_EQ(r.records[0].name, "k9");
  EXPECT_TRUE(r.records[0].ordinal_known);
  EXPECT_EQ(r.records[0].ordinal, 0u);
}

TEST(RocprofJsonTest, MostlyBadRecordsFailTheFile) {
  std::vector<std::string> d = {OneDispatch("1", "2", 2)};
  for (int i = 0; i < 6; ++i) d.push_back(OneDispatch("5", "1", 2));
  const CsvRead r = Json(Doc(d));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("mostly not"), std::string::npos) << r.error;
}

TEST(RocprofImportTest, EventsOutsideTheRecordingAreCountedAndSummarisedNotGuessed) {
  const HostClocksFile clocks = LoadSampleClocks();
  const fs::path dir = fs::path(::testing::TempDir()) / "rocprof_outside";
  fs::create_directories(dir);
  const fs::path csv = dir / "results.csv";
  {
    std::ofstream out(csv);
    out << "BeginNs,EndNs,KernelName,gpu-id\n";
    out << "123457000000000,123457000100000,inside,0\n";  // within the recording
    out << "123400000000000,123400000100000,before,0\n";  // a minute before it
    out << "123999000000000,123999000100000,after,0\n";   // long after it
  }
  RocprofImportResult result;
  const trace::HostTrace t = Import({csv}, clocks, &result);
  EXPECT_EQ(result.exported.events_written, 1);
  EXPECT_EQ(result.exported.events_unconvertible, 2);
  ASSERT_EQ(t.space->warnings_size(), 1);
  EXPECT_NE(t.space->warnings(0).find("2 not convertible"), std::string::npos) << t.space->warnings(0);
  EXPECT_NE(t.space->warnings(0).find("boottime ns 123400000000000"), std::string::npos)
      << t.space->warnings(0);
}

TEST(RocprofImportTest, AMissingOrUnreadableFileIsOneMessage) {
  const HostClocksFile clocks = LoadSampleClocks();
  trace::HostTrace t;
  RocprofImportResult result;
  std::string error;
  EXPECT_FALSE(ImportRocprof({kData / "no-such-file.csv"}, *clocks.track(HostClockDomain::kBoottime),
                             RocprofReadOptions{}, &t, &result, &error));
  EXPECT_NE(error.find("no-such-file.csv"), std::string::npos) << error;
}

}  // namespace
}  // namespace chronolink::collector
