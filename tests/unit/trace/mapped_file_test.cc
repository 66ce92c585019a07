// MappedFile (trace/importers/xspace/mapped_file.h): a file's bytes as they
// are; a file that shrinks under the mapping reads as zeros past its new
// end and says so (torn) instead of killing the process with SIGBUS; a
// SIGBUS that is not about the mapping still kills; bad files are refused.
#include "trace/importers/xspace/mapped_file.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace chronolink::trace {
namespace {

namespace fs = std::filesystem;

class MappedFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = fs::temp_directory_path() / ("mapped_file_test_" + std::to_string(getpid()));
    std::ofstream(path_, std::ios::binary) << std::string(3 * 4096 + 17, 'x');
  }
  void TearDown() override { fs::remove(path_); }
  fs::path path_;
};

TEST_F(MappedFileTest, GivesTheBytesAsTheyAre) {
  MappedFile f;
  std::string why;
  ASSERT_TRUE(f.Open(path_, 1 << 20, &why)) << why;
  EXPECT_EQ(f.bytes(), std::string(3 * 4096 + 17, 'x'));
  EXPECT_FALSE(f.torn());
  MappedFile second;
  EXPECT_FALSE(second.Open(path_, 1 << 20, &why));  // one at a time
  EXPECT_NE(why.find("another"), std::string::npos) << why;
  f.Close();
  EXPECT_TRUE(second.Open(path_, 1 << 20, &why)) << why;
}

TEST_F(MappedFileTest, AFileThatShrinksReadsAsZerosAndIsTorn) {
  MappedFile f;
  std::string why;
  ASSERT_TRUE(f.Open(path_, 1 << 20, &why)) << why;
  fs::resize_file(path_, 100);  // as another process truncating it would
  const std::string_view bytes = f.bytes();
  EXPECT_EQ(bytes[0], 'x');
  EXPECT_EQ(bytes[2 * 4096 + 5], '\0');  // past the new end: SIGBUS without the handler
  EXPECT_TRUE(f.torn());
  f.Close();
  EXPECT_FALSE(f.torn());
}

TEST_F(MappedFileTest, ASigbusElsewhereStillKills) {
  MappedFile f;
  std::string why;
  ASSERT_TRUE(f.Open(path_, 1 << 20, &why)) << why;
  EXPECT_EXIT(::raise(SIGBUS), ::testing::KilledBySignal(SIGBUS), "");
}

TEST_F(MappedFileTest, RefusesWhatItCannotMap) {
  MappedFile f;
  std::string why;
  EXPECT_FALSE(f.Open(path_.string() + ".missing", 1 << 20, &why));
  EXPECT_FALSE(f.Open(path_, 100, &why));  // over the limit
  EXPECT_FALSE(f.Open(fs::temp_directory_path(), 1 << 20, &why));  // a directory
  std::ofstream(path_, std::ios::trunc);
  EXPECT_FALSE(f.Open(path_, 1 << 20, &why));  // empty
  EXPECT_FALSE(why.empty());
}

}  // namespace
}  // namespace chronolink::trace
