// XSpace reader and writer: byte-exact round trips (unknown fields at every
// level included), one clear error for truncated or corrupt files, atomic
// writes, the relative/absolute line-time rule, and the files checked by
// independent readers (protoc --decode_raw, python3-protobuf).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/unknown_field_set.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tools/trace_fixture/xspace_fixture.h"
#include "trace/exporters/xspace_writer.h"
#include "trace/importers/xspace/line_base.h"
#include "trace/importers/xspace/xspace_reader.h"
#include "trace/model/xplane_edit.h"

namespace chronolink::trace {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "xspace_io_XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string ReadBytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteBytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// Adds one unknown field of every wire type to `m`, numbered from `base`.
void AddUnknownFields(google::protobuf::Message* m, int base) {
  auto* unknown = m->GetReflection()->MutableUnknownFields(m);
  unknown->AddVarint(base, 0xfeedULL + base);
  unknown->AddFixed32(base + 1, 0x12345678u);
  unknown->AddFixed64(base + 2, 0x1122334455667788ULL);
  unknown->AddLengthDelimited(base + 3, "newer producer's field " + std::to_string(base));
  unknown->AddGroup(base + 4)->AddVarint(1, 42);
}

int UnknownCount(const google::protobuf::Message& m) {
  return m.GetReflection()->GetUnknownFields(m).field_count();
}

// An XSpace with every schema field set and unknown fields at every level.
xspace::XSpace RichSpace() {
  xspace::XSpace space;
  space.add_errors("an error");
  space.add_warnings("a warning");
  space.add_hostnames("host-a");
  auto* plane = space.add_planes();
  plane->set_id(3);
  plane->set_name("/device:GPU:3");
  for (int64_t id : {7, 2}) {  // map keys out of order: the writer sorts them
    auto& md = (*plane->mutable_event_metadata())[id];
    md.set_id(id);
    md.set_name("kernel" + std::to_string(id));
    md.set_display_name("Kernel " + std::to_string(id));
    md.set_metadata(std::string("\x00\x01\xff", 3));
    md.add_child_id(id + 1);
    md.add_child_id(id + 2);
    auto* mstat = md.add_stats();
    mstat->set_metadata_id(1);
    mstat->set_bytes_value(std::string("\x80\x00", 2));
    AddUnknownFields(&md, 100);
    AddUnknownFields(mstat, 100);
  }
  for (int64_t id : {9, 1, 4}) {
    auto& sm = (*plane->mutable_stat_metadata())[id];
    sm.set_id(id);
    sm.set_name("stat" + std::to_string(id));
    sm.set_description("description " + std::to_string(id));
    AddUnknownFields(&sm, 200);
  }
  auto* pstat = plane->add_stats();
  pstat->set_metadata_id(9);
  pstat->set_double_value(-2.5e-300);
  AddUnknownFields(pstat, 300);
  auto* line = plane->add_lines();
  line->set_id(14);
  line->set_display_id(15);
  line->set_name("Stream #14(NCCL)");
  line->set_display_name("NCCL");
  line->set_timestamp_ns(123'456);
  line->set_duration_ps(9'000'000);
  AddUnknownFields(line, 400);
  auto* e1 = line->add_events();
  e1->set_metadata_id(7);
  e1->set_offset_ps(1'500);
  e1->set_duration_ps(2'000);
  auto* s1 = e1->add_stats();
  s1->set_metadata_id(1);
  s1->set_uint64_value(std::numeric_limits<uint64_t>::max());
  auto* s2 = e1->add_stats();
  s2->set_metadata_id(4);
  s2->set_int64_value(std::numeric_limits<int64_t>::min());
  auto* s3 = e1->add_stats();
  s3->set_metadata_id(4);
  s3->set_str_value("hlo ✓");
  auto* s4 = e1->add_stats();
  s4->set_metadata_id(4);
  s4->set_ref_value(9);
  auto* s5 = e1->add_stats();
  s5->set_metadata_id(4);
  s5->set_compressed_str_value(std::string("\x1f\x8b\x00", 3));
  AddUnknownFields(e1, 500);
  AddUnknownFields(s1, 600);
  auto* e2 = line->add_events();
  e2->set_metadata_id(2);
  e2->set_num_occurrences(12);  // the oneof's other branch
  AddUnknownFields(e2, 700);
  AddUnknownFields(plane, 800);
  AddUnknownFields(&space, 900);
  return space;
}

std::string Serialized(const xspace::XSpace& space) {
  std::string bytes, error;
  EXPECT_TRUE(SerializeXSpace(space, &bytes, &error)) << error;
  return bytes;
}

// Appends a raw unknown top-level field (number 77, length-delimited), as a
// newer producer's writer would, after everything else.
std::string AppendRawField(std::string bytes) {
  std::string tail;
  {
    google::protobuf::io::StringOutputStream sink(&tail);
    google::protobuf::io::CodedOutputStream out(&sink);
    out.WriteTag((77 << 3) | 2);
    out.WriteVarint32(5);
    out.WriteRaw("extra", 5);
  }
  return bytes + tail;
}

TEST(XSpaceIoTest, ReadWriteIsByteExactWithUnknownFieldsAtEveryLevel) {
  TempDir dir;
  const std::string original = AppendRawField(Serialized(RichSpace()));
  const fs::path first = dir.path() / "host-a.xplane.pb";
  WriteBytes(first, original);

  HostTrace trace;
  std::string error;
  ASSERT_TRUE(ReadXSpaceFile(first, &trace, &error)) << error;
  // The unknown fields were kept where they were, not dropped or moved.
  EXPECT_EQ(UnknownCount(*trace.space), 6);  // 5 added + the raw field 77
  const auto& plane = trace.space->planes(0);
  EXPECT_EQ(UnknownCount(plane), 5);
  EXPECT_EQ(UnknownCount(plane.lines(0)), 5);
  EXPECT_EQ(UnknownCount(plane.lines(0).events(0)), 5);
  EXPECT_EQ(UnknownCount(plane.lines(0).events(0).stats(0)), 5);
  EXPECT_EQ(UnknownCount(plane.stats(0)), 5);
  EXPECT_EQ(UnknownCount(plane.event_metadata().at(7)), 5);
  EXPECT_EQ(UnknownCount(plane.event_metadata().at(7).stats(0)), 5);
  EXPECT_EQ(UnknownCount(plane.stat_metadata().at(4)), 5);
  EXPECT_EQ(plane.lines(0).events(1).num_occurrences(), 12);
  EXPECT_EQ(plane.lines(0).events(0).stats(0).uint64_value(), std::numeric_limits<uint64_t>::max());

  const fs::path second = dir.path() / "out" / "host-a.xplane.pb";
  fs::create_directories(second.parent_path());
  ASSERT_TRUE(WriteXSpaceFile(trace, second, &error)) << error;
  EXPECT_EQ(ReadBytes(second), original);

  HostTrace again;
  ASSERT_TRUE(ReadXSpaceFile(second, &again, &error)) << error;
  const fs::path third = dir.path() / "third.xplane.pb";
  ASSERT_TRUE(WriteXSpaceFile(again, third, &error)) << error;
  EXPECT_EQ(ReadBytes(third), original);
  EXPECT_EQ(again.host, "host-a");
}

TEST(XSpaceIoTest, ParsedBytesRoundTripThroughSerialize) {
  const std::string original = AppendRawField(Serialized(RichSpace()));
  HostTrace trace;
  std::string error;
  ASSERT_TRUE(ParseXSpace(original, &trace, &error)) << error;
  EXPECT_EQ(trace.host, "host-a");  // hostnames[0] when there is no file name
  EXPECT_EQ(Serialized(*trace.space), original);
}

TEST(XSpaceIoTest, FilesOver64MiBAreRead) {
  // protobuf's historical 64 MiB default must not cut a large profile.
  TempDir dir;
  xspace::XSpace space;
  auto* plane = space.add_planes();
  plane->set_name("/host:CPU");
  plane->add_stats()->set_bytes_value(std::string(70u << 20, '\x5a'));
  const fs::path path = dir.path() / "big.xplane.pb";
  WriteBytes(path, Serialized(space));
  HostTrace trace;
  std::string error;
  ASSERT_TRUE(ReadXSpaceFile(path, &trace, &error)) << error;
  EXPECT_EQ(trace.space->planes(0).stats(0).bytes_value().size(), 70u << 20);
}

TEST(XSpaceIoTest, FilesOf2GiBOrMoreAreRefusedWithoutReading) {
  TempDir dir;
  const fs::path path = dir.path() / "huge.xplane.pb";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, int64_t{2} << 30), 0);  // sparse: no disk used
  ::close(fd);
  HostTrace trace;
  std::string error;
  EXPECT_FALSE(ReadXSpaceFile(path, &trace, &error));
  EXPECT_NE(error.find(path.string()), std::string::npos) << error;
  EXPECT_NE(error.find("2 GiB"), std::string::npos) << error;
}

// Reads `bytes` as a file and returns the error (empty when it was accepted).
std::string ReadError(const TempDir& dir, const std::string& bytes) {
  const fs::path path = dir.path() / "bad.xplane.pb";
  WriteBytes(path, bytes);
  HostTrace trace;
  std::string error;
  if (ReadXSpaceFile(path, &trace, &error)) return "";
  EXPECT_EQ(trace.space->planes_size(), 0);  // nothing half-read is handed out
  EXPECT_NE(error.find(path.string()), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << "one line: " << error;
  return error;
}

std::string FixtureBytes() {
  XSpaceFixtureOptions options;
  options.hosts = 1;
  std::vector<FixtureHost> hosts;
  std::string error;
  EXPECT_TRUE(ResolveFixtureHosts(options, &hosts, &error)) << error;
  HostTrace trace;
  EXPECT_TRUE(GenerateFixtureHost(options, hosts[0], &trace, &error)) << error;
  return Serialized(*trace.space);
}

TEST(XSpaceIoTest, TruncatedFilesGiveOneClearError) {
  TempDir dir;
  const std::string good = FixtureBytes();
  ASSERT_GT(good.size(), 1000u);
  for (const size_t keep : {good.size() - 1, good.size() / 2, size_t{7}, size_t{1}}) {
    const std::string error = ReadError(dir, good.substr(0, keep));
    EXPECT_NE(error.find("truncated"), std::string::npos) << "keep " << keep << ": " << error;
  }
  // Cutting inside a plane names the field and how much was missing.
  const std::string error = ReadError(dir, good.substr(0, good.size() / 2));
  EXPECT_NE(error.find("field 1 (planes)"), std::string::npos) << error;
  EXPECT_NE(error.find("remain"), std::string::npos) << error;
}

TEST(XSpaceIoTest, CorruptFilesGiveOneClearError) {
  TempDir dir;
  const std::string good = FixtureBytes();
  EXPECT_NE(ReadError(dir, std::string("\x07", 1) + good).find("invalid field tag"), std::string::npos);
  // Trailing bytes: an end-group tag after a valid message.
  EXPECT_NE(ReadError(dir, good + "\x0c").find("stray end-group"), std::string::npos);
  // Trailing bytes: an incomplete varint.
  EXPECT_NE(ReadError(dir, good + "\xff").find("truncated"), std::string::npos);
  // A known field number with another wire type is an unknown field to
  // protobuf, not an error: it is kept.
  EXPECT_EQ(ReadError(dir, std::string("\x08\x01", 2) + good), "");
  // A string that is not UTF-8.
  xspace::XSpace bad_host;
  bad_host.add_hostnames("ok");
  std::string bytes = Serialized(bad_host);
  bytes.back() = '\xff';
  EXPECT_NE(ReadError(dir, bytes).find("not valid UTF-8"), std::string::npos);
  // Inside a plane: the plane's index and offset are named.
  std::string inner = good;
  const size_t pos = inner.find("/device:GPU:0");
  ASSERT_NE(pos, std::string::npos);
  inner[pos] = '\xc0';  // invalid UTF-8 start byte in the plane's name
  const std::string error = ReadError(dir, inner);
  EXPECT_NE(error.find("plane #1"), std::string::npos) << error;
  EXPECT_NE(ReadError(dir, "").find("empty"), std::string::npos);
}

// A name may hold anything UTF-8 allows (xspace_reader_fuzz found a line
// name with a newline and NULs): a message naming it stays one printable
// line.
TEST(XSpaceIoTest, ARefusalNamingAnOddLineStaysOneLine) {
  xspace::XSpace space;
  SetProfileStartTime(&space, 1'795'320'926'000'000'000);
  xspace::XPlane* cpu = GetOrCreatePlane(&space, "/host:CPU");
  xspace::XLine* odd = GetOrCreateLine(cpu, std::string("a\nb\0c\x1f'd", 8));
  odd->set_timestamp_ns(432'345'564'227'567'615);  // absolute epoch ns
  odd->add_events()->set_offset_ps(1);
  xspace::XLine* relative = GetOrCreateLine(cpu, "python3");
  relative->set_timestamp_ns(200'012);
  relative->add_events()->set_offset_ps(1);
  std::string bytes;
  ASSERT_TRUE(space.SerializeToString(&bytes));
  HostTrace trace;
  std::string error;
  ASSERT_FALSE(ParseXSpace(bytes, &trace, &error));
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  EXPECT_NE(error.find("'a\\nb\\x00c\\x1f\\'d'"), std::string::npos) << error;
}

TEST(XSpaceIoTest, ReadRefusesWhatIsNotAFile) {
  TempDir dir;
  HostTrace trace;
  std::string error;
  EXPECT_FALSE(ReadXSpaceFile(dir.path() / "missing.xplane.pb", &trace, &error));
  EXPECT_NE(error.find("cannot open"), std::string::npos) << error;
  EXPECT_FALSE(ReadXSpaceFile(dir.path(), &trace, &error));
  EXPECT_NE(error.find("not a regular file"), std::string::npos) << error;
}

TEST(XSpaceIoTest, WriterLeavesNothingBehindOnFailure) {
  TempDir dir;
  HostTrace trace;
  trace.space->add_hostnames("h");
  std::string error;
  // The directory does not exist: nothing can be created.
  EXPECT_FALSE(WriteXSpaceFile(trace, dir.path() / "absent" / "h.xplane.pb", &error));
  EXPECT_NE(error.find("cannot create"), std::string::npos) << error;
  // The target is a directory: the temporary file is written, the rename
  // fails, and the temporary file is removed again.
  const fs::path target = dir.path() / "h.xplane.pb";
  fs::create_directory(target);
  EXPECT_FALSE(WriteXSpaceFile(trace, target, &error));
  EXPECT_NE(error.find("rename"), std::string::npos) << error;
  EXPECT_TRUE(fs::is_directory(target));
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) entries += e.path() != target;
  EXPECT_EQ(entries, 0) << "a temporary file was left behind";
}

TEST(XSpaceIoTest, WriterReplacesAnOldFileWhole) {
  TempDir dir;
  const fs::path path = dir.path() / "h.xplane.pb";
  WriteBytes(path, std::string(10'000, 'x'));
  HostTrace trace;
  trace.space->add_hostnames("h");
  std::string error;
  ASSERT_TRUE(WriteXSpaceFile(trace, path, &error)) << error;
  EXPECT_EQ(ReadBytes(path), Serialized(*trace.space));  // no tail of the old file
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
}

// Already serialised bytes (the wire-level align's): from a 4 KiB-aligned
// buffer of 1 MiB or more the whole blocks go out with O_DIRECT and the
// tail through the page cache; any other buffer, and a file system that
// refuses O_DIRECT (tmpfs), all through the cache. The file is the bytes
// either way, and replaces an old one whole.
TEST(XSpaceIoTest, WrittenBytesAreTheFileDirectOrNot) {
  constexpr size_t kAlign = 4096;
  const size_t size = (3u << 20) + 1234;  // whole blocks and a tail
  std::unique_ptr<char[]> storage(new char[size + 2 * kAlign]);
  char* aligned = storage.get() + (kAlign - reinterpret_cast<uintptr_t>(storage.get()) % kAlign);
  for (size_t i = 0; i < size + kAlign; ++i) aligned[i] = static_cast<char>(i * 131 + (i >> 12));
  std::vector<fs::path> dirs;
  TempDir dir;
  dirs.push_back(dir.path());
  std::error_code ec;
  const fs::path shm = fs::path("/dev/shm") / ("chronolink-direct-test-" + std::to_string(::getpid()));
  if (fs::create_directory(shm, ec)) dirs.push_back(shm);
  for (const fs::path& d : dirs) {
    for (const size_t skew : {size_t{0}, size_t{1}}) {      // aligned, not aligned
      for (const size_t n : {size, size_t{1} << 20, size_t{5000}}) {
        SCOPED_TRACE(d.string() + " skew " + std::to_string(skew) + " size " + std::to_string(n));
        const fs::path path = d / "h.xplane.pb";
        WriteBytes(path, std::string(n + 10'000, 'x'));
        const std::string_view bytes(aligned + skew, n);
        std::string error;
        ASSERT_TRUE(WriteXSpaceBytesFile(bytes, path, &error)) << error;
        EXPECT_TRUE(ReadBytes(path) == bytes);
        EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator()), 1);
      }
    }
  }
  fs::remove_all(shm, ec);
}

// A space whose one line holds an event at `line_ts`, with an optional start.
xspace::XSpace LineAt(int64_t line_ts, std::optional<uint64_t> start) {
  xspace::XSpace space;
  auto* line = space.add_planes()->add_lines();
  line->set_name("t");
  line->set_timestamp_ns(line_ts);
  line->add_events()->set_duration_ps(1);
  if (start) SetProfileStartTime(&space, *start);
  return space;
}

LineBase Detect(const xspace::XSpace& space) {
  LineBase base;
  std::string error;
  EXPECT_TRUE(DetectLineBase(space, &base, &error)) << error;
  return base;
}

TEST(XSpaceIoTest, LineTimestampsRelativeToTheProfileStart) {
  const uint64_t start = 1'795'320'926'000'000'000;
  const LineBase base = Detect(LineAt(5'000'000, start));
  EXPECT_TRUE(base.relative);
  EXPECT_TRUE(base.known);
  EXPECT_EQ(base.base_ns, static_cast<int64_t>(start));
  // Slightly before the start (a thread that began earlier) is still relative.
  EXPECT_EQ(Detect(LineAt(-20'000, start)).base_ns, static_cast<int64_t>(start));
}

TEST(XSpaceIoTest, LineTimestampsAbsolute) {
  const uint64_t start = 1'795'320'926'000'000'000;
  const LineBase with_start = Detect(LineAt(start + 1'000, start));
  EXPECT_FALSE(with_start.relative);
  EXPECT_EQ(with_start.base_ns, 0);
  EXPECT_EQ(Detect(LineAt(1'795'320'926'000'000'000, std::nullopt)).base_ns, 0);
  // A clock that is not the epoch (e.g. 5 days of uptime): absolute because
  // the lines lie within a day of the start.
  const uint64_t uptime = 5 * 86'400'000'000'000ULL;
  const LineBase small_clock = Detect(LineAt(uptime + 3'000'000, uptime));
  EXPECT_FALSE(small_clock.relative);
  EXPECT_EQ(small_clock.base_ns, 0);
}

TEST(XSpaceIoTest, RelativeWithoutAStartIsUnknownAndSaysSo) {
  TempDir dir;
  const fs::path path = dir.path() / "legacy.xplane.pb";
  WriteBytes(path, Serialized(LineAt(5'000, std::nullopt)));
  HostTrace trace;
  XSpaceReadResult result;
  std::string error;
  ASSERT_TRUE(ReadXSpaceFile(path, &trace, &error, &result)) << error;
  EXPECT_FALSE(trace.line_base_known);
  ASSERT_EQ(result.warnings.size(), 1u);
  EXPECT_NE(result.warnings[0].find("profile_start_time"), std::string::npos);
}

TEST(XSpaceIoTest, MixedOrOversizedLineBasesAreErrors) {
  const uint64_t start = 1'795'320'926'000'000'000;
  xspace::XSpace mixed = LineAt(5'000, start);
  auto* abs_line = mixed.mutable_planes(0)->add_lines();
  abs_line->set_name("absolute");
  abs_line->set_timestamp_ns(static_cast<int64_t>(start));
  abs_line->add_events();
  LineBase base;
  std::string error;
  EXPECT_FALSE(DetectLineBase(mixed, &base, &error));
  EXPECT_NE(error.find("mix"), std::string::npos) << error;
  EXPECT_NE(error.find("'absolute'"), std::string::npos) << error;
  // An empty line does not count (XProf skips it).
  mixed.mutable_planes(0)->mutable_lines(1)->clear_events();
  EXPECT_TRUE(DetectLineBase(mixed, &base, &error)) << error;
  EXPECT_FALSE(DetectLineBase(LineAt(0, std::numeric_limits<uint64_t>::max()), &base, &error));
  EXPECT_NE(error.find("does not fit"), std::string::npos) << error;
}

TEST(XSpaceIoTest, HostNameComesFromTheFileAndMismatchesAreReported) {
  TempDir dir;
  xspace::XSpace space;
  space.add_hostnames("listed");
  const fs::path path = dir.path() / "worker-3.xplane.pb";
  WriteBytes(path, Serialized(space));
  HostTrace trace;
  XSpaceReadResult result;
  std::string error;
  ASSERT_TRUE(ReadXSpaceFile(path, &trace, &error, &result)) << error;
  EXPECT_EQ(trace.host, "worker-3");
  EXPECT_EQ(trace.source, path);
  ASSERT_EQ(result.warnings.size(), 1u);
  EXPECT_NE(result.warnings[0].find("'listed'"), std::string::npos) << result.warnings[0];
  space.set_hostnames(0, "worker-3");
  WriteBytes(path, Serialized(space));
  result.warnings.clear();
  ASSERT_TRUE(ReadXSpaceFile(path, &trace, &error, &result)) << error;
  EXPECT_TRUE(result.warnings.empty());
}

// ---- Independent readers -------------------------------------------------

// Runs `command`, returning its exit status and stdout.
int RunCommand(const std::string& command, std::string* out) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return -1;
  char buf[65536];
  size_t n;
  out->clear();
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out->append(buf, n);
  const int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Missing tools fail the test under CI and skip it elsewhere.
#define REQUIRE_TOOL(available, what)                                     \
  do {                                                                    \
    if (!(available)) {                                                   \
      if (std::getenv("CI")) FAIL() << what << " is missing (CI is set)"; \
      GTEST_SKIP() << what << " is missing; install it to run this check"; \
    }                                                                     \
  } while (0)

struct FixtureFile {
  TempDir dir;
  fs::path path;
  HostTrace trace;
};

void WriteFixtureFile(FixtureFile* f) {
  XSpaceFixtureOptions options;
  options.hosts = 2;
  options.gpus_per_host = 2;
  options.steps = 2;
  std::vector<FixtureHost> hosts;
  std::string error;
  ASSERT_TRUE(ResolveFixtureHosts(options, &hosts, &error)) << error;
  ASSERT_TRUE(GenerateFixtureHost(options, hosts[1], &f->trace, &error)) << error;
  f->path = f->dir.path() / "host1.xplane.pb";
  ASSERT_TRUE(WriteXSpaceFile(f->trace, f->path, &error)) << error;
}

TEST(XSpaceIndependentReaderTest, ProtocDecodeRawReadsTheFile) {
  std::string out;
  REQUIRE_TOOL(RunCommand("protoc --version 2>/dev/null", &out) == 0, "protoc (protobuf-compiler)");
  FixtureFile f;
  WriteFixtureFile(&f);
  ASSERT_EQ(RunCommand("protoc --decode_raw < '" + f.path.string() + "'", &out), 0) << out;
  // Field numbers from REFERENCE: planes 1 { name 2 }, hostnames 4.
  EXPECT_NE(out.find("2: \"/host:CPU\""), std::string::npos);
  EXPECT_NE(out.find("2: \"/device:GPU:1\""), std::string::npos);
  EXPECT_NE(out.find("2: \"Task Environment\""), std::string::npos);
  EXPECT_NE(out.find("4: \"host1\""), std::string::npos);
  const auto start = ProfileStartTime(*f.trace.space);
  ASSERT_TRUE(start);
  EXPECT_NE(out.find("3: " + std::to_string(*start)), std::string::npos)
      << "profile_start_time as uint64 field 3 of an XStat";
}

TEST(XSpaceIndependentReaderTest, Python3ProtobufReadsTheFile) {
  std::string out;
  REQUIRE_TOOL(RunCommand("protoc --version 2>/dev/null", &out) == 0, "protoc (protobuf-compiler)");
  REQUIRE_TOOL(RunCommand("/usr/bin/python3 -c 'import google.protobuf' 2>/dev/null", &out) == 0,
               "python3-protobuf");
  FixtureFile f;
  WriteFixtureFile(&f);
  const fs::path gen = f.dir.path() / "py";
  fs::create_directories(gen);
  const std::string src = CHRONOLINK_SOURCE_DIR;
  ASSERT_EQ(RunCommand("protoc --python_out='" + gen.string() + "' -I'" + src + "' '" + src +
                    "/proto/xplane.proto' 2>&1",
                &out),
            0)
      << out;
  const fs::path script = f.dir.path() / "read.py";
  std::ofstream(script) << R"(import json, sys
sys.path.insert(0, sys.argv[1])
from proto import xplane_pb2
space = xplane_pb2.XSpace()
space.ParseFromString(open(sys.argv[2], 'rb').read())
summary = {'hostnames': list(space.hostnames), 'planes': {}}
for p in space.planes:
    stats = {}
    for s in p.stats:
        stats[p.stat_metadata[s.metadata_id].name] = s.WhichOneof('value') + ':' + str(getattr(s, s.WhichOneof('value')))
    events = sum(len(l.events) for l in p.lines)
    first = None
    for l in p.lines:
        if l.name.startswith('Stream #14'):
            e = l.events[0]
            first = {'name': p.event_metadata[e.metadata_id].name,
                     'stats': {p.stat_metadata[s.metadata_id].name: str(getattr(s, s.WhichOneof('value'))) for s in e.stats}}
    summary['planes'][p.name] = {'id': p.id, 'stats': stats, 'events': events, 'nccl0': first}
print(json.dumps(summary))
)";
  ASSERT_EQ(RunCommand("/usr/bin/python3 '" + script.string() + "' '" + gen.string() + "' '" +
                    f.path.string() + "' 2>&1",
                &out),
            0)
      << out;
  const auto summary = nlohmann::json::parse(out);
  EXPECT_EQ(summary["hostnames"], nlohmann::json::array({"host1"}));
  const auto& planes = summary["planes"];
  ASSERT_EQ(planes.size(), 4u) << out;
  EXPECT_EQ(planes["/host:CPU"]["id"], 49);
  EXPECT_EQ(planes["/device:GPU:1"]["id"], 1);
  EXPECT_EQ(planes["Task Environment"]["stats"]["profile_start_time"],
            "uint64_value:" + std::to_string(*ProfileStartTime(*f.trace.space)));
  EXPECT_EQ(planes["Task Environment"]["stats"]["profile_stop_time"],
            "uint64_value:" + std::to_string(*ProfileStopTime(*f.trace.space)));
  for (const auto& plane : f.trace.space->planes()) {
    int64_t events = 0;
    for (const auto& line : plane.lines()) events += line.events_size();
    EXPECT_EQ(planes[plane.name()]["events"], events) << plane.name();
  }
  const auto& nccl = planes["/device:GPU:0"]["nccl0"];
  EXPECT_EQ(nccl["name"], "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  EXPECT_EQ(nccl["stats"]["hlo_op"], "all-reduce.1");
  EXPECT_EQ(nccl["stats"]["hlo_module"], "jit_train_step");
  EXPECT_TRUE(nccl["stats"].contains("correlation_id"));
  EXPECT_TRUE(nccl["stats"].contains("kernel_details"));
}

}  // namespace
}  // namespace chronolink::trace
