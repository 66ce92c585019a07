// The XSpace generator (tests/support/xspace_generator.h) against the
// readers: every file it writes, from seeds or from arbitrary fuzz bytes,
// parses with protobuf and with ParseXSpace (a known line base), keeps every
// timed event in the session, and carries what its features say; over many
// seeds the features cover every field of the schema and every encoding
// protobuf never writes; exact sizes are what the bytes' length prefixes
// hold; the same seed gives the same bytes.
#include "tests/support/xspace_generator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trace/importers/xspace/xspace_reader.h"
#include "trace/model/trace_time.h"
#include "trace/model/xplane_edit.h"

namespace chronolink::trace::testing {
namespace {

constexpr int kSeeds = 2000;

// What is wrong with a generated file; empty when nothing is.
std::string Problems(const GeneratedXSpace& file, const XSpaceGenOptions& options) {
  xspace::XSpace parsed;
  if (!parsed.ParseFromString(file.bytes)) return "protobuf does not parse it";
  HostTrace trace;
  std::string error;
  if (!ParseXSpace(file.bytes, &trace, &error)) return "ParseXSpace refuses it: " + error;
  if (!trace.line_base_known) return "line base unknown";
  const auto& f = file.features;
  if (parsed.hostnames_size() > 0 && (trace.host != file.host || parsed.hostnames(0) != file.host)) {
    return "host " + trace.host + ", generated " + file.host;
  }
  const TraceInstant first{options.session_start_ns, 0};
  const TraceInstant last{options.session_start_ns + options.span_ns, 0};
  int64_t planes = 0, lines = 0, empty_lines = 0, timed = 0, occurrences = 0;
  for (const auto& plane : parsed.planes()) {
    ++planes;
    for (const auto& line : plane.lines()) {
      ++lines;
      empty_lines += line.events().empty();
      for (const auto& event : line.events()) {
        if (event.data_case() == xspace::XEvent::kNumOccurrences) {
          ++occurrences;
          continue;
        }
        ++timed;
        const auto start = EventStart(trace.line_base_ns, line, event);
        const auto end = EventEnd(trace.line_base_ns, line, event);
        if (!start || !end || *start < first || *end > last || *end < *start) {
          return "event outside the session in plane '" + plane.name() + "' line '" + line.name() + "'";
        }
      }
    }
  }
  if (timed == 0) return "no timed event";
  if (planes != f[GenFeature::kPlanes] || lines != f[GenFeature::kLines] || empty_lines != f[GenFeature::kEmptyLines] ||
      timed != f[GenFeature::kTimedEvents] || occurrences != f[GenFeature::kOccurrenceEvents]) {
    return "features disagree with the parsed file";
  }
  const int64_t hostnames = parsed.hostnames_size();
  if (f[GenFeature::kNoHostnames] != (hostnames == 0) || f[GenFeature::kOneHostname] != (hostnames == 1) ||
      f[GenFeature::kSeveralHostnames] != (hostnames > 1)) {
    return "hostname count disagrees";
  }
  const auto start_time = ProfileStartTime(parsed);
  if (f[GenFeature::kTaskEnvironment] != start_time.has_value()) return "Task Environment start disagrees";
  for (const auto bound : {start_time, ProfileStopTime(parsed)}) {
    if (bound && (*bound < static_cast<uint64_t>(first.ns) || *bound > static_cast<uint64_t>(last.ns))) {
      return "session bound outside the span";
    }
  }
  const bool relative = f[GenFeature::kRelativeLineTimes] == 1;
  if (relative ? trace.line_base_ns != static_cast<int64_t>(start_time.value_or(0)) : trace.line_base_ns != 0) {
    return "line base " + std::to_string(trace.line_base_ns) + " is not the generated one";
  }
  return "";
}

// A minimal wire walker, independent of the generator's encoder: the
// payloads of one field number's length-delimited fields in a message.
class Walker {
 public:
  explicit Walker(std::string_view bytes) : p_(bytes.data()), end_(bytes.data() + bytes.size()) {}

  std::optional<uint64_t> Varint() {
    uint64_t v = 0;
    for (int i = 0; i < 10 && p_ < end_; ++i) {
      const auto b = static_cast<uint8_t>(*p_++);
      v |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
      if ((b & 0x80) == 0) return v;
    }
    return std::nullopt;
  }

