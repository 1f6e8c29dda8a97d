// bench::work_per_token against the tensor table of a synthetic file, counted independently:
// decode reads every projection weight whole, the embedding table one row, and a tied output
// (tiny-llama reads token_embd again as the output projection) whole; a prompt token costs the
// projections of every layer but the last one's attention output and FFN (after the last
// attention only the final row goes on) and not the output projection.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "bench/ceiling.h"
#include "port/port.h"
#include "synth/model.h"

namespace fs = std::filesystem;

TEST(Ceiling, WorkPerTokenCountsEveryMatmulWeightOnceAndOneEmbeddingRow) {
  for (const char* shape : {"tiny-llama", "tiny-llama-untied"}) {
    const fs::path p = fs::temp_directory_path() / (std::string("loom_ceiling_") + shape + ".gguf");
    loom::synth::SynthOptions opt;
    opt.type = gguf::TensorType::F32;
    loom::synth::write_model(loom::synth::find_shape(shape), opt, p.string());
    const gguf::File f = gguf::File::open(p.string());
    const bench::Work w = bench::work_per_token(port::port(f), f);
    double bytes = 0, ops = 0;
    const bool tied = f.find_tensor("output.weight") == nullptr;
    const std::string last = "blk." + std::to_string(f.get_int("llama.block_count", 0) - 1) + ".";
    for (const auto& t : f.tensors()) {
      if (t.dims.size() < 2) continue;  // norms are not matmul operands
      const bool embd = t.name == "token_embd.weight";
      if (!embd || tied) bytes += double(t.nbytes);
      if (embd) bytes += double(t.nbytes) / double(t.rows());
      const bool once = embd || t.name == "output.weight" || t.name.rfind(last + "ffn_", 0) == 0 ||
                        t.name == last + "attn_output.weight";
      if (!once) ops += 2.0 * double(t.elements());
    }
    EXPECT_DOUBLE_EQ(w.decode_bytes, bytes) << shape;
    EXPECT_DOUBLE_EQ(w.ops, ops) << shape;
    fs::remove(p);
  }
}

TEST(Ceiling, Int8PeakIsMeasuredWhereTheBuildHasSimd) {
#if defined(__AVX2__)
  const double one = bench::measure_int8_peak_gops(1, 1);
  EXPECT_GT(one, 1.0);  // any AVX2 core does well over 1 GOPS of int8 multiply-adds
#else
  EXPECT_EQ(bench::measure_int8_peak_gops(1, 1), 0.0);
#endif
}

// The KV rows a generated token reads: every attention layer's key and value rows of each
// position it sees, in the cache's element size (q8_0: 34 bytes per 32 elements).
TEST(Ceiling, DecodeBytesCountTheKvRowsReadAtDepth) {
  const fs::path p = fs::temp_directory_path() / "loom_ceiling_kv.gguf";
  loom::synth::SynthOptions opt;
  opt.type = gguf::TensorType::F32;
  loom::synth::write_model(loom::synth::find_shape("tiny-llama"), opt, p.string());
  const gguf::File f = gguf::File::open(p.string());
  const auto m = port::port(f);
  const int64_t layers = f.get_int("llama.block_count", 0);
  const int64_t n_head = f.get_int("llama.attention.head_count", 0);
  const int64_t n_kv = f.get_int("llama.attention.head_count_kv", n_head);
  const int64_t hd = f.get_int("llama.embedding_length", 0) / n_head;
  for (auto [elem, bytes_per_elem] : {std::pair{loom::backend::KvElem::f16, 2.0}, {loom::backend::KvElem::f32, 4.0},
                                      {loom::backend::KvElem::q8_0, 34.0 / 32.0}}) {
    if (elem == loom::backend::KvElem::q8_0 && (n_kv * hd) % 32) continue;
    const bench::Work w = bench::work_per_token(m, f, elem);
    ASSERT_EQ(int64_t(w.kv.size()), layers);
    const double per_pos = double(layers) * 2.0 * double(n_kv * hd) * bytes_per_elem;
    EXPECT_DOUBLE_EQ(w.kv_bytes_at(0), per_pos);
    EXPECT_DOUBLE_EQ(w.kv_bytes_at(4095), 4096 * per_pos);
    // tg n at depth d: tokens at positions d .. d+n-1 see d+1 .. d+n positions.
    EXPECT_DOUBLE_EQ(w.decode_bytes_at(1024, 64), w.decode_bytes + per_pos * (1024 + 32.5));
  }
  fs::remove(p);
}

