// Bandwidth of the CUDA decode kernels on Llama-3-8B-shaped weights: each case is timed with
// CUDA events over many launches (weights rotated across enough copies to exceed the L2),
// reported as weight bytes read per second against a device-to-device copy measured in the
// same run (bytes read + written). Kernels per case: "f32" the dequantizing matmul_rows on f32
// activations, "q8" matmul_q8 on packed weights and q8_1 activations (the resident warps each
// streaming a range of rows; "q8-1w" one tile a warp, the gemv_resident = false grid), "mma" the
// tensor-core path of batches (matmul_mma.cu), "mma-t" its tiled f16 kernel (the mma_tiles key),
// "mma-w8" the same with K split over blocks of 8 warps (the mma_wide_split key; weights of
// <= 4096 rows), "glu"/"glu-1w"/"glu-mma"/"glu-mmat" the 8B
// gate/up launch (the activation quantization, shared by the matmuls reading one input, is timed
// on its own row). Run by scripts/gpu-check; prints four tables: the persistent step against
// launches (bench_persistent), decode attention at depth (µs and KV bytes read per second,
// bench_decode_attention), a prompt's attention on each kernel (bench_prompt_attention), then
// the matmuls.
//
// Arguments (none: everything): section names to run, of persistent, attention, prompt and
// matmul; `--kernels a,b` times only those matmul kernels (and the copy): a short device call
// measures what it came for, e.g. `loom_cuda_kernel_bench matmul --kernels mma,mma-t,glu-mma,glu-mmat`;
// `--rows 64` and `--types Q4_K,Q6_K` narrow the matmul cases alike (one launch under ncu).
#include <cuda_runtime.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <random>
#include <span>
#include <set>
#include <string>
#include <vector>

#include "backend/cuda/decode_persistent.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/kernels.h"
#include "quant/quant.h"
#include "random_weight.h"

using namespace loom::backend::cuda;
using gguf::TensorType;