  // Skips one field's value; false on malformed bytes.
  bool Skip(uint32_t number, uint32_t type) {
    switch (type) {
      case 0: return Varint().has_value();
      case 1: return Advance(8);
      case 5: return Advance(4);
      case 2: {
        const auto length = Varint();
        return length && Advance(*length);
      }
      case 3:
        while (p_ < end_) {
          const auto tag = Varint();
          if (!tag) return false;
          if ((*tag & 7) == 4) return (*tag >> 3) == number;
          if (!Skip(static_cast<uint32_t>(*tag >> 3), static_cast<uint32_t>(*tag & 7))) return false;
        }
        return false;
      default: return false;
    }
  }

  // The payloads of field `wanted` (length-delimited); nullopt when malformed.
  std::optional<std::vector<std::string_view>> Payloads(uint32_t wanted) {
    std::vector<std::string_view> out;
    while (p_ < end_) {
      const auto tag = Varint();
      if (!tag) return std::nullopt;
      const auto number = static_cast<uint32_t>(*tag >> 3), type = static_cast<uint32_t>(*tag & 7);
      if (number == wanted && type == 2) {
        const auto length = Varint();
        if (!length || *length > static_cast<uint64_t>(end_ - p_)) return std::nullopt;
        out.emplace_back(p_, *length);
        p_ += *length;
      } else if (!Skip(number, type)) {
        return std::nullopt;
      }
    }
    return out;
  }

 private:
  bool Advance(uint64_t n) {
    if (n > static_cast<uint64_t>(end_ - p_)) return false;
    p_ += n;
    return true;
  }
  const char* p_;
  const char* end_;
};

// The encoded lengths of every plane and every line of a file.
void MessageLengths(const std::string& bytes, std::vector<size_t>* planes, std::vector<size_t>* lines) {
  const auto plane_payloads = Walker(bytes).Payloads(xspace::XSpace::kPlanesFieldNumber);
  ASSERT_TRUE(plane_payloads);
  for (const auto plane : *plane_payloads) {
    planes->push_back(plane.size());
    const auto line_payloads = Walker(plane).Payloads(xspace::XPlane::kLinesFieldNumber);
    ASSERT_TRUE(line_payloads);
    for (const auto line : *line_payloads) lines->push_back(line.size());
  }
}

bool Contains(const std::vector<size_t>& sizes, size_t n) {
  return std::find(sizes.begin(), sizes.end(), n) != sizes.end();
}

TEST(XSpaceGeneratorTest, EverySeedGivesAValidAlignableFile) {
  const XSpaceGenOptions options;
  const auto began = std::chrono::steady_clock::now();
  std::vector<size_t> sizes;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    GeneratorRandom random(seed);
    const GeneratedXSpace file = GenerateXSpace(random, options);
    ASSERT_EQ(Problems(file, options), "") << "seed " << seed;
    sizes.push_back(file.bytes.size());
  }
  std::sort(sizes.begin(), sizes.end());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  std::printf("%d files in %.2f s; bytes: median %zu, 90th %zu, max %zu\n", kSeeds, seconds, sizes[sizes.size() / 2],
              sizes[sizes.size() * 9 / 10], sizes.back());
  // Most files are small; the budget is soft by the mandatory parts and the
  // element that crossed it.
  EXPECT_LT(sizes[sizes.size() / 2], size_t{16} << 10);
  EXPECT_LT(sizes.back(), options.max_bytes + (16 << 10));
}

TEST(XSpaceGeneratorTest, SeedsCoverEverySchemaFieldAndEncoding) {
  XSpaceGenFeatures sum;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    GeneratorRandom random(seed);
    sum += GenerateXSpace(random, XSpaceGenOptions{}).features;
  }
  for (int i = 0; i < kGenFeatureCount; ++i) {
    const auto feature = static_cast<GenFeature>(i);
    if (feature == GenFeature::kMergedFields || feature == GenFeature::kExactLines ||
        feature == GenFeature::kExactPlanes) {
      EXPECT_EQ(sum[feature], 0) << GenFeatureName(feature) << " without being asked for";
      continue;
    }
    EXPECT_GT(sum[feature], 0) << GenFeatureName(feature);
  }
  for (int level = 0; level < kGenLevels; ++level) {
    for (const int type : {0, 1, 2, 3, 5}) {
      EXPECT_GT(sum.unknown(static_cast<GenLevel>(level), type), 0)
          << "unknown fields of wire type " << type << " in " << GenLevelName(static_cast<GenLevel>(level));
    }
  }
  for (size_t width = 0; width <= 10; ++width) {
    EXPECT_GT(sum.offset_varint_bytes[width], 0) << "offset_ps of " << width << " varint bytes";
  }
  EXPECT_GT(sum[GenFeature::kSeveralHostnames], 50);
  EXPECT_GT(sum[GenFeature::kChildIdsPacked], 50);
  EXPECT_GT(sum[GenFeature::kChildIdsUnpacked], 50);
}

