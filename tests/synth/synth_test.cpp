// `loom synth`'s random streams: a stream entered at value i (Normal::at) gives the values the
// sequential stream gives from i on — what lets write_model fill a tensor's rows on several
// threads and still write the bytes of one sequential pass; and a written file read back has
// those values in every row (rows split over the threads at their ends).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <vector>

#include "gguf/file.h"
#include "synth/model.h"
#include "synth/rng.h"

namespace loom::synth {
namespace {

TEST(SynthRng, NormalEnteredAtAnEvenIndexContinuesTheStream) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  Normal whole(seed);
  std::vector<double> v(5000);
  for (auto& x : v) x = whole.next();
  for (uint64_t i : {0, 2, 100, 4096, 4998}) {
    Normal part = Normal::at(seed, i);
    for (uint64_t k = i; k < v.size(); ++k) ASSERT_EQ(part.next(), v[k]) << "from " << i << ", value " << k;
  }
}

TEST(SynthModel, RowsWrittenInParallelAreTheSequentialStream) {
  const auto path = std::filesystem::temp_directory_path() / "loom_synth_test.gguf";
  SynthOptions opt;
  opt.seed = 11;
  opt.type = gguf::TensorType::F32;
  opt.n_layer = 1;
  opt.n_vocab = 4096;  // token_embd: 4096 rows of the shape's width, several MiB: split over threads
  const ModelShape shape = find_shape("smollm2-135m-untied");
  write_model(shape, opt, path.string());
  const gguf::File f = gguf::File::open(path.string());
  const gguf::TensorInfo* t = f.find_tensor("token_embd.weight");
  ASSERT_NE(t, nullptr);
  const float* x = reinterpret_cast<const float*>(t->data);
  Normal rng(stream_seed(opt.seed, "token_embd.weight"));
  for (uint64_t i = 0; i < t->elements(); ++i) ASSERT_EQ(x[i], float(0.02 * rng.next())) << "element " << i;
  std::filesystem::remove(path);
}

// --gain: a layer's matrices are the same stream at std gain / sqrt(row length), capped at
// 0.02; the embeddings, the output head and the norms are as without it.
TEST(SynthModel, GainScalesTheLayersMatricesByTheirFanIn) {
  const auto path = std::filesystem::temp_directory_path() / "loom_synth_gain_test.gguf";
  SynthOptions opt;
  opt.seed = 5;
  opt.type = gguf::TensorType::F32;
  opt.n_layer = 1;
  opt.gain = 0.5;
  const ModelShape shape = find_shape("llama3.2-1b-untied");
  opt.n_vocab = 2048;
  write_model(shape, opt, path.string());
  const gguf::File f = gguf::File::open(path.string());
  const auto expect_stream = [&](const char* name, double std_dev, double centre) {
    const gguf::TensorInfo* t = f.find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    const float* x = reinterpret_cast<const float*>(t->data);
    Normal rng(stream_seed(opt.seed, name));
    const uint64_t n = std::min<uint64_t>(t->elements(), 1 << 16);
    for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(x[i], float(centre + std_dev * rng.next())) << name << " element " << i;
  };
  expect_stream("blk.0.attn_q.weight", 0.5 / std::sqrt(2048.0), 0);   // 0.0110
  expect_stream("blk.0.ffn_down.weight", 0.5 / std::sqrt(8192.0), 0);  // 0.0055
  expect_stream("token_embd.weight", 0.02, 0);
  expect_stream("output.weight", 0.02, 0);
  expect_stream("blk.0.attn_norm.weight", 0.02, 1);
  std::filesystem::remove(path);
  // A gain whose std would pass 0.02 is capped there.
  opt.gain = 4;
  write_model(shape, opt, path.string());
  const gguf::File g = gguf::File::open(path.string());
  const float* q = reinterpret_cast<const float*>(g.find_tensor("blk.0.attn_q.weight")->data);
  Normal rng(stream_seed(opt.seed, "blk.0.attn_q.weight"));
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(q[i], float(0.02 * rng.next()));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace loom::synth