namespace {

float time_ms(int iters, const auto& fn) {
  cudaEvent_t a, b;
  LOOM_CUDA_CHECK(cudaEventCreate(&a));
  LOOM_CUDA_CHECK(cudaEventCreate(&b));
  fn(0);  // warm-up
  LOOM_CUDA_CHECK(cudaEventRecord(a));
  for (int i = 0; i < iters; ++i) fn(i);
  LOOM_CUDA_CHECK(cudaEventRecord(b));
  LOOM_CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  LOOM_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / iters;
}

// An attention shape of the bench's models, and its depth (decode) or rows (a prompt).
struct AttentionCase {
  const char* model;
  int n_head, n_kv, hd;
  int32_t n;
  AttentionShape shape() const {
    AttentionShape a;
    a.n_head = n_head, a.n_kv = n_kv, a.head_dim = hd, a.value_dim = hd, a.scale = 1.f / std::sqrt(float(hd));
    return a;
  }
  std::string dims() const { return std::to_string(n_head) + "/" + std::to_string(n_kv) + "/" + std::to_string(hd); }
};

// Decode attention (one row at position `depth`, f16 paged KV in blocks of 32 positions, the
// table as wide as the plan rounds it, output and its q8_1 codes as a decode step writes them):
// time per launch (the combine kernel included) and K + V bytes of the row's positions per
// second; and the time with the chunks merged by the row's last blocks instead (merge_in_kernel,
// no combine launch). Copies of the pool, one sequence each, rotate so that the KV is read from
// DRAM.
void bench_decode_attention(double copy_gbs) {
  const AttentionCase cases[] = {{"8B", 32, 8, 128, 4096}, {"8B", 32, 8, 128, 1024}, {"1B", 32, 8, 64, 4096}, {"135M", 9, 3, 64, 4096}};
  std::printf("| %-6s | %-12s | %-5s | %-4s | %-6s | %-9s | %-9s | %-8s | %-14s |\n", "model", "heads/kv/dim", "depth",
              "rows", "chunks", "us", "KV GB/s", "of copy", "in-kernel us");
  std::printf("|--------|--------------|-------|------|--------|-----------|-----------|----------|----------------|\n");
  std::mt19937_64 rng(11);
  std::normal_distribution<float> nd;
  for (const auto& c : cases) {
    const int32_t depth = c.n, bs = 32, positions = depth + 1, blocks = (positions + bs - 1) / bs;
    int32_t max_blocks = 4;
    while (max_blocks < blocks) max_blocks *= 2;
    const int64_t width = int64_t(c.n_kv) * c.hd;
    const size_t bytes = size_t(positions) * size_t(2 * width) * 2;  // K and V halves read
    const int copies = int(std::max<size_t>(1, (size_t(256) << 20) / bytes + 1));
    std::vector<int32_t> tables(size_t(copies) * max_blocks, 0), seqs(static_cast<size_t>(copies)), pos = {depth};
    for (int s = 0; s < copies; ++s) {
      seqs[size_t(s)] = s;
      for (int32_t b = 0; b < blocks; ++b) tables[size_t(s) * max_blocks + b] = s * blocks + b;
    }
    const size_t pool_halves = size_t(copies) * blocks * bs * width;
    std::vector<uint16_t> pool(pool_halves);
    std::vector<uint16_t> tile(size_t(1) << 20);  // random halves, repeated: the values do not change the time
    for (auto& x : tile) x = loom::quant::fp32_to_fp16(nd(rng));
    for (size_t i = 0; i < pool_halves; ++i) pool[i] = tile[i % tile.size()];
    std::vector<float> q(size_t(c.n_head) * c.hd);
    for (auto& x : q) x = nd(rng);
    auto dk = DeviceBuffer::of(pool), dv = DeviceBuffer::of(pool), dt = DeviceBuffer::of(tables);
    auto ds = DeviceBuffer::of(seqs), dp = DeviceBuffer::of(pos), dq = DeviceBuffer::of(q);
    DeviceBuffer out(q.size() * sizeof(float)), q8(q.size()), q8ds(q.size() / 32 * sizeof(float2));
    const AttentionShape a = c.shape();
    const KvView kv{dk.get<__half>(), dv.get<__half>(), width, width, bs};
    auto tables_of = [&](int s) {
      return StepTables{ds.get<int32_t>() + s, dp.get<int32_t>(), dt.get<int32_t>(), max_blocks};
    };
    const size_t floats = attention_scratch_floats(a, kv, tables_of(0), 1);
    DeviceBuffer scratch(std::max<size_t>(floats, 1) * sizeof(float));
    const int chunks = floats ? int(floats / (size_t(c.n_head) * size_t(c.hd + 2))) : 1;
    const float ms = time_ms(200, [&](int i) {
      attention(a, kv, tables_of(i % copies), dq.get<float>(), out.get<float>(), 1, nullptr,
                floats ? scratch.get<float>() : nullptr, floats, q8.get<int8_t>(), q8ds.get<float2>());
    });
    AttentionShape merged = a;
    merged.merge_in_kernel = true;
    auto counters = DeviceBuffer::of(std::vector<uint32_t>(std::max<size_t>(attention_counter_words(merged, 1), 1), 0));
    const float ms_merged = time_ms(200, [&](int i) {
      attention(merged, kv, tables_of(i % copies), dq.get<float>(), out.get<float>(), 1, nullptr,
                floats ? scratch.get<float>() : nullptr, floats, q8.get<int8_t>(), q8ds.get<float2>(), counters.get<unsigned>());
    });
    const double gbs = double(bytes) / (ms * 1e-3) / 1e9;
    std::printf("| %-6s | %-12s | %5d | %-4d | %6d | %9.1f | %9.0f | %7.0f%% | %14.1f |\n", c.model, c.dims().c_str(), depth, 1,
                chunks, ms * 1e3, gbs, 100 * gbs / copy_gbs, ms_merged * 1e3);
  }
  std::printf("\n");
}

// A prompt's attention: 512 (and 2,048) rows of one sequence at positions 0.., paged KV in blocks
// of 32, the f32 kernel (a block a row and head) against the tensor-core kernel (attention_mma,
// the schedule's attention_mma key): µs a launch and the causal product's TFLOP/s (2 x 2 x
// head_dim FLOP per row, head and visible position).
void bench_prompt_attention() {
  const AttentionCase cases[] = {{"8B", 32, 8, 128, 512}, {"8B", 32, 8, 128, 2048}, {"1B", 32, 8, 64, 512}, {"135M", 9, 3, 64, 512}};
  std::printf("| %-6s | %-12s | %-5s | %-12s | %-12s | %-9s | %-9s | %-12s |\n", "model", "heads/kv/dim", "rows",
              "f32 us", "mma us", "mma TF/s", "speed-up", "staged us");
  std::printf("|--------|--------------|-------|--------------|--------------|-----------|-----------|--------------|\n");
  std::mt19937_64 rng(12);
  std::normal_distribution<float> nd;
  for (const auto& c : cases) {
    const int32_t rows = c.n, bs = 32, blocks = (rows + bs - 1) / bs;
    int32_t max_blocks = 4;
    while (max_blocks < blocks) max_blocks *= 2;
    const int64_t width = int64_t(c.n_kv) * c.hd;
    std::vector<int32_t> tables(static_cast<size_t>(max_blocks), 0), seqs(static_cast<size_t>(rows), 0), pos(static_cast<size_t>(rows));
    for (int32_t b = 0; b < blocks; ++b) tables[size_t(b)] = b;
    for (int32_t r = 0; r < rows; ++r) pos[size_t(r)] = r;
    std::vector<uint16_t> pool(size_t(blocks) * bs * width);
    for (auto& x : pool) x = loom::quant::fp32_to_fp16(nd(rng));
    std::vector<float> q(size_t(rows) * c.n_head * c.hd);
    for (auto& x : q) x = nd(rng);
    auto dk = DeviceBuffer::of(pool), dv = DeviceBuffer::of(pool), dt = DeviceBuffer::of(tables);
    auto ds = DeviceBuffer::of(seqs), dp = DeviceBuffer::of(pos), dq = DeviceBuffer::of(q);
    DeviceBuffer out(q.size() * sizeof(float));
    AttentionShape a = c.shape();
    const KvView kv{dk.get<__half>(), dv.get<__half>(), width, width, bs};
    const StepTables st{ds.get<int32_t>(), dp.get<int32_t>(), dt.get<int32_t>(), max_blocks, 1};
    float ms[3];  // the f32 kernel, the tensor-core kernel, the same with keys and values staged in shared memory
    for (int m = 0; m < 3; ++m) {
      a.tensor_cores = m >= 1;
      a.mma_shared_kv = m == 2;  // the 135M's 9 heads over 3 do not take it: the same kernel as mma
      ms[m] = time_ms(20, [&](int) { attention(a, kv, st, dq.get<float>(), out.get<float>(), rows, nullptr); });
    }
    const double flop = 4.0 * c.hd * c.n_head * (double(rows) * (rows + 1) / 2);
    std::printf("| %-6s | %-12s | %5d | %12.1f | %12.1f | %9.1f | %8.1fx | %12.1f |\n", c.model, c.dims().c_str(), rows,
                ms[0] * 1e3, ms[1] * 1e3, flop / (ms[1] * 1e-3) / 1e12, ms[0] / ms[1], ms[2] * 1e3);
  }
  std::printf("\n");
}

// The persistent step's phases against launches (decode_persistent): a chain of P one-row
// matmuls, each RMS-normed and quantized from the one before (rms_norm_q8 + matmul_q8, captured
// in a graph, against one PersistentStep of P matmul phases with the norm staged per block), each
// phase's weight a copy of its own so that it streams from DRAM. Time per phase: on N = 4096 the
// matmul's bandwidth shows; on N = 64 what a phase costs beyond its weights, split by the probes
// ("barrier": the phases' grid barriers alone; "stage": with each block's staging of the row).
// The grid at 1, 2 and 4 blocks a multiprocessor.
void bench_persistent(double copy_gbs) {
  std::printf("| %-6s | %-12s | %-6s | %-18s | %-9s | %-9s | %-8s |\n", "type", "N x K", "phases", "kernel", "us/phase",
              "GB/s", "of copy");
  std::printf("|--------|--------------|--------|--------------------|-----------|-----------|----------|\n");
  const int P = 32;
  std::string traces;
  std::mt19937_64 rng(13);
  std::normal_distribution<float> nd;
  struct Case { TensorType t; int64_t N, K; };  // K 576: the 135M's width (no k-quant: its file has Q5_0 / Q8_0 there)
  for (const Case c : {Case{TensorType::Q4_K, 4096, 4096}, Case{TensorType::Q4_K, 64, 4096}, Case{TensorType::Q8_0, 64, 576}}) {
    const TensorType t = c.t;
    const int64_t N = c.N, K = c.K;
    const std::vector<uint8_t> packed = pack_rows(t, random_rows(rng, t, N, K).data(), N, K);
    const size_t prb = packed.size() / size_t(N);
    std::vector<DeviceBuffer> wp;
    for (int i = 0; i < P; ++i) wp.push_back(DeviceBuffer::of(packed));
    std::vector<float> x(std::max(N, K)), ones(K, 1.f);
    for (auto& v : x) v = nd(rng);
    DeviceBuffer a = DeviceBuffer::of(x), b = DeviceBuffer::of(x), normed(K * sizeof(float)), w = DeviceBuffer::of(ones);
    DeviceBuffer dq(K), dds(K / 32 * sizeof(float2));
    auto in = [&](int i) { return (i % 2 ? b : a).get<float>(); };
    auto out = [&](int i) { return (i % 2 ? a : b).get<float>(); };
    auto report = [&](const std::string& kernel, float ms) {
      const double gbs = double(packed.size()) * P / (ms * 1e-3) / 1e9;
      std::printf("| %-6s | %5lld x %-5lld | %6d | %-18s | %9.2f | %9.0f | %7.0f%% |\n", gguf::type_name(t).data(),
                  (long long)N, (long long)K, P, kernel.c_str(), ms * 1e3 / P, gbs, 100 * gbs / copy_gbs);
    };
    cudaStream_t s;
    LOOM_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    LOOM_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < P; ++i) {
      rms_norm_q8(in(i), w.get<float>(), 1e-5f, normed.get<float>(), 1, K, dq.get<int8_t>(), dds.get<float2>(), s);
      matmul_q8(t, wp[i].get<uint8_t>(), prb, N, K, dq.get<int8_t>(), dds.get<float2>(), 1, out(i), N, s);
    }
    LOOM_CUDA_CHECK(cudaStreamEndCapture(s, &g));
    LOOM_CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
    report("launched", time_ms(20, [&](int) { LOOM_CUDA_CHECK(cudaGraphLaunch(ge, nullptr)); }));
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    cudaStreamDestroy(s);
    PersistentStep step;
    for (int i = 0; i < P; ++i) {
      PersistentMatmul m;
      m.parts.push_back(MatmulPart{t, wp[i].get<uint8_t>(), prb, N, out(i), N});
      m.K = K, m.x = in(i), m.norm = w.get<float>(), m.eps = 1e-5f;
      step.add(m);
    }
    const PersistentProbe probes[] = {PersistentProbe::full, PersistentProbe::stage, PersistentProbe::barrier};
    for (const PersistentProbe probe : N == 64 ? std::span(probes) : std::span(probes, 1))
      for (int bps : {1, 2, 4}) {
        step.upload({bps, probe});
        const char* what = probe == PersistentProbe::full ? "persistent" : probe == PersistentProbe::stage ? "stage" : "barrier";
        report(std::string(what) + " " + std::to_string(bps) + "/SM", time_ms(20, [&](int) { step.launch(nullptr); }));
      }
    if (N == 64) {  // where the staging's time goes, by the staging blocks' clocks
      step.upload({1, PersistentProbe::stage, true});
      for (int i = 0; i < 20; ++i) step.launch(nullptr);
      LOOM_CUDA_CHECK(cudaDeviceSynchronize());
      const StageTrace tr = step.stage_trace();
      char line[256];
      std::snprintf(line, sizeof line,
                    "%s %lld x %lld, stage 1/SM, a staging block's us a phase: arrival to barrier exit %.2f, row load "
                    "%.2f, sum of squares %.2f, quantize %.2f (%lld phases)\n",
                    gguf::type_name(t).data(), (long long)N, (long long)K, tr.barrier_us, tr.load_us, tr.sum_us,
                    tr.quantize_us, tr.phases);
      traces += line;
    }
  }
  std::printf("\n%s\n", traces.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows reach the log as they are measured
  const std::set<std::string> known_sections = {"persistent", "attention", "prompt", "matmul"};
  std::set<std::string> sections, kernels, row_counts, types;
  // --types matches in any case: q4_K as the table prints it, Q4_K as the GGUF names are written
  // elsewhere (run 20's first call filtered everything out with Q4_K).
  auto lower = [](std::string v) {
    for (char& ch : v) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    return v;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    std::set<std::string>* list_of = a == "--kernels" ? &kernels : a == "--rows" ? &row_counts : a == "--types" ? &types
                                                                                                             : nullptr;
    if (list_of && i + 1 < argc) {
      for (std::string list = argv[++i]; !list.empty();) {
        const size_t comma = list.find(',');
        const std::string item = list.substr(0, comma);
        list_of->insert(list_of == &types ? lower(item) : item);
        list = comma == std::string::npos ? "" : list.substr(comma + 1);
      }
    } else if (known_sections.count(a)) {
      sections.insert(a);
    } else {
      std::fprintf(stderr, "loom_cuda_kernel_bench: unknown argument '%s' (sections: persistent attention prompt "
                   "matmul; --kernels a,b; --rows 8,64; --types Q4_K,Q6_K)\n", a.c_str());
      return 2;
    }
  }
  auto want = [&](const char* section) { return sections.empty() || sections.count(section) > 0; };
  auto timed = [&](const char* kernel) { return kernels.empty() || kernels.count(kernel) > 0; };
  const size_t copy_bytes = size_t(2) << 30;
  DeviceBuffer src(copy_bytes), dst(copy_bytes);
  LOOM_CUDA_CHECK(cudaMemset(src.get(), 1, copy_bytes));
  const float copy_ms = time_ms(10, [&](int) {
    LOOM_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), copy_bytes, cudaMemcpyDeviceToDevice));
  });
  const double copy_gbs = 2.0 * copy_bytes / (copy_ms * 1e-3) / 1e9;
  std::printf("device-to-device copy: %.0f GB/s (read + write)\n\n", copy_gbs);
  if (want("persistent")) bench_persistent(copy_gbs);
  if (want("attention")) bench_decode_attention(copy_gbs);
  if (want("prompt")) bench_prompt_attention();
  if (!want("matmul")) return 0;
  std::printf("| %-6s | %-6s | %-12s | %-4s | %-9s | %-9s | %-8s |\n", "type", "kernel", "N x K", "rows", "us", "GB/s",
              "of copy");
  std::printf("|--------|--------|--------------|------|-----------|-----------|----------|\n");
  struct Case { TensorType t; int64_t N, K; };
  const Case cases[] = {{TensorType::Q4_K, 4096, 4096}, {TensorType::Q4_K, 14336, 4096}, {TensorType::Q6_K, 4096, 14336},
                        {TensorType::Q4_K, 1024, 4096}, {TensorType::Q6_K, 128256, 4096}, {TensorType::Q8_0, 4096, 4096},
                        {TensorType::Q5_0, 4096, 4096}, {TensorType::Q4_0, 4096, 4096}, {TensorType::Q4_1, 4096, 4096},
                        {TensorType::Q5_K, 4096, 4096}, {TensorType::F16, 4096, 4096}, {TensorType::F32, 4096, 4096}};
  std::mt19937_64 rng(7);
  std::normal_distribution<float> nd;
  for (const auto& c : cases) {
    const std::string type(gguf::type_name(c.t));
    if (!types.empty() && !types.count(lower(type))) continue;
    const size_t rb = loom::quant::row_size(c.t, c.K), bytes = rb * c.N;
    const int copies = int(std::max<size_t>(1, (size_t(256) << 20) / bytes + 1));  // > L2 in rotation
    const std::vector<uint8_t> host = random_rows(rng, c.t, c.N, c.K);
    const bool q8 = has_q8_kernel(c.t, c.K);
    if (!q8 && !timed("f32")) continue;  // nothing asked for runs on this type
    const std::vector<uint8_t> packed = q8 ? pack_rows(c.t, host.data(), c.N, c.K) : std::vector<uint8_t>();
    std::vector<DeviceBuffer> w, wp;
    for (int i = 0; i < copies; ++i) {
      w.push_back(DeviceBuffer::of(host));
      if (q8) wp.push_back(DeviceBuffer::of(packed));
    }
    // A kernel's row: fn timed over `iters` launches, unless --kernels leaves it out.
    auto report = [&](const char* kernel, int rows, int iters, const auto& fn, double b) {
      if (!timed(kernel)) return;
      const float ms = time_ms(iters, fn);
      const double gbs = b / (ms * 1e-3) / 1e9;
      std::printf("| %-6s | %-6s | %5lld x %-5lld | %-4d | %9.1f | %9.0f | %7.0f%% |\n", type.c_str(), kernel,
                  (long long)c.N, (long long)c.K, rows, ms * 1e3, gbs, 100 * gbs / copy_gbs);
    };
    for (int rows : {1, 8, 16, 24, 32, 64}) {  // 16, 24: where the tiled kernel starts to pay (tiled_pays)
      if ((rows > 8 && !q8) || (!row_counts.empty() && !row_counts.count(std::to_string(rows)))) continue;
      std::vector<float> x(size_t(rows * c.K));
      for (auto& v : x) v = nd(rng);
      auto dx = DeviceBuffer::of(x);
      DeviceBuffer dy(size_t(rows * c.N) * sizeof(float));
      DeviceBuffer dq(size_t(rows * c.K)), dds(size_t(rows * c.K / 32) * sizeof(float2));
      DeviceBuffer scratch(mma_scratch_bytes(rows, c.K, true));  // the int8 and the tiled kernel
      const MmaPath mma{scratch.get(), scratch.bytes(), 1};
      const bool tc = q8 && rows > 1 && has_mma_kernel(c.t) && mma_device();
      if (rows <= 8)
        report("f32", rows, 50, [&](int i) {
                 matmul_rows(c.t, w[i % copies].get<uint8_t>(), rb, c.N, c.K, dx.get<float>(), c.K, rows, dy.get<float>(),
                             c.N, nullptr);
               }, double(bytes));
      if (!q8) continue;
      quantize_q8_1(dx.get<float>(), c.K, rows, c.K, dq.get<int8_t>(), dds.get<float2>(), nullptr);
      for (int64_t warps : {int64_t(0), kWarpPerRow})  // the resident warps streaming ranges; one tile a warp
        report(warps ? "q8-1w" : "q8", rows, 50, [&](int i) {
                 matmul_q8(c.t, wp[i % copies].get<uint8_t>(), packed.size() / size_t(c.N), c.N, c.K, dq.get<int8_t>(),
                           dds.get<float2>(), rows, dy.get<float>(), c.N, nullptr, warps);
               }, double(packed.size()));
      const size_t prb = packed.size() / size_t(c.N);
      if (tc)  // the tensor-core path (pack of the activations included)
        report("mma", rows, 50, [&](int i) {
                 const MatmulPart part{c.t, wp[i % copies].get<uint8_t>(), prb, c.N, dy.get<float>(), c.N};
                 matmul_q8_parts(&part, 1, MatmulEpilogue::store, c.K, dq.get<int8_t>(), dds.get<float2>(), rows, nullptr,
                                 {}, mma);
               }, double(packed.size()));
      if (tc)  // the tiled f16 kernel (mma_tiles)
        report("mma-t", rows, 50, [&](int i) {
                 const MatmulPart part{c.t, wp[i % copies].get<uint8_t>(), prb, c.N, dy.get<float>(), c.N};
                 matmul_q8_parts(&part, 1, MatmulEpilogue::store, c.K, dq.get<int8_t>(), dds.get<float2>(), rows, nullptr,
                                 {}, {scratch.get(), scratch.bytes(), 1, 4, MmaTiles::always});
               }, double(packed.size()));
      if (tc && c.N <= 4096)  // the same with K split over blocks of 8 warps (mma_wide_split), narrow weights
        report("mma-w8", rows, 50, [&](int i) {
                 const MatmulPart part{c.t, wp[i % copies].get<uint8_t>(), prb, c.N, dy.get<float>(), c.N};
                 matmul_q8_parts(&part, 1, MatmulEpilogue::store, c.K, dq.get<int8_t>(), dds.get<float2>(), rows, nullptr,
                                 {}, {scratch.get(), scratch.bytes(), 1, 8});
               }, double(packed.size()));
      if (c.N == 14336 && copies > 1) {  // the gate/up launch of the 8B shape: two weights, swiglu epilogue
        struct Glu { const char* name; bool tensor_cores, tiled; int64_t max_warps; };
        for (const Glu& g : {Glu{"glu", false, false, 0}, Glu{"glu-1w", false, false, kWarpPerRow},
                             Glu{"glu-mma", true, false, 0}, Glu{"glu-mmat", true, true, 0}}) {
          if (g.tensor_cores && !tc) continue;
          report(g.name, rows, 50, [&](int i) {
                   const MatmulPart parts[2] = {{c.t, wp[i % copies].get<uint8_t>(), prb, c.N, dy.get<float>(), c.N},
                                                {c.t, wp[(i + 1) % copies].get<uint8_t>(), prb, c.N, dy.get<float>(), c.N}};
                   matmul_q8_parts(parts, 2, MatmulEpilogue::swiglu, c.K, dq.get<int8_t>(), dds.get<float2>(), rows,
                                   nullptr, {},
                                   g.tensor_cores ? MmaPath{scratch.get(), scratch.bytes(), 1, 4,
                                                            g.tiled ? MmaTiles::always : MmaTiles::off}
                                                  : MmaPath{},
                                   g.max_warps);
                 }, 2.0 * double(packed.size()));
        }
      }
      report("quant", rows, 50, [&](int) {
               quantize_q8_1(dx.get<float>(), c.K, rows, c.K, dq.get<int8_t>(), dds.get<float2>(), nullptr);
             }, double(rows * c.K * 4));
    }
  }
  return 0;
}
