// The wire rewrite's output check (trace/wire/xspace_wire_check.h) against
// protobuf's own parser: on protobuf's own bytes the walk's summary is the
// parsed message's; on every corruption of them (each byte changed, cut
// short, a length one off) the walk accepts only what protobuf parses, and
// what it accepts it sums up as the parsed message says; and a summary that
// differs from what was meant (an event's time, a count) is named.
#include "trace/wire/xspace_wire_check.h"

#include <google/protobuf/stubs/logging.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>

#include "proto/xplane.pb.h"
#include "tests/support/property_cases.h"

namespace chronolink::trace {
namespace {

// A space with a bit of every message kind: metadata maps, stats of each
// kind, strings, a num_occurrences event, a line duration, an unknown field.
xspace::XSpace SampleSpace() {
  xspace::XSpace space;
  space.add_hostnames("h");
  space.add_warnings("w");
  for (int p = 0; p < 2; ++p) {
    xspace::XPlane* plane = space.add_planes();
    plane->set_id(p == 0 ? 7 : -3);
    plane->set_name(p == 0 ? "/host:CPU" : "/device:GPU:0");
    xspace::XEventMetadata& md = (*plane->mutable_event_metadata())[1];
    md.set_id(1);
    md.set_name("op é");
    md.set_metadata(std::string("\xff\x00\x01", 3));
    md.add_child_id(4);
    md.add_child_id(5);
    xspace::XStatMetadata& smd = (*plane->mutable_stat_metadata())[2];
    smd.set_id(2);
    smd.set_name("note");
    plane->add_stats()->set_double_value(1.5);
    for (int l = 0; l < 3; ++l) {
      xspace::XLine* line = plane->add_lines();
      line->set_id(l);
      line->set_name("t" + std::to_string(l));
      line->set_timestamp_ns(1000 * l);
      if (l == 1) line->set_duration_ps(99);
      for (int e = 0; e < 4; ++e) {
        xspace::XEvent* event = line->add_events();
        event->set_metadata_id(1);
        if (e == 2) event->set_num_occurrences(3);
        else event->set_offset_ps(e * 1'000'003LL + l);
        event->set_duration_ps(e * 17);
        xspace::XStat* stat = event->add_stats();
        stat->set_metadata_id(2);
        if (e % 2) stat->set_str_value("s" + std::to_string(e));
        else stat->set_bytes_value(std::string("\x80\x81", 2));
      }
    }
  }
  space.mutable_planes(0)->GetReflection()->MutableUnknownFields(space.mutable_planes(0))->AddVarint(99, 5);
  return space;
}

WireSpaceSummary SummaryOfMessage(const xspace::XSpace& space) {
  WireSummaryBuilder builder;
  for (const auto& plane : space.planes()) builder.AddPlane(plane);
  return builder.summary();
}

TEST(XSpaceWireCheckTest, ProtobufsOwnBytesSumUpAsTheMessage) {
  const xspace::XSpace space = SampleSpace();
  const std::string bytes = space.SerializeAsString();
  WireSpaceSummary summary;
  std::string why;
  ASSERT_TRUE(SummarizeXSpaceWire(bytes, &summary, &why)) << why;
  EXPECT_EQ(summary, SummaryOfMessage(space));
  EXPECT_EQ(summary.planes.size(), 2u);
  EXPECT_EQ(summary.planes[0].lines.size(), 3u);
  EXPECT_EQ(summary.planes[0].lines[1].duration_ps, 99);
  EXPECT_TRUE(CheckXSpaceWire(bytes, summary, &why)) << why;
  EXPECT_TRUE(CheckXSpaceWire("", WireSpaceSummary{}, &why)) << "an empty space parses";
}

std::string Hex(const std::string& bytes) {
  std::string out;
  char buf[4];
  for (const unsigned char c : bytes) {
    std::snprintf(buf, sizeof buf, "%02x", c);
    out += buf;
  }
  return out;
}

// The walk accepts only what protobuf parses, and reads it as protobuf
// does: over every one-byte change, every cut and every length one off.
void ExpectNoLaxerThanProtobuf(const std::string& bytes, int* accepted, int* refused) {
  xspace::XSpace parsed;
  const bool protobuf_ok = parsed.ParseFromString(bytes);
  WireSpaceSummary summary;
  std::string why;
  const bool walk_ok = SummarizeXSpaceWire(bytes, &summary, &why);
  if (walk_ok) {
    ASSERT_TRUE(protobuf_ok) << "the walk accepted bytes protobuf refuses: " << Hex(bytes);
    ASSERT_EQ(summary, SummaryOfMessage(parsed)) << "the walk read other values than protobuf";
    ++*accepted;
  } else {
    EXPECT_FALSE(why.empty());
    ++*refused;
  }
}

TEST(XSpaceWireCheckTest, AcceptsOnlyWhatProtobufParsesOverEveryCorruption) {
  google::protobuf::SetLogHandler(nullptr);
  const std::string bytes = SampleSpace().SerializeAsString();
  int accepted = 0, refused = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (const uint8_t x : {0x01, 0x80, 0xff, 0x7f}) {
      std::string changed = bytes;
      changed[i] = static_cast<char>(changed[i] ^ x);
      ExpectNoLaxerThanProtobuf(changed, &accepted, &refused);
    }
    ExpectNoLaxerThanProtobuf(bytes.substr(0, i), &accepted, &refused);
    std::string plus_one = bytes;
    plus_one[i] = static_cast<char>(plus_one[i] + 1);
    ExpectNoLaxerThanProtobuf(plus_one, &accepted, &refused);
  }
  // 200 000 random three-byte corruptions, fewer where the generated cases
  // are cut (under qemu they were 18 of this test's 20 s).
  const int64_t corruptions = 200'000 * std::min<int64_t>(testing::CasesFromEnvironment(3000), 3000) / 3000;
  std::mt19937_64 random(7);
  for (int64_t n = 0; n < corruptions; ++n) {
    std::string changed = bytes;
    for (int k = 0; k < 3; ++k) changed[random() % changed.size()] = static_cast<char>(random());
    ExpectNoLaxerThanProtobuf(changed, &accepted, &refused);
  }
  EXPECT_GT(accepted, 1000) << "few corruptions parse: the walk's agreement went unchecked";
  EXPECT_GT(refused, 1000);
}

// What the rewrite got wrong once: a line's length prefix one byte off
// after its plane's length grew a byte.
TEST(XSpaceWireCheckTest, ALengthOneByteOffIsRefusedWithWhere) {
  const xspace::XSpace space = SampleSpace();
  const std::string bytes = space.SerializeAsString();
  const WireSpaceSummary meant = SummaryOfMessage(space);
  // The first line of the first plane: find its tag (field 3, length-delimited: 0x1a) after the plane's header.
  const size_t line_tag = bytes.find('\x1a', 3);
  ASSERT_NE(line_tag, std::string::npos);
  for (const int delta : {-1, +1}) {
    std::string off = bytes;
    off[line_tag + 1] = static_cast<char>(off[line_tag + 1] + delta);
    std::string why;
    EXPECT_FALSE(CheckXSpaceWire(off, meant, &why));
    EXPECT_NE(why.find("byte"), std::string::npos) << why;
  }
}

TEST(XSpaceWireCheckTest, OutputThatParsesButSaysOtherThanMeantIsNamed) {
  const xspace::XSpace space = SampleSpace();
  const std::string bytes = space.SerializeAsString();
  std::string why;

  xspace::XSpace moved = space;
  moved.mutable_planes(1)->mutable_lines(2)->mutable_events(3)->set_offset_ps(1);
  EXPECT_FALSE(CheckXSpaceWire(bytes, SummaryOfMessage(moved), &why));
  EXPECT_NE(why.find("plane #1 line #2"), std::string::npos) << why;
  EXPECT_NE(why.find("times"), std::string::npos) << why;

  xspace::XSpace fewer = space;
  fewer.mutable_planes(0)->mutable_lines(0)->mutable_events()->RemoveLast();
  EXPECT_FALSE(CheckXSpaceWire(bytes, SummaryOfMessage(fewer), &why));
  EXPECT_NE(why.find("4 events, meant 3"), std::string::npos) << why;

  xspace::XSpace counted = space;  // the same value as an occurrence count instead of an offset
  xspace::XEvent* e = counted.mutable_planes(0)->mutable_lines(0)->mutable_events(1);
  e->set_num_occurrences(e->offset_ps());
  EXPECT_FALSE(CheckXSpaceWire(bytes, SummaryOfMessage(counted), &why));

  xspace::XSpace more = space;
  more.add_planes();
  EXPECT_FALSE(CheckXSpaceWire(bytes, SummaryOfMessage(more), &why));
  EXPECT_NE(why.find("2 planes, meant 3"), std::string::npos) << why;
}

TEST(XSpaceWireCheckTest, UnknownGroupsAsProtobufParsesThemAndInvalidUtf8Refused) {
  std::string why;
  WireSpaceSummary summary;
  xspace::XSpace parsed;
  // An unknown group (field 20: start 0xa3 0x01, end 0xa4 0x01) holding a
  // varint and a nested group (field 21): protobuf parses it, so does the walk.
  const std::string group("\xa3\x01\x08\x05\xab\x01\xac\x01\xa4\x01", 10);
  ASSERT_TRUE(parsed.ParseFromString(group));
  EXPECT_TRUE(SummarizeXSpaceWire(group, &summary, &why)) << why;
  // Its end tag for another field, or missing: protobuf refuses, so does the walk.
  for (const std::string& bad : {std::string("\xa3\x01\xac\x01", 4), std::string("\xa3\x01\x08\x05", 4),
                                 std::string("\xa4\x01", 2)}) {
    EXPECT_FALSE(parsed.ParseFromString(bad));
    EXPECT_FALSE(SummarizeXSpaceWire(bad, &summary, &why));
    EXPECT_NE(why.find("group"), std::string::npos) << why;
  }
  // A hostname (field 4) that is not UTF-8: protobuf refuses it, so does the walk.
  const std::string bad_utf8("\x22\x02\xc3\x28", 4);
  google::protobuf::SetLogHandler(nullptr);
  EXPECT_FALSE(parsed.ParseFromString(bad_utf8));
  EXPECT_FALSE(SummarizeXSpaceWire(bad_utf8, &summary, &why));
  EXPECT_NE(why.find("UTF-8"), std::string::npos) << why;
}

}  // namespace
}  // namespace chronolink::trace
