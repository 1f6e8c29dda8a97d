// `loom synth`'s random streams: a stream entered at value i (Normal::at) gives the values the
// sequential stream gives from i on — what lets write_model fill a tensor's rows on several
// threads and still write the bytes of one sequential pass; and a written file read back has
// those values in every row (rows split over the threads at their ends).
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace loom::synth
