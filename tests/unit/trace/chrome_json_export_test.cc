// XSpace hosts exported as Chrome JSON (export-chrome) and several hosts in
// one document (combine): processes and threads Perfetto draws, stats as
// args, counters as "C", dropped planes' stats in the top-level metadata,
// one time origin; and the writer never leaves a file behind on failure.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "tests/unit/trace/chrome_json_test_util.h"
#include "trace/exporters/chrome_json_writer.h"
#include "trace/importers/chrome_json/chrome_json_reader.h"
#include "trace/model/xplane_edit.h"

namespace chronolink::trace {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int64_t kStart = 1'730'000'000'123'456'789;  // profile_start_time, epoch ns (after the Kineto base below)

int64_t StatId(xspace::XPlane* plane, const std::string& name) {
  const int64_t id = static_cast<int64_t>(plane->stat_metadata_size()) + 1;
  auto& md = (*plane->mutable_stat_metadata())[id];
  md.set_id(id);
  md.set_name(name);
  return id;
}

int64_t EventId(xspace::XPlane* plane, const std::string& name, const std::string& display = "") {
  const int64_t id = static_cast<int64_t>(plane->event_metadata_size()) + 1;
  auto& md = (*plane->mutable_event_metadata())[id];
  md.set_id(id);
  md.set_name(name);
  md.set_display_name(display);
  return id;
}

// A small host as XLA/JAX write it: relative line timestamps, a Task
// Environment with the wall-clock start, a host plane, a GPU plane and a
// counters line.
HostTrace XSpaceHost(const std::string& host) {
  HostTrace t;
  t.host = host;
  t.source_format = TraceFormat::kXSpace;
  t.line_base_ns = kStart;
  t.space->add_hostnames(host);
  SetProfileStartTime(t.space, kStart);

  xspace::XPlane* cpu = t.space->add_planes();
  cpu->set_id(0);
  cpu->set_name("/host:CPU");
  const int64_t step = StatId(cpu, "step_num");
  const int64_t op = StatId(cpu, "hlo_op");
  const int64_t blob = StatId(cpu, "blob");
  const int64_t ratio = StatId(cpu, "ratio");
  const int64_t interned = StatId(cpu, "all-reduce.1");
  xspace::XLine* python = cpu->add_lines();
  python->set_id(11);
  python->set_name("python3");
  python->set_timestamp_ns(1000);  // relative to kStart
  xspace::XEvent* e = python->add_events();
  e->set_metadata_id(EventId(cpu, "train_step", "TrainStep"));
  e->set_offset_ps(2'500);  // 1000 ns + 2.5 ns after the start
  e->set_duration_ps(1'000'000'123);
  e->add_stats()->set_metadata_id(step);
  e->mutable_stats(0)->set_int64_value(3);
  auto* s = e->add_stats();
  s->set_metadata_id(op);
  s->set_ref_value(static_cast<uint64_t>(interned));
  s = e->add_stats();
  s->set_metadata_id(blob);
  s->set_bytes_value(std::string("\x01\xab", 2));
  s = e->add_stats();
  s->set_metadata_id(ratio);
  s->set_double_value(0.25);
  xspace::XEvent* aggregate = python->add_events();  // no instant: not drawn
  aggregate->set_metadata_id(EventId(cpu, "aggregate"));
  aggregate->set_num_occurrences(5);
  xspace::XLine* counters = cpu->add_lines();
  counters->set_id(12);
  counters->set_name("_counters_");
  counters->set_timestamp_ns(0);
  xspace::XEvent* c = counters->add_events();
  c->set_metadata_id(EventId(cpu, "memory"));
  c->set_offset_ps(0);
  s = c->add_stats();
  s->set_metadata_id(StatId(cpu, "bytes_in_use"));
  s->set_double_value(1.5e9);
  s = c->add_stats();
  s->set_metadata_id(StatId(cpu, "label"));
  s->set_str_value("not a number");
  cpu->add_lines()->set_id(13);  // empty: skipped, as XProf does

  xspace::XPlane* gpu = t.space->add_planes();
  gpu->set_id(1);
  gpu->set_name("/device:GPU:0");
  xspace::XLine* stream = gpu->add_lines();
  stream->set_id(7);
  stream->set_name("Stream #7(Kernel)");
  stream->set_timestamp_ns(5000);
  xspace::XEvent* k = stream->add_events();
  k->set_metadata_id(EventId(gpu, "all-reduce-start"));
  k->set_offset_ps(0);
  k->set_duration_ps(4'000'000);

  xspace::XPlane* meta = t.space->add_planes();
  meta->set_id(2);
  meta->set_name("/host:metadata");
  s = meta->add_stats();
  s->set_metadata_id(StatId(meta, "build"));
  s->set_str_value("jax 0.4");
  return t;
}

json WriteAndParse(const std::vector<const HostTrace*>& hosts, const ChromeWriteOptions& options = {}) {
  std::string out, error;
  EXPECT_TRUE(WriteChromeJsonString(hosts, options, &out, &error)) << error;
  auto doc = testing::ParseKeepingNumbers(out);
  EXPECT_TRUE(doc.is_object()) << out.substr(0, 500);
  return doc;
}

std::map<int64_t, std::string> ProcessNames(const json& doc) {
  std::map<int64_t, std::string> names;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") names[e["pid"]] = e["args"]["name"];
  }
  return names;
}

const json* EventNamed(const json& doc, const std::string& name) {
  for (const auto& e : doc["traceEvents"]) {
    if (e.value("name", "") == name) return &e;
  }
  return nullptr;
}

TEST(ChromeJsonExport, XSpaceHostBecomesProcessesThreadsAndArgs) {
  const HostTrace host = XSpaceHost("hostA");
  const json doc = WriteAndParse({&host});
  EXPECT_EQ(doc["baseTimeNanoseconds"], kStart);
  const auto names = ProcessNames(doc);
  EXPECT_EQ(names, (std::map<int64_t, std::string>{{1, "hostA: /host:CPU"}, {2, "hostA: /device:GPU:0"}}));

  std::set<std::string> threads;
  for (const auto& e : doc["traceEvents"]) {
    if (e["name"] == "thread_name") threads.insert(e["args"]["name"].get<std::string>());
    if (e["name"] == "process_labels") {
      EXPECT_EQ(e["args"]["labels"], "hostA");
    }
  }
  EXPECT_EQ(threads, (std::set<std::string>{"python3", "Stream #7(Kernel)"}));

  const json* step = EventNamed(doc, "TrainStep");  // display_name wins
  ASSERT_NE(step, nullptr);
  EXPECT_EQ((*step)["ph"], "X");
  EXPECT_EQ((*step)["pid"], 1);
  EXPECT_EQ((*step)["tid"], 11);
  // (1000 ns + 2.5 ns) after the base: 1 026.56 ticks of 2^-10 µs, 1 027;
  // its end 1 001.0025 µs, 1 025 026.56 ticks, 1 025 027: 1 024 000 ticks long.
  EXPECT_EQ((*step)["ts"], "#num:1.0029296875");
  EXPECT_EQ((*step)["dur"], 1000);
  EXPECT_EQ((*step)["args"]["step_num"], 3);
  EXPECT_EQ((*step)["args"]["hlo_op"], "all-reduce.1");  // ref_value resolved
  EXPECT_EQ((*step)["args"]["blob"], "01ab");            // bytes as hex
  EXPECT_EQ((*step)["args"]["ratio"], "#num:0.25");
  EXPECT_EQ(EventNamed(doc, "aggregate"), nullptr);

  const json* memory = EventNamed(doc, "memory");
  ASSERT_NE(memory, nullptr);
  EXPECT_EQ((*memory)["ph"], "C");
  EXPECT_EQ((*memory)["args"], json::parse(R"({"bytes_in_use": "#num:1.5e+09"})"));

  const json* kernel = EventNamed(doc, "all-reduce-start");
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ((*kernel)["pid"], 2);
  EXPECT_EQ((*kernel)["ts"], 5);
  EXPECT_EQ((*kernel)["dur"], 4);

  // Planes XProf does not draw: their stats in the top-level metadata.
  const json& meta = doc["chronolinkHosts"][0];
  EXPECT_EQ(meta["host"], "hostA");
  EXPECT_EQ(meta["format"], "xspace");
  EXPECT_EQ(meta["planes"]["Task Environment"]["profile_start_time"], kStart);
  EXPECT_EQ(meta["planes"]["/host:metadata"]["build"], "jax 0.4");
}

TEST(ChromeJsonExport, SeveralHostsShareOneOriginWithoutPidCollisions) {
  const HostTrace a = XSpaceHost("hostA");
  HostTrace b = XSpaceHost("hostB");
  b.line_base_ns = kStart - 2'000'000'000;  // started 2 s earlier: the origin
  HostTrace kineto;
  std::string error;
  ASSERT_TRUE(ParseChromeJson(testing::KinetoDocument(), {.origin_ns = {}, .host = "rank1"}, &kineto,
                              &error))
      << error;
  ChromeWriteOptions options;
  options.top_level_extra["chronolink"] = {{"offsets_source", "offsets.jsonl"}};
  const json doc = WriteAndParse({&a, &b, &kineto}, options);

  EXPECT_EQ(doc["baseTimeNanoseconds"], kineto.line_base_ns);  // the earliest line base
  EXPECT_EQ(doc["chronolink"]["offsets_source"], "offsets.jsonl");
  const auto names = ProcessNames(doc);
  std::set<std::string> unique;
  for (const auto& [pid, name] : names) unique.insert(name);
  EXPECT_EQ(unique.size(), names.size());
  EXPECT_TRUE(unique.count("hostA: /host:CPU"));
  EXPECT_TRUE(unique.count("hostB: /host:CPU"));
  EXPECT_TRUE(unique.count("rank1: python 4242"));
  EXPECT_TRUE(unique.count("rank1: GPU 0"));
  EXPECT_TRUE(unique.count("rank1: pid \"Spans\""));

  // Each event's instant survives to the grid's tick: ts + origin = its own base + offset.
  const int64_t origin = kineto.line_base_ns;
  std::map<std::string, std::string> steps;  // host label -> ts
  for (const auto& e : doc["traceEvents"]) {
    if (e.value("name", "") == "TrainStep") steps[names.at(e["pid"])] = testing::GridTick(testing::WrittenPs(e["ts"]));
    if (e.value("name", "") == "aten::add") {
      EXPECT_EQ(testing::GridTick(testing::WrittenPs(e["ts"])), testing::GridTick(5391843215123'000));
      EXPECT_EQ(e["args"]["Input Dims"], json::parse("[[2, 3], [2, 3], []]"));
    }
  }
  auto expected = [&](int64_t base) {
    return testing::GridTick(static_cast<__int128>(base + 1002 - origin) * 1000 + 500);
  };
  EXPECT_EQ(steps["hostA: /host:CPU"], expected(kStart));
  EXPECT_EQ(steps["hostB: /host:CPU"], expected(kStart - 2'000'000'000));
  // One entry per host; the Kineto host's top-level keys are kept there.
  ASSERT_EQ(doc["chronolinkHosts"].size(), 3u);
  EXPECT_EQ(doc["chronolinkHosts"][2]["planes"]["chrome.top_level"]["distributedInfo"]["rank"], 1);
}

TEST(ChromeJsonExport, HostWithUnknownStartCannotJoinOthers) {
  HostTrace legacy, other = XSpaceHost("hostA");
  std::string error, out;
  ASSERT_TRUE(ParseChromeJson(testing::LegacyDocument(), {.origin_ns = {}, .host = "node2"}, &legacy,
                              &error));
  EXPECT_FALSE(WriteChromeJsonString({&other, &legacy}, {}, &out, &error));
  EXPECT_NE(error.find("node2"), std::string::npos) << error;
  EXPECT_NE(error.find("unknown start"), std::string::npos) << error;
}

class ChromeJsonFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("chronolink_chrome_writer_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<std::string> Entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  fs::path dir_;
};

TEST_F(ChromeJsonFileTest, WritesTheWholeFileAndReadsBack) {
  const HostTrace host = XSpaceHost("hostA");
  std::string error;
  ASSERT_TRUE(WriteChromeJsonFile({&host}, dir_ / "out.json", {}, &error)) << error;
  EXPECT_EQ(Entries(), std::vector<std::string>{"out.json"});
  HostTrace back;
  ASSERT_TRUE(ReadChromeJsonFile(dir_ / "out.json", {}, &back, &error)) << error;
  EXPECT_EQ(back.line_base_ns, kStart);
  EXPECT_EQ(fs::status(dir_ / "out.json").permissions() & fs::perms::others_read, fs::perms::others_read);
}

TEST_F(ChromeJsonFileTest, FailureLeavesNoFileAndKeepsAnOldOne) {
  // Timestamps that overflow when rebased: a far base against an origin
  // on the other side of the epoch.
  HostTrace host = XSpaceHost("hostA");
  host.line_base_ns = INT64_MAX - 10;
  ChromeWriteOptions far;
  far.origin_ns = -kStart;
  std::string error;
  EXPECT_FALSE(WriteChromeJsonFile({&host}, dir_ / "out.json", far, &error));
  EXPECT_NE(error.find("does not fit"), std::string::npos) << error;
  EXPECT_TRUE(Entries().empty());

  std::ofstream(dir_ / "old.json") << "old";
  EXPECT_FALSE(WriteChromeJsonFile({&host}, dir_ / "old.json", far, &error));
  EXPECT_EQ(Entries(), std::vector<std::string>{"old.json"});
  std::stringstream content;
  content << std::ifstream(dir_ / "old.json").rdbuf();
  EXPECT_EQ(content.str(), "old");

  EXPECT_FALSE(WriteChromeJsonFile({&host}, dir_ / "missing" / "out.json", far, &error));
  EXPECT_NE(error.find("missing"), std::string::npos) << error;
  fs::create_directory(dir_ / "a_directory");
  const HostTrace good = XSpaceHost("hostA");
  EXPECT_FALSE(WriteChromeJsonFile({&good}, dir_ / "a_directory", {}, &error));  // rename fails
  EXPECT_EQ(Entries(), (std::vector<std::string>{"a_directory", "old.json"}));
  EXPECT_TRUE(fs::is_empty(dir_ / "a_directory"));
}

}  // namespace
}  // namespace chronolink::trace
