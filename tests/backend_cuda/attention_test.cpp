// Attention over the paged f16 KV cache against a double-precision reference, on fresh random
// inputs (seed printed on failure), outputs and scratch poisoned with NaN before every launch.
// Covers both kernels: decode by KV group (steps of <= 8 rows: one chunk, or several merged by
// the combine kernel) and the prefill kernel (more rows); GQA ratios 1, 3, 4, 8 and 12 (a
// group split over two blocks), head_dim 64/128/256 (and 32/96, which only the prefill kernel
// has), sliding windows and softcap, rows of different sequences at depths up to 4,099 (not a
// multiple of any chunk), block tables shuffled over a shared pool and as wide as the plan makes
// them (a power of two). Needs a GPU.
//
// Tolerance: |out - ref| <= 2e-5 (1 + |ref|), the bound this test has held the kernels to since
// version 1 (fp32 scores, softmax and accumulation against double; the errors of sums of a few
// thousand rounded terms of random sign stay well under it). The tensor-core kernel rounds the
// queries and the probabilities to f16 (f16_bound below adds what those roundings can cost).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/kernels.h"
#include "quant/quant.h"
#include "random_inputs.h"

namespace loom::backend::cuda {
namespace {

void sync() { LOOM_CUDA_CHECK(cudaDeviceSynchronize()); }

// A pool of f16 keys and values (k_width == v_width) holding sequences of the given lengths,
// their blocks scattered over the pool in shuffled order; table entries past a sequence's
// length are -1 (a read of one would fall outside the pool: compute-sanitizer reports it).
struct Pool {
  int32_t bs = 0, max_blocks = 0;
  int64_t width = 0;
  std::vector<float> k, v;
  std::vector<int32_t> tables;
  DeviceBuffer dk, dv, dt;