TEST(XSpaceGeneratorTest, ExactLineAndPlaneSizesAreTheLengthPrefixes) {
  for (const size_t n :
       {size_t{48}, size_t{96}, size_t{127}, size_t{128}, size_t{129}, size_t{16383}, size_t{16384}, size_t{16385}}) {
    for (uint64_t seed = 1; seed <= 12; ++seed) {
      SCOPED_TRACE("size " + std::to_string(n) + " seed " + std::to_string(seed));
      XSpaceGenOptions options;
      if (n >= 64) options.line_bytes = n - (seed % 3);  // 127: also 126, 125; 16384: also 16383, 16382
      if (n >= 96) options.plane_bytes = n + (seed % 3);
      if (n == 48) options.line_bytes = n;
      GeneratorRandom random(seed);
      const GeneratedXSpace file = GenerateXSpace(random, options);
      ASSERT_EQ(Problems(file, options), "");
      std::vector<size_t> planes, lines;
      MessageLengths(file.bytes, &planes, &lines);
      if (options.line_bytes) {
        EXPECT_TRUE(Contains(lines, *options.line_bytes));
      }
      if (options.plane_bytes) {
        EXPECT_TRUE(Contains(planes, *options.plane_bytes));
      }
      EXPECT_EQ(file.features[GenFeature::kExactLines], options.line_bytes ? 1 : 0);
      EXPECT_EQ(file.features[GenFeature::kExactPlanes], options.plane_bytes ? 1 : 0);
    }
  }
}

TEST(XSpaceGeneratorTest, ExactSizesAtTheThreeByteLengthBoundary) {
  for (uint64_t seed = 1; seed <= 2; ++seed) {
    XSpaceGenOptions options;
    options.line_bytes = seed == 1 ? 2097151 : 2097152;
    options.plane_bytes = seed == 1 ? 2097152 : 2097151;
    GeneratorRandom random(seed);
    const GeneratedXSpace file = GenerateXSpace(random, options);
    ASSERT_EQ(Problems(file, options), "") << "seed " << seed;
    std::vector<size_t> planes, lines;
    MessageLengths(file.bytes, &planes, &lines);
    EXPECT_TRUE(Contains(lines, *options.line_bytes));
    EXPECT_TRUE(Contains(planes, *options.plane_bytes));
  }
}

TEST(XSpaceGeneratorTest, ALineMayLieInsideTheExactPlane) {
  bool inside = false;
  for (uint64_t seed = 1; seed <= 20 && !inside; ++seed) {
    XSpaceGenOptions options;
    options.line_bytes = 300;
    options.plane_bytes = 1000;
    GeneratorRandom random(seed);
    const GeneratedXSpace file = GenerateXSpace(random, options);
    ASSERT_EQ(Problems(file, options), "") << "seed " << seed;
    const auto planes = Walker(file.bytes).Payloads(xspace::XSpace::kPlanesFieldNumber);
    ASSERT_TRUE(planes);
    for (const auto plane : *planes) {
      if (plane.size() != 1000) continue;
      const auto lines = Walker(plane).Payloads(xspace::XPlane::kLinesFieldNumber);
      ASSERT_TRUE(lines);
      inside |= std::any_of(lines->begin(), lines->end(), [](std::string_view l) { return l.size() == 300; });
    }
  }
  EXPECT_TRUE(inside);
}

