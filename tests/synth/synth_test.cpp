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

// A one-layer F32 file (the values as drawn, nothing rounded away).
SynthOptions one_layer_f32(uint64_t seed, uint32_t vocab, double gain = 0) {
  SynthOptions opt;
  opt.seed = seed;
  opt.type = gguf::TensorType::F32;
  opt.n_layer = 1;
  opt.n_vocab = vocab;
  opt.gain = gain;
  return opt;
}

// Tensor `name` holds its stream of `seed` (its first `limit` values) at std_dev around centre.
void expect_stream(const gguf::File& f, uint64_t seed, const char* name, double std_dev, double centre = 0,
                   uint64_t limit = UINT64_MAX) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  ASSERT_NE(t, nullptr) << name;
  const float* x = reinterpret_cast<const float*>(t->data);
  Normal rng(stream_seed(seed, name));
  const uint64_t n = std::min<uint64_t>(t->elements(), limit);
  for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(x[i], float(centre + std_dev * rng.next())) << name << " element " << i;
}

TEST(SynthModel, RowsWrittenInParallelAreTheSequentialStream) {
  const auto path = std::filesystem::temp_directory_path() / "loom_synth_test.gguf";
  // token_embd: 4096 rows of the shape's width, several MiB: split over threads
  write_model(find_shape("smollm2-135m-untied"), one_layer_f32(11, 4096), path.string());
  expect_stream(gguf::File::open(path.string()), 11, "token_embd.weight", 0.02);
  std::filesystem::remove(path);
}

// --gain: a layer's matrices are the same stream at std gain / sqrt(row length), capped at
// 0.02; the embeddings, the output head and the norms are as without it.
TEST(SynthModel, GainScalesTheLayersMatricesByTheirFanIn) {
  const auto path = std::filesystem::temp_directory_path() / "loom_synth_gain_test.gguf";
  const ModelShape shape = find_shape("llama3.2-1b-untied");
  write_model(shape, one_layer_f32(5, 2048, 0.5), path.string());
  {
    const gguf::File f = gguf::File::open(path.string());
    const uint64_t n = 1 << 16;
    expect_stream(f, 5, "blk.0.attn_q.weight", 0.5 / std::sqrt(2048.0), 0, n);   // 0.0110
    expect_stream(f, 5, "blk.0.ffn_down.weight", 0.5 / std::sqrt(8192.0), 0, n);  // 0.0055
    expect_stream(f, 5, "token_embd.weight", 0.02, 0, n);
    expect_stream(f, 5, "output.weight", 0.02, 0, n);
    expect_stream(f, 5, "blk.0.attn_norm.weight", 0.02, 1);
  }
  // A gain whose std would pass 0.02 is capped there.
  write_model(shape, one_layer_f32(5, 2048, 4), path.string());
  expect_stream(gguf::File::open(path.string()), 5, "blk.0.attn_q.weight", 0.02, 0, 1000);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace loom::synth
