// Replays the .loom fuzzer's minimized corpus: every input parses or throws loom::Error, and
// every input that parses prints, re-parses to an equal module and re-prints identically —
// the same properties fuzz/loom_parser_fuzz.cpp asserts, here in the ordinary gcc build.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "ir/text.h"
#include "ir/verify.h"

TEST(LoomFuzzCorpus, EveryInputParsesOrFailsCleanlyAndRoundTrips) {
  const std::filesystem::path dir = std::filesystem::path(LOOM_SOURCE_DIR) / "tests/data/fuzz/loom";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  size_t n = 0, parsed = 0, verified = 0, rejected = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    ++n;
    ir::Module m;
    try {
      m = ir::parse(text, e.path().filename().string());
    } catch (const loom::Error&) {
      ++rejected;
      continue;
    } catch (const std::exception& x) {
      ADD_FAILURE() << e.path() << ": parse threw something other than loom::Error: " << x.what();
      continue;
    }
    ++parsed;
    try {
      ir::verify(m);
      (void)ir::schedule_warnings(m);
      ++verified;
    } catch (const loom::Error&) {
    } catch (const std::exception& x) {
      ADD_FAILURE() << e.path() << ": verify threw something other than loom::Error: " << x.what();
    }
    const std::string once = ir::print(m);
    ir::Module back;
    try {
      back = ir::parse(once, "printed.loom");
    } catch (const std::exception& x) {
      ADD_FAILURE() << e.path() << ": printed form does not parse: " << x.what() << "\n" << once;
      continue;
    }
    EXPECT_TRUE(back == m) << e.path() << "\n" << once;
    EXPECT_EQ(ir::print(back), once) << e.path();
  }
  EXPECT_GT(n, 50u);
  EXPECT_GT(parsed, 0u);
  EXPECT_GT(verified, 0u);
  EXPECT_GT(rejected, 0u);
  std::printf("corpus: %zu inputs, %zu parsed (%zu verified), %zu rejected\n", n, parsed, verified, rejected);
}
