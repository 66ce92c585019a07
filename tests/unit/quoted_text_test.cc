// QuotedText: whatever an outside string holds, the message it goes into
// stays one printable line.
#include "common/quoted_text.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace chronolink {
namespace {

TEST(QuotedText, PlainTextIsQuotedAsItIs) {
  EXPECT_EQ(QuotedText("members/3"), "'members/3'");
  EXPECT_EQ(QuotedText(""), "''");
  EXPECT_EQ(QuotedText("Grüße, 時間"), "'Grüße, 時間'");
}

TEST(QuotedText, ALineBreakCannotForgeALogLine) {
  EXPECT_EQ(QuotedText("k\n[2026-11-29 07:00:00.000] [info] leader is 9"),
            "'k\\n[2026-11-29 07:00:00.000] [info] leader is 9'");
  EXPECT_EQ(QuotedText("a\rb\tc"), "'a\\rb\\tc'");
}

TEST(QuotedText, TerminalControlsAreEscaped) {
  EXPECT_EQ(QuotedText("\x1b[2J\x07"), "'\\x1b[2J\\x07'");
  EXPECT_EQ(QuotedText("\x7f"), "'\\x7f'");
  EXPECT_EQ(QuotedText("\xc2\x9b" "31m"), "'\\u009b31m'") << "C1 CSI";
  EXPECT_EQ(QuotedText("it's \\"), "'it\\'s \\\\'");
}

TEST(QuotedText, BytesThatAreNotUtf8AreEscaped) {
  EXPECT_EQ(QuotedText("\xff\xfe"), "'\\xff\\xfe'");
  EXPECT_EQ(QuotedText("\xc0\xaf"), "'\\xc0\\xaf'") << "overlong '/'";
  EXPECT_EQ(QuotedText("\xed\xa0\x80"), "'\\xed\\xa0\\x80'") << "a surrogate";
  EXPECT_EQ(QuotedText("\xe2\x82"), "'\\xe2\\x82'") << "cut short";
}

TEST(QuotedText, LongTextIsCutAtACharacterBoundary) {
  const std::string long_text = std::string(119, 'a') + "é" + std::string(50, 'b');
  const std::string q = QuotedText(long_text);
  EXPECT_EQ(q, "'" + std::string(119, 'a') + "...'") << "é would end past 120 bytes";
  EXPECT_EQ(QuotedText(std::string(120, 'x')), "'" + std::string(120, 'x') + "'");
}

TEST(ShownName, PlainNamesAsTheyAreOthersQuoted) {
  EXPECT_EQ(ShownName("gpu-17.cluster.local"), "gpu-17.cluster.local");
  EXPECT_EQ(ShownName("a b"), "'a b'");
  EXPECT_EQ(ShownName("a\nb"), "'a\\nb'");
  EXPECT_EQ(ShownName(""), "''");
  EXPECT_EQ(ShownName("h\x1b[2J"), "'h\\x1b[2J'");
  EXPECT_EQ(ShownName("it's"), "'it\\'s'");
}

// Random bytes: the result is always printable ASCII or whole UTF-8
// characters of U+00A0 and up, between two quotes, with no raw control.
TEST(QuotedText, AnyBytesGiveOnePrintableLine) {
  std::mt19937 rng(29);
  for (int n = 0; n < 20'000; ++n) {
    std::string s(rng() % 200, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    const std::string q = QuotedText(s);
    ASSERT_GE(q.size(), 2u);
    EXPECT_EQ(q.front(), '\'');
    EXPECT_EQ(q.back(), '\'');
    for (size_t i = 0; i < q.size(); ++i) {
      const auto c = static_cast<unsigned char>(q[i]);
      ASSERT_FALSE(c < 0x20 || c == 0x7f) << "raw control byte in " << q;
      if (c == 0xc2) {
        ASSERT_LT(i + 1, q.size());
        ASSERT_GE(static_cast<unsigned char>(q[i + 1]), 0xa0) << "raw C1 control in " << q;
      }
    }
  }
}

}  // namespace
}  // namespace chronolink
