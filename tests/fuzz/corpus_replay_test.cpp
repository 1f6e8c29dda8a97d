// Replays the fuzzer's minimized corpus through the reader: each input parses or throws
// loom::Error; anything else (another exception, a crash) fails the test.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "common/error.h"
#include "gguf/file.h"

TEST(GgufFuzzCorpus, EveryInputParsesOrFailsCleanly) {
  std::filesystem::path dir = std::filesystem::path(LOOM_SOURCE_DIR) / "tests/data/fuzz/gguf";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  size_t n = 0, ok = 0, errors = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ++n;
    try {
      gguf::File f = gguf::File::from_bytes(bytes, e.path().filename().string());
      for (const auto& [k, v] : f.metadata()) (void)v.to_display();
      for (const auto& t : f.tensors())
        ASSERT_LE(t.data + t.nbytes, f.bytes().data() + f.size()) << e.path();
      ++ok;
    } catch (const loom::Error&) {
      ++errors;
    } catch (const std::exception& x) {
      ADD_FAILURE() << e.path() << ": not a loom::Error: " << x.what();
    }
  }
  EXPECT_GT(n, 20u);
  EXPECT_GT(ok, 0u);
  EXPECT_GT(errors, 0u);
  std::printf("corpus: %zu inputs, %zu valid, %zu rejected\n", n, ok, errors);
}
