// loom-attention-bench: a measuring program for the fast backend's decode attention (not a
// test). One decode token at depth D through every layer's attention (run_attention, the
// backend's own entry point) over a paged f16/f32/q8_0 cache of L layers, so the cache is as
// large as a real model's and streams from memory, not from L3:
//   loom-attention-bench [--layers 28] [--depth 2048] [--kv 8] [--heads 16] [--hd 128]
//                        [--threads 1] [--reps 20] [--block 32] [--kv-type f16] [--chunk 0]
// Prints the fastest and median time per token (all layers), ns per (key, kv head) and the
// KV bytes read per second, and a checksum of the last token's outputs (equal checksums
// before and after a change that should keep the bits).
#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <sys/mman.h>

#include "backend/cpu/fast/kv_elem.h"
#include "backend/cpu/fast/plan.h"
#include "backend/host_kv.h"
#include "common/error.h"
#include "ir/module.h"

using namespace loom;
using namespace loom::backend;
using namespace loom::backend::cpu::fast;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) try {
  int layers = 28, depth = 2048, n_kv = 8, n_head = 16, hd = 128, threads = 1, reps = 20, block = 32, chunk = 0;
  std::string kv_type = "f16";
  bool huge = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : (loom::fail("{} needs a value", a), std::string()); };
    if (a == "--layers") layers = std::stoi(next());
    else if (a == "--depth") depth = std::stoi(next());
    else if (a == "--kv") n_kv = std::stoi(next());
    else if (a == "--heads") n_head = std::stoi(next());
    else if (a == "--hd") hd = std::stoi(next());
    else if (a == "--threads") threads = std::stoi(next());
    else if (a == "--reps") reps = std::stoi(next());
    else if (a == "--block") block = std::stoi(next());
    else if (a == "--chunk") chunk = std::stoi(next());
    else if (a == "--kv-type") kv_type = next();
    else if (a == "--huge") huge = true;
    else loom::fail("unknown argument {}", a);
  }
  if (n_kv <= 0 || n_head % n_kv) loom::fail("--heads {} must be a multiple of --kv {}", n_head, n_kv);
  const KvElem elem = parse_kv_elem(kv_type);
  const std::vector<KvLayerShape> shapes(size_t(layers), KvLayerShape{n_kv, hd, hd});
  const int32_t n_blocks = (depth + 1 + block - 1) / block;
  HostKvStorage kv(shapes, n_blocks, block, elem);
  if (huge)
    for (int l = 0; l < layers; ++l)
      for (uint8_t* base : {kv.k_base(l), kv.v_base(l)}) {
        const uintptr_t b = reinterpret_cast<uintptr_t>(base) & ~uintptr_t(4095);
        madvise(reinterpret_cast<void*>(b), size_t(n_blocks) * size_t(block) * kv.k_row_bytes(l), MADV_HUGEPAGE);
      }
  // Blocks in order, as a fresh engine hands them to one sequence.
  std::vector<int32_t> table(static_cast<size_t>(n_blocks));
  for (int32_t i = 0; i < n_blocks; ++i) table[size_t(i)] = i;

  std::mt19937_64 rng(1);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int64_t kw = int64_t(n_kv) * hd;
  std::vector<float> src(static_cast<size_t>(kw));
  for (int l = 0; l < layers; ++l)
    for (int32_t p = 0; p < depth; ++p) {
      const size_t row = size_t(table[size_t(p / block)]) * size_t(block) + size_t(p % block);
      for (auto& x : src) x = nd(rng);
      store_kv_row(elem, src.data(), kv.k_base(l) + row * kv.k_row_bytes(l), kw);
      for (auto& x : src) x = nd(rng);
      store_kv_row(elem, src.data(), kv.v_base(l) + row * kv.v_row_bytes(l), kw);
    }

  // One token's q, k, v and out in an arena of 4 slots of one row each.
  const int64_t qw = int64_t(n_head) * hd;
  std::vector<Slot> slots = {{0, qw * 4}, {qw * 4, kw * 4}, {qw * 4 + kw * 4, kw * 4}, {qw * 4 + 2 * kw * 4, qw * 4}};
  std::vector<uint8_t> arena(static_cast<size_t>(2 * (qw + kw) * 4 + 64));
  float* f = reinterpret_cast<float*>(arena.data());
  for (int64_t i = 0; i < qw + 2 * kw; ++i) f[i] = nd(rng);

  SpinPool pool(threads);
  StepBatch batch = StepBatch::sequence({1}, depth);
  batch.block_tables = {std::span<const int32_t>(table)};
  std::vector<std::vector<float>> scratch(static_cast<size_t>(threads));
  Exec e{pool, batch, HostKvView::bind(kv, batch, shapes)};
  e.rows = 1;
  e.positions = batch.positions.data();
  e.tokens = batch.tokens.data();
  e.arena = arena.data();
  e.capacity = 1;
  e.slots = &slots;
  e.scratch = &scratch;
  ir::Op op;
  op.result = "attn";
  Step s;
  s.kind = StepKind::attention, s.op = &op, s.out = 3, s.in[0] = 0, s.in[1] = 1, s.in[2] = 2;
  s.attn.n_head = n_head, s.attn.n_kv = n_kv, s.attn.head_dim = hd, s.attn.value_dim = hd;
  s.attn.scale = 1.f / std::sqrt(float(hd));
  s.attn.chunk = chunk;

  std::vector<double> ms;
  for (int r = 0; r < reps + 1; ++r) {  // the first is a warm-up
    const auto t0 = Clock::now();
    for (int l = 0; l < layers; ++l) {
      s.attn.layer = l;
      run_attention(s, e);
    }
    if (r) ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  double sum = 0;
  for (int64_t i = 0; i < qw; ++i) sum += double(e.value(3)[i]) * double(i % 7 + 1);
  const double keys = double(layers) * double(depth + 1) * n_kv;
  const double bytes = double(layers) * double(depth + 1) * double(kv.k_row_bytes(0) + kv.v_row_bytes(0));
  std::printf("decode attention, %d layers at depth %d, %d kv x %d heads x %d, %s, %d threads: fastest %.3f ms, "
              "median %.3f ms per token; %.1f ns per (key, kv head); %.1f GB/s of KV; checksum %.9g\n",
              layers, depth, n_kv, n_head, hd, kv_type.c_str(), threads, ms.front(), ms[ms.size() / 2],
              ms.front() * 1e6 / keys, bytes / (ms.front() * 1e-3) / 1e9, sum);
  return 0;
} catch (const std::exception& ex) {
  std::fprintf(stderr, "loom-attention-bench: %s\n", ex.what());
  return 1;
}
