// The reader on real files: the provisioned models, and file-system failures.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "gguf/file.h"
#include "support/real_models.h"

namespace {


void expect_error(const std::string& path, const std::string& needle) {
  try {
    gguf::File::open(path);
    FAIL() << "no error for " << path;
  } catch (const loom::Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(GgufReader, ReadsSmolLM2) {
  const auto path = loom::testing::real_model("SmolLM2-135M-Instruct.Q4_1.gguf");
  LOOM_REQUIRE_MODEL(path);
  gguf::File f = gguf::File::open(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.architecture(), "llama");
  EXPECT_EQ(f.get_int("llama.block_count", 0), 30);
  EXPECT_EQ(f.get_int("llama.embedding_length", 0), 576);
  EXPECT_EQ(f.at("tokenizer.ggml.tokens").as_array().items.size(), 49152u);
  EXPECT_EQ(f.tensors().size(), 272u);
  const auto& emb = f.tensor("token_embd.weight");
  EXPECT_EQ(emb.dims, (std::vector<uint64_t>{576, 49152}));
  EXPECT_EQ(emb.type, gguf::TensorType::Q8_0);
  EXPECT_EQ(emb.nbytes, 576u / 32 * 34 * 49152);
  uint64_t params = 0;
  for (const auto& t : f.tensors()) params += t.elements();
  EXPECT_EQ(params, 134515008u);
}

TEST(GgufReader, ReadsGemma3) {
  const auto path = loom::testing::real_model("gemma-3-270m-it-Q4_K_M.gguf");
  LOOM_REQUIRE_MODEL(path);
  gguf::File f = gguf::File::open(path);
  EXPECT_EQ(f.architecture(), "gemma3");
  EXPECT_EQ(f.tensors().size(), 236u);
  EXPECT_EQ(f.at("tokenizer.ggml.tokens").as_array().items.size(), 262144u);
  EXPECT_NE(f.find_tensor("blk.0.attn_q_norm.weight"), nullptr);
}

TEST(GgufReader, FileSystemFailuresAreErrors) {
  auto dir = std::filesystem::temp_directory_path();
  expect_error((dir / "loom-no-such-file.gguf").string(), "cannot open");
  expect_error(dir.string(), "not a regular file");
  auto empty = (dir / "loom-empty.gguf").string();
  std::ofstream(empty).close();
  expect_error(empty, "empty");
  std::filesystem::remove(empty);
}

}  // namespace