  int64_t row(int32_t seq, int32_t p) const { return int64_t(tables[size_t(seq * max_blocks + p / bs)]) * bs + p % bs; }
  KvView view() { return {dk.get<__half>(), dv.get<__half>(), width, width, bs}; }
};

Pool make_pool(std::mt19937_64& rng, const std::vector<int32_t>& lens, int32_t bs, int64_t width) {
  Pool pool;
  pool.bs = bs, pool.width = width;
  int32_t need = 0, total = 0;
  for (int32_t len : lens) need = std::max(need, (len + bs - 1) / bs), total += (len + bs - 1) / bs;
  pool.max_blocks = 4;
  while (pool.max_blocks < need) pool.max_blocks *= 2;  // as the plan rounds the table width
  const int32_t n_blocks = total + 3;                   // a few blocks no sequence owns
  std::vector<int32_t> perm(static_cast<size_t>(n_blocks));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  pool.tables.assign(lens.size() * size_t(pool.max_blocks), -1);
  size_t next = 0;
  for (size_t s = 0; s < lens.size(); ++s)
    for (int32_t b = 0; b < (lens[s] + bs - 1) / bs; ++b) pool.tables[s * size_t(pool.max_blocks) + size_t(b)] = perm[next++];
  const size_t n = size_t(n_blocks) * size_t(bs) * size_t(width);
  pool.k = random_floats(rng, n);
  pool.v = random_floats(rng, n);
  std::vector<uint16_t> kh(n), vh(n);
  for (size_t i = 0; i < n; ++i) {
    kh[i] = quant::fp32_to_fp16(pool.k[i]), vh[i] = quant::fp32_to_fp16(pool.v[i]);
    pool.k[i] = quant::fp16_to_fp32(kh[i]), pool.v[i] = quant::fp16_to_fp32(vh[i]);
  }
  pool.dk = DeviceBuffer::of(kh), pool.dv = DeviceBuffer::of(vh), pool.dt = DeviceBuffer::of(pool.tables);
  return pool;
}

// softmax(scale * softcap(q . k)) . v over positions (pos - window, pos] of sequence seq, in
// double, for query head h of row r.
std::vector<double> reference(const AttentionShape& a, const Pool& pool, const std::vector<float>& q, int64_t r, int h,
                              int32_t seq, int32_t pos) {
  const int hd = a.head_dim, g = h / (a.n_head / a.n_kv);
  const int32_t lo = a.window > 0 ? std::max(0, pos - a.window + 1) : 0;
  const float* qh = q.data() + (r * a.n_head + h) * hd;
  std::vector<double> s;
  std::vector<int64_t> rows;
  for (int32_t j = lo; j <= pos; ++j) {
    rows.push_back(pool.row(seq, j));
    const float* kr = pool.k.data() + rows.back() * pool.width + g * hd;
    double d = 0;
    for (int i = 0; i < hd; ++i) d += double(qh[i]) * kr[i];
    if (a.softcap > 0) d = std::tanh(d / a.softcap) * a.softcap;
    s.push_back(d * a.scale);
  }
  const double mx = *std::max_element(s.begin(), s.end());
  double sum = 0;
  for (auto& x : s) sum += (x = std::exp(x - mx));
  std::vector<double> o(size_t(hd), 0.0);
  for (size_t j = 0; j < rows.size(); ++j) {
    const float* vr = pool.v.data() + rows[j] * pool.width + g * hd;
    for (int i = 0; i < hd; ++i) o[size_t(i)] += s[j] / sum * vr[i];
  }
  return o;
}

// What the tensor-core kernel's f16 roundings can add to an output element of query head h of
// row r, beyond the f32 bound: q rounded to f16 (relative 2^-11 an element) moves a score by at
// most eps = 2^-11 * scale * max_j sum_i |q_i k_ji| (softcap's tanh does not enlarge it), which
// moves each softmax weight by a factor within e^(+-2 eps), so the output by at most
// (e^(2 eps) - 1) max|v|; each probability rounded to f16 (relative 2^-11 when normal, absolute
// 2^-25 when subnormal, against a sum of at least 1) adds (2^-11 + n 2^-25) max|v|.
double f16_bound(const AttentionShape& a, const Pool& pool, const std::vector<float>& q, int64_t r, int h, int32_t seq,
                 int32_t pos) {
  const int hd = a.head_dim, g = h / (a.n_head / a.n_kv);
  const int32_t lo = a.window > 0 ? std::max(0, pos - a.window + 1) : 0;
  const float* qh = q.data() + (r * a.n_head + h) * hd;
  double qk = 0, vmax = 0;
  for (int32_t j = lo; j <= pos; ++j) {
    const int64_t row = pool.row(seq, j);
    const float *kr = pool.k.data() + row * pool.width + g * hd, *vr = pool.v.data() + row * pool.width + g * hd;
    double d = 0;
    for (int i = 0; i < hd; ++i) d += std::abs(double(qh[i]) * kr[i]), vmax = std::max(vmax, double(std::abs(vr[i])));
    qk = std::max(qk, d);
  }
  const double eps = std::ldexp(1.0, -11) * a.scale * qk;
  return (std::expm1(2 * eps) + std::ldexp(1.0, -11) + (pos - lo + 1) * std::ldexp(1.0, -25)) * vmax;
}

enum class Kernel { attention, mma, tiled };

// Runs attention on the step (rows seq[r] at pos[r]); with_scratch: the scratch the plan would
// size (attention_scratch_floats), else none; Kernel::mma: attention_mma itself, whatever the
// step; Kernel::tiled: attention() with the host's tiles in the tables (attention_tiles) and as
// many slots as rows, as a captured step of the plan launches. The tables count the step's
// sequences as the plan does. Output poisoned first.
std::vector<float> run(const AttentionShape& a, Pool& pool, const std::vector<float>& q, const std::vector<int32_t>& seq,
                       const std::vector<int32_t>& pos, bool with_scratch, size_t* scratch_floats = nullptr,
                       Kernel kernel = Kernel::attention) {
  const int64_t rows = int64_t(seq.size());
  auto dq = DeviceBuffer::of(q), ds = DeviceBuffer::of(seq), dp = DeviceBuffer::of(pos);
  std::vector<int32_t> distinct = seq;
  std::sort(distinct.begin(), distinct.end());
  const auto n_seqs = int32_t(std::unique(distinct.begin(), distinct.end()) - distinct.begin());
  std::vector<int32_t> tiles(seq.size(), 0);
  attention_tiles(seq.data(), rows, tiles.data());
  auto dtiles = DeviceBuffer::of(tiles);
  StepTables st{ds.get<int32_t>(), dp.get<int32_t>(), pool.dt.get<int32_t>(), pool.max_blocks, n_seqs};
  if (kernel == Kernel::tiled) st.tiles = dtiles.get<int32_t>(), st.tile_slots = int32_t(rows);
  const size_t floats = with_scratch ? attention_scratch_floats(a, pool.view(), st, rows) : 0;
  if (scratch_floats) *scratch_floats = floats;
  DeviceBuffer scratch(std::max<size_t>(floats, 1) * sizeof(float)), out(size_t(rows * a.n_head * a.value_dim) * sizeof(float));
  // a.merge_in_kernel: the merge counters, zero before the launch as the contract asks.
  const size_t words = attention_counter_words(a, rows);
  auto counters = DeviceBuffer::of(std::vector<uint32_t>(std::max<size_t>(words, 1), 0));
  scratch.poison();
  out.poison();
  if (kernel == Kernel::mma) attention_mma(a, pool.view(), st, dq.get<float>(), out.get<float>(), rows, nullptr);
  else
    attention(a, pool.view(), st, dq.get<float>(), out.get<float>(), rows, nullptr,
              floats ? scratch.get<float>() : nullptr, floats, nullptr, nullptr, words ? counters.get<unsigned>() : nullptr);
  sync();
  for (const uint32_t c : counters.to_host<uint32_t>()) EXPECT_EQ(c, 0u) << "a merge counter left nonzero";
  return out.to_host<float>();
}

// f16: the tensor-core kernel's bound (f16_bound) on top of the f32 one.
void expect_reference(const AttentionShape& a, const Pool& pool, const std::vector<float>& q,
                      const std::vector<int32_t>& seq, const std::vector<int32_t>& pos, const std::vector<float>& out,
                      bool f16 = false) {
  for (size_t r = 0; r < seq.size(); ++r)
    for (int h = 0; h < a.n_head; ++h) {
      const auto o = reference(a, pool, q, int64_t(r), h, seq[r], pos[r]);
      const double extra = f16 ? f16_bound(a, pool, q, int64_t(r), h, seq[r], pos[r]) : 0.0;
      for (int i = 0; i < a.head_dim; ++i) {
        const float got = out[(r * size_t(a.n_head) + size_t(h)) * size_t(a.head_dim) + size_t(i)];
        ASSERT_NEAR(got, o[size_t(i)], 2e-5 * (1 + std::abs(o[size_t(i)])) + extra)
            << "row " << r << " (sequence " << seq[r] << ", position " << pos[r] << ") head " << h << " element " << i;
      }
    }
}

AttentionShape shape(int n_head, int n_kv, int hd, int window, float softcap) {
  AttentionShape a;
  a.n_head = n_head, a.n_kv = n_kv, a.head_dim = hd, a.value_dim = hd, a.window = window, a.softcap = softcap;
  a.scale = 1.f / std::sqrt(float(hd));
  return a;
}

// Decode steps of 8, 3 and 1 rows, each row its own sequence at its own depth (the last
// position of each), every GQA ratio and head size, plain and with a window over several chunks
// and softcap; each without scratch (one chunk a row) and with the plan's scratch (chunks
// merged), the latter twice with the same bits.
TEST(Attention, DecodeByGroupAgainstDoubleReference) {
  std::mt19937_64 rng(fresh_seed());
  SCOPED_TRACE(::testing::Message() << "seed " << fresh_seed());
  const std::vector<int32_t> lens = {4100, 1, 64, 65, 1000, 2049, 300, 4034};
  for (int hd : {64, 128, 256}) {
    const int n_kv = 2;
    Pool pool = make_pool(rng, lens, hd == 64 ? 32 : 16, int64_t(n_kv) * hd);
    for (int ratio : {1, 3, 4, 8, 12}) {
      if (ratio == 12 && hd != 128) continue;
      for (int variant = 0; variant < 2; ++variant) {
        const AttentionShape a = shape(ratio * n_kv, n_kv, hd, variant ? 300 : 0, variant ? 30.f : 0.f);
        for (size_t rows : {size_t(8), size_t(3), size_t(1)}) {
          if (rows != 8 && (ratio != 4 || variant)) continue;
          SCOPED_TRACE(::testing::Message() << "hd " << hd << " ratio " << ratio << " variant " << variant << " rows " << rows);
          std::vector<int32_t> seq(rows), pos(rows);
          for (size_t r = 0; r < rows; ++r) seq[r] = int32_t(r), pos[r] = lens[r] - 1;
          const auto q = random_floats(rng, rows * size_t(a.n_head * hd));
          {
            SCOPED_TRACE("one chunk a row (no scratch)");
            expect_reference(a, pool, q, seq, pos, run(a, pool, q, seq, pos, false));
          }
          SCOPED_TRACE("chunks merged (the plan's scratch)");
          size_t floats = 0;
          const auto split = run(a, pool, q, seq, pos, true, &floats);
          ASSERT_GT(floats, 0u) << "the plan's scratch must split these rows into chunks";
          expect_reference(a, pool, q, seq, pos, split);
          const auto again = run(a, pool, q, seq, pos, true);
          ASSERT_EQ(std::memcmp(split.data(), again.data(), split.size() * sizeof(float)), 0) << "not the same bits twice";
          SCOPED_TRACE("chunks merged by each row's last block (merge_in_kernel)");
          AttentionShape merged = a;
          merged.merge_in_kernel = true;
          const auto in_kernel = run(merged, pool, q, seq, pos, true);
          expect_reference(merged, pool, q, seq, pos, in_kernel);
          const auto in_kernel_again = run(merged, pool, q, seq, pos, true);
          ASSERT_EQ(std::memcmp(in_kernel.data(), in_kernel_again.data(), in_kernel.size() * sizeof(float)), 0)
              << "not the same bits twice (whichever block is last)";
        }
      }
    }
  }
}

// Two sequences in one step: prefill-like rows (consecutive positions of one sequence) and a
// decode row together, over more than 8 rows (the prefill kernel) and over 6 (the decode
// kernel), with a short window and softcap too; blocks of 16 positions, and of 24 (not a power
// of two: the decode kernel's division path).
TEST(Attention, PagedGqaWindowSoftcapAgainstDoubleReference) {
  std::mt19937_64 rng(fresh_seed());
  SCOPED_TRACE(::testing::Message() << "seed " << fresh_seed());
  for (int hd : {32, 64, 96, 128, 256})  // 32 and 96: the prefill kernel for the 6-row step too
    for (int variant = 0; variant < 2; ++variant) {
      Pool pool = make_pool(rng, {151, 71}, variant ? 24 : 16, 2 * hd);
      const AttentionShape a = shape(8, 2, hd, variant ? 40 : 0, variant ? 20.f : 0.f);
      for (int prefill_rows : {5, 11}) {
        SCOPED_TRACE(::testing::Message() << "hd " << hd << " variant " << variant << " rows " << prefill_rows + 1);
        std::vector<int32_t> seq, pos;
        for (int i = 0; i < prefill_rows; ++i) seq.push_back(0), pos.push_back(151 - prefill_rows + i);
        seq.push_back(1), pos.push_back(70);
        const auto q = random_floats(rng, seq.size() * size_t(a.n_head * hd));
        for (bool with_scratch : {false, true}) {
          SCOPED_TRACE(with_scratch ? "with scratch" : "without scratch");
          expect_reference(a, pool, q, seq, pos, run(a, pool, q, seq, pos, with_scratch));
        }
      }
    }
}

// The tensor-core kernel: a prompt of one sequence through attention() with the schedule's
// tensor_cores on (37 rows: two whole 16-row tiles and a partial one, not starting at position
// 0), and steps of several sequences through attention_mma itself: two prompts' rows and decode
// rows interleaved so that tiles hold 2-4 sequences, rows out of position order, a window that
// cuts inside the tiles, softcap; every head size, GQA ratios 1, 3 and 4; the same bits twice.
// Where the f16 roundings are off the table (a prompt with tensor_cores off, or a step of two
// sequences through attention()), the f32 kernel's bound holds.
TEST(Attention, TensorCoreKernelAgainstDoubleReference) {
  std::mt19937_64 rng(fresh_seed());
  SCOPED_TRACE(::testing::Message() << "seed " << fresh_seed());
  for (int hd : {32, 64, 96, 128, 256})
    for (int variant = 0; variant < 2; ++variant) {
      const int ratio = variant ? 3 : (hd == 128 ? 4 : 1);
      Pool pool = make_pool(rng, {151, 71, 20}, variant ? 24 : 16, 2 * hd);
      AttentionShape a = shape(2 * ratio, 2, hd, variant ? 40 : 0, variant ? 20.f : 0.f);
      a.tensor_cores = true;
      SCOPED_TRACE(::testing::Message() << "hd " << hd << " variant " << variant << " ratio " << ratio);
      {
        SCOPED_TRACE("a prompt of 37 rows through attention()");
        std::vector<int32_t> seq(37, 0), pos(37);
        for (int i = 0; i < 37; ++i) pos[size_t(i)] = 151 - 37 + i;
        const auto q = random_floats(rng, seq.size() * size_t(a.n_head * hd));
        const auto out = run(a, pool, q, seq, pos, true);
        expect_reference(a, pool, q, seq, pos, out, true);
        const auto again = run(a, pool, q, seq, pos, true);
        ASSERT_EQ(std::memcmp(out.data(), again.data(), out.size() * sizeof(float)), 0) << "not the same bits twice";
        AttentionShape f32 = a;
        f32.tensor_cores = false;
        expect_reference(f32, pool, q, seq, pos, run(f32, pool, q, seq, pos, true));
      }
      SCOPED_TRACE("sequences interleaved, through attention_mma");
      std::vector<int32_t> seq, pos;
      for (int i = 0; i < 30; ++i) {  // sequence 0 at 121..150, 1 at 50..70 every other row, 2 at its last
        seq.push_back(0), pos.push_back(121 + i);
        if (i % 3 == 1 && 50 + i <= 70) seq.push_back(1), pos.push_back(50 + i);
      }
      seq.insert(seq.begin() + 7, 2), pos.insert(pos.begin() + 7, 19);
      std::swap(pos[3], pos[5]);  // rows of one sequence out of position order
      const auto q = random_floats(rng, seq.size() * size_t(a.n_head * hd));
      const auto out = run(a, pool, q, seq, pos, false, nullptr, Kernel::mma);
      expect_reference(a, pool, q, seq, pos, out, true);
      expect_reference(a, pool, q, seq, pos, run(a, pool, q, seq, pos, true));  // two sequences: the f32 kernel
    }
}

// The tensor-core kernel with keys and values staged in shared memory (mma_shared_kv: cp.async,
// ldmatrix) gives the bits of the kernel that loads its fragments from the pool: the same
// fragments into the same MMAs. Query heads 8 over KV heads 2 (the staging's case: a block's 4
// warps share a KV head), every head size it takes, a window and softcap; a prompt of 37 rows
// and the interleaved step of the test above; and a shape it does not take (ratio 3) falls back.
TEST(Attention, TensorCoreKernelStagedInSharedMemorySameBits) {
  std::mt19937_64 rng(fresh_seed());
  SCOPED_TRACE(::testing::Message() << "seed " << fresh_seed());
  for (int hd : {32, 64, 96, 128})
    for (int variant = 0; variant < 3; ++variant) {
      Pool pool = make_pool(rng, {151, 71, 20}, variant ? 24 : 16, 2 * hd);
      AttentionShape a = shape(variant == 2 ? 6 : 8, 2, hd, variant ? 40 : 0, variant ? 20.f : 0.f);
      a.tensor_cores = true;
      SCOPED_TRACE(::testing::Message() << "hd " << hd << " variant " << variant << " heads " << a.n_head);
      std::vector<int32_t> seq(37, 0), pos(37);
      for (int i = 0; i < 37; ++i) pos[size_t(i)] = 151 - 37 + i;
      for (int i = 0; i < 30; ++i)  // sequence 1 at 50..70 every third row, 2 at its last
        if (i % 3 == 1 && 50 + i <= 70) seq.push_back(1), pos.push_back(50 + i);
      seq.insert(seq.begin() + 7, 2), pos.insert(pos.begin() + 7, 19);
      const auto q = random_floats(rng, seq.size() * size_t(a.n_head * hd));
      const auto plain = run(a, pool, q, seq, pos, false, nullptr, Kernel::mma);
      AttentionShape staged = a;
      staged.mma_shared_kv = true;
      const auto got = run(staged, pool, q, seq, pos, false, nullptr, Kernel::mma);
      expect_reference(staged, pool, q, seq, pos, got, true);
      ASSERT_EQ(std::memcmp(plain.data(), got.data(), got.size() * sizeof(float)), 0)
          << "staged in shared memory: not the bits of the kernel reading the pool";
    }
}

// The host's tiles (attention_tiles): runs of one sequence cut at 16 rows, whatever the order.
TEST(Attention, TilesAreRunsOfOneSequenceOfAtMostSixteenRows) {
  const std::vector<int32_t> seq = {3, 3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 3};
  std::vector<int32_t> tiles(seq.size(), -1);
  const int64_t n = attention_tiles(seq.data(), int64_t(seq.size()), tiles.data());
  const std::vector<int32_t> want = {0 << 5 | 2, 2 << 5 | 1, 3 << 5 | 16, 19 << 5 | 2, 21 << 5 | 1, 22 << 5 | 1};
  ASSERT_EQ(n, int64_t(want.size()));
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(tiles[i], want[i]) << "tile " << i << ": first row " << (tiles[i] >> 5) << ", " << (tiles[i] & 31) << " rows";
}

// A step the server makes: decode rows of sequences at depths up to 1,100 beside two prompts
// (of 37 and 21 rows, not multiples of 16), the rows of one prompt split around the decodes,
// through attention() with the host's tiles: the tensor-core kernel, a warp a tile, against the
// reference with the f16 bound; slots past the tiles launch and write nothing (the output's
// poison would show); the same bits twice; and the f32 kernel with tensor_cores off.
TEST(Attention, TensorCoreKernelOnTheHostsTilesOfAMixedStep) {
  std::mt19937_64 rng(fresh_seed());
  SCOPED_TRACE(::testing::Message() << "seed " << fresh_seed());
  const std::vector<int32_t> lens = {151, 1100, 21, 300, 2, 77};
  for (int hd : {64, 128})
    for (int variant = 0; variant < 2; ++variant) {
      Pool pool = make_pool(rng, lens, 16, 2 * hd);
      AttentionShape a = shape(8, 2, hd, variant ? 40 : 0, variant ? 20.f : 0.f);
      a.tensor_cores = true;
      SCOPED_TRACE(::testing::Message() << "hd " << hd << " variant " << variant);
      std::vector<int32_t> seq, pos;
      for (int i = 0; i < 20; ++i) seq.push_back(0), pos.push_back(151 - 37 + i);  // prompt 0, first part
      for (int32_t s : {1, 3, 4, 5}) seq.push_back(s), pos.push_back(lens[size_t(s)] - 1);  // decodes
      for (int i = 20; i < 37; ++i) seq.push_back(0), pos.push_back(151 - 37 + i);  // prompt 0, the rest
      for (int i = 0; i < 21; ++i) seq.push_back(2), pos.push_back(i);               // prompt 2, whole
      const auto q = random_floats(rng, seq.size() * size_t(a.n_head * hd));
      const auto out = run(a, pool, q, seq, pos, true, nullptr, Kernel::tiled);
      expect_reference(a, pool, q, seq, pos, out, true);
      const auto again = run(a, pool, q, seq, pos, true, nullptr, Kernel::tiled);
      ASSERT_EQ(std::memcmp(out.data(), again.data(), out.size() * sizeof(float)), 0) << "not the same bits twice";
      AttentionShape f32 = a;
      f32.tensor_cores = false;
      expect_reference(f32, pool, q, seq, pos, run(f32, pool, q, seq, pos, true, nullptr, Kernel::tiled));
      AttentionShape staged = a;  // 8 heads over 2: the shared-memory staging takes these tiles too
      staged.mma_shared_kv = true;
      const auto got = run(staged, pool, q, seq, pos, true, nullptr, Kernel::tiled);
      ASSERT_EQ(std::memcmp(out.data(), got.data(), out.size() * sizeof(float)), 0)
          << "staged in shared memory: not the bits of the kernel reading the pool";
    }
}

// A batch of decodes wider than 8 rows (one row for each of 12 sequences, the tables counting
// 12) takes the decode kernel too: the plan's scratch splits its rows into chunks (the prefill
// kernel needs none), merged, against the reference; and with the sequences uncounted (0) or
// one row sharing a sequence, the prefill kernel (no scratch) gives the reference too.
TEST(Attention, BatchOfDecodesWiderThanEightRowsTakesTheDecodeKernel) {
  std::mt19937_64 rng(fresh_seed());
  SCOPED_TRACE(::testing::Message() << "seed " << fresh_seed());
  const std::vector<int32_t> lens = {300, 1, 64, 65, 1000, 129, 300, 77, 512, 33, 700, 200};
  Pool pool = make_pool(rng, lens, 16, 2 * 128);
  const AttentionShape a = shape(8, 2, 128, 0, 0.f);
  std::vector<int32_t> seq(lens.size()), pos(lens.size());
  for (size_t r = 0; r < lens.size(); ++r) seq[r] = int32_t(r), pos[r] = lens[r] - 1;
  const auto q = random_floats(rng, lens.size() * size_t(a.n_head * 128));
  size_t floats = 0;
  const auto out = run(a, pool, q, seq, pos, true, &floats);
  ASSERT_GT(floats, 0u) << "a batch of 12 decodes must take the decode kernel's chunks";
  expect_reference(a, pool, q, seq, pos, out);
  seq.back() = 0, pos.back() = 150;  // two rows of sequence 0: not a batch of decodes
  const auto q2 = random_floats(rng, lens.size() * size_t(a.n_head * 128));
  expect_reference(a, pool, q2, seq, pos, run(a, pool, q2, seq, pos, true, &floats));
  ASSERT_EQ(floats, 0u) << "rows sharing a sequence take the prefill kernel";
}

// A decode step with enough (row, KV head) blocks to fill the device runs one chunk a row even
// with scratch (attention_scratch_floats is 0): many KV heads, no GQA.
TEST(Attention, DecodeStepOfManyHeadsNeedsNoScratch) {
  std::mt19937_64 rng(fresh_seed());
  SCOPED_TRACE(::testing::Message() << "seed " << fresh_seed());
  const std::vector<int32_t> lens = {517, 3, 260, 129, 64, 450, 33, 200};
  Pool pool = make_pool(rng, lens, 16, 40 * 64);
  const AttentionShape a = shape(40, 40, 64, 0, 0.f);
  std::vector<int32_t> seq(lens.size()), pos(lens.size());
  for (size_t r = 0; r < lens.size(); ++r) seq[r] = int32_t(r), pos[r] = lens[r] - 1;
  auto ds = DeviceBuffer::of(seq), dp = DeviceBuffer::of(pos);
  const StepTables st{ds.get<int32_t>(), dp.get<int32_t>(), pool.dt.get<int32_t>(), pool.max_blocks};
  ASSERT_EQ(attention_scratch_floats(a, pool.view(), st, int64_t(lens.size())), 0u);
  const auto q = random_floats(rng, lens.size() * size_t(a.n_head * 64));
  expect_reference(a, pool, q, seq, pos, run(a, pool, q, seq, pos, true));
}

}  // namespace
}  // namespace loom::backend::cuda