TEST(XSpaceGeneratorTest, ArbitraryFuzzBytesStillGiveValidFiles) {
  const XSpaceGenOptions options;
  std::vector<std::string> inputs = {"",
                                     std::string(1, '\0'),
                                     std::string(4096, '\xff'),
                                     std::string(4096, '\0'),
                                     std::string(4096, '\x80'),
                                     std::string(4096, '\x7f'),
                                     std::string(64, '\x01')};
  GeneratorRandom bytes(99);
  for (int i = 0; i < 500; ++i) {
    std::string input(bytes.Below(4096), '\0');
    for (char& c : input) c = static_cast<char>(bytes.Below(256));
    inputs.push_back(std::move(input));
  }
  XSpaceGenFeatures sum;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto* data = reinterpret_cast<const uint8_t*>(inputs[i].data());
    GeneratorRandom random(data, inputs[i].size());
    const GeneratedXSpace file = GenerateXSpace(random, options);
    ASSERT_EQ(Problems(file, options), "") << "input " << i << " (" << inputs[i].size() << " bytes)";
    GeneratorRandom again(data, inputs[i].size());
    EXPECT_EQ(GenerateXSpace(again, options).bytes, file.bytes) << "input " << i;
    sum += file.features;
  }
  // Random bytes reach the rare shapes too, not only the plain ones.
  EXPECT_GT(sum[GenFeature::kOutOfOrderMessages], 0);
  EXPECT_GT(sum.unknown(GenLevel::kEvent, 2), 0);
}

TEST(XSpaceGeneratorTest, ExactSizesFromFuzzBytes) {
  XSpaceGenOptions options;
  options.line_bytes = 128;
  options.plane_bytes = 16384;
  for (const std::string& input : {std::string(), std::string(2048, '\xff'), std::string(300, '\x42')}) {
    GeneratorRandom random(reinterpret_cast<const uint8_t*>(input.data()), input.size());
    const GeneratedXSpace file = GenerateXSpace(random, options);
    ASSERT_EQ(Problems(file, options), "");
    std::vector<size_t> planes, lines;
    MessageLengths(file.bytes, &planes, &lines);
    EXPECT_TRUE(Contains(lines, 128));
    EXPECT_TRUE(Contains(planes, 16384));
  }
}

TEST(XSpaceGeneratorTest, MergesOnlyWhenAskedAndStillValid) {
  XSpaceGenOptions options;
  options.allow_merges = true;
  int64_t merged = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    GeneratorRandom random(seed);
    const GeneratedXSpace file = GenerateXSpace(random, options);
    ASSERT_EQ(Problems(file, options), "") << "seed " << seed;
    merged += file.features[GenFeature::kMergedFields];
  }
  EXPECT_GT(merged, 0);
}

TEST(XSpaceGeneratorTest, NoGroupsWhenTurnedOff) {
  XSpaceGenOptions options;
  options.unknown_groups = false;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    GeneratorRandom random(seed);
    const GeneratedXSpace file = GenerateXSpace(random, options);
    ASSERT_EQ(Problems(file, options), "") << "seed " << seed;
    ASSERT_EQ(file.features[GenFeature::kUnknownGroups], 0) << "seed " << seed;
  }
}

TEST(XSpaceGeneratorTest, OtherSessionsAndSpans) {
  for (const auto& [start, span] : {std::pair<int64_t, int64_t>{200'000'000'000'000'000, 1},
                                    std::pair<int64_t, int64_t>{4'000'000'000'000'000'000, 10'000'000'000'000},
                                    std::pair<int64_t, int64_t>{1'700'000'000'000'000'000, 1'000}}) {
    XSpaceGenOptions options;
    options.session_start_ns = start;
    options.span_ns = span;
    options.max_bytes = 4096;
    for (uint64_t seed = 1; seed <= 200; ++seed) {
      GeneratorRandom random(seed);
      ASSERT_EQ(Problems(GenerateXSpace(random, options), options), "") << "start " << start << " seed " << seed;
    }
  }
}

TEST(XSpaceGeneratorTest, SameSeedSameBytes) {
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    GeneratorRandom a(seed), b(seed);
    EXPECT_EQ(GenerateXSpace(a, XSpaceGenOptions{}).bytes, GenerateXSpace(b, XSpaceGenOptions{}).bytes);
  }
  GeneratorRandom one(1), two(2);
  EXPECT_NE(GenerateXSpace(one, XSpaceGenOptions{}).bytes, GenerateXSpace(two, XSpaceGenOptions{}).bytes);
}

TEST(XSpaceGeneratorTest, RefusesOptionsOutOfBounds) {
  const auto refuses = [](XSpaceGenOptions options) {
    GeneratorRandom random(1);
    EXPECT_THROW(GenerateXSpace(random, options), std::invalid_argument);
  };
  XSpaceGenOptions options;
  options.session_start_ns = 1'000;
  refuses(options);
  options = {};
  options.span_ns = 0;
  refuses(options);
  options = {};
  options.line_bytes = 47;
  refuses(options);
  options = {};
  options.plane_bytes = 95;
  refuses(options);
}

}  // namespace
}  // namespace chronolink::trace::testing
