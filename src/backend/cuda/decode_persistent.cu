// The persistent decode step (decode_persistent.h): one kernel of resident blocks walks the
// step's phases, a grid barrier between each two. The phases are the launched path's own device
// code: matmul_warp (matmul_q8.cuh) on the same warp ranges' arithmetic, decode_attention_block
// and combine_head (attention_decode.cuh); what changes is where a matmul reads its input — each
// block quantizes the row into shared memory after the barrier (through the RMS norm where the
// launched path ran rms_norm_q8), in the order rms_norm_q8 and quantize_q8_1 use, so the codes
// are the same.
//
// Memory order across the barrier: a block's writes are ordered before its arrival by
// __syncthreads and a fence (thread 0 then adds to the counter); a block leaves the wait after
// thread 0 has seen every arrival and fenced, then __syncthreads — the pattern of cooperative
// groups' grid sync. Data written within the kernel is never read through the read-only path
// (no __restrict__ on those pointers; the staged rows are read with __ldcg). The blocks must all
// be resident at once: the grid is the occupancy times the multiprocessors, launched plainly
// after the kernel before it has finished; a wait that lasts seconds traps instead of hanging.
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "backend/cuda/attention_decode.cuh"
#include "backend/cuda/check.h"
#include "backend/cuda/decode_persistent.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/matmul_q8.cuh"
#include "backend/cuda/q8_1.cuh"
#include "backend/cuda/warp.cuh"

namespace loom::backend::cuda {

namespace {

constexpr int kThreads = kWarpsPerBlock * kWarpSize;
constexpr int kPersistentBlocks = 4;  // blocks an SM the kernel keeps registers for (128 a thread, as matmul_q8)
constexpr int kNormThreads = 256;  // rms_norm_q8's block: its sum of squares adds in this order
constexpr long long kHangCycles = 20'000'000'000LL;  // ~10 s at 2 GHz: a barrier that never fills

// probe_*: a matmul phase reduced to its barrier, or to its barrier and staging (PersistentProbe).
enum class PhaseKind : int32_t { matmul, attention, merge, probe_barrier, probe_stage };

struct MatmulPhase {
  Parts groups[kMaxParts];        // one a weight type among the parts (gated: gate and up, one type)
  int64_t group_end[kMaxParts];   // warps [group_end[i - 1], group_end[i]) run group i
  int n_groups;
  Epi epi;
  int64_t K;
  const float* x;
  const float* norm;
  float eps;
};
struct AttentionPhase {
  AttentionShape a;
  KvView kv;
  StepTables st;
  const float* q;
  float* out;
  float* part;  // chunks > 1
  int chunks, items;
};
struct MergePhase {
  const float* part;
  float* out;
  int chunks;
  int64_t heads;
};
struct Phase {
  PhaseKind kind;
  MatmulPhase mm;
  AttentionPhase at;
  MergePhase mg;
};

// The staged row in shared memory: f32, then the q8_1 codes (16-byte aligned: K is a multiple
// of 32) and the blocks' scales.
__device__ __host__ constexpr size_t codes_at(int64_t K) { return size_t(K) * sizeof(float); }
__device__ __host__ constexpr size_t stage_bytes(int64_t K) {
  return codes_at(K) + size_t(K) + size_t(K / kQ8Block) * sizeof(float2);
}

// The phase's input row into shared memory as f32, every thread's loads of a round in flight at
// once: read past L1 (other blocks wrote it in this kernel), with 16-byte loads (x 16-byte aligned,
// K a multiple of 32). Read element by element in the quantize loop, each element cost an L2
// round trip a 32-block: run 14's kernel bench measured ~20 us a phase that way.
__device__ __forceinline__ void load_row(const float* x, int64_t K, float* xs) {
  constexpr int kBatch = 8;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  const int64_t n4 = K / 4;
  for (int64_t base = threadIdx.x; base < n4; base += int64_t(kBatch) * kThreads) {
    float4 v[kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i)
      if (base + i * kThreads < n4) v[i] = __ldcg(x4 + base + i * kThreads);
#pragma unroll
    for (int i = 0; i < kBatch; ++i)
      if (base + i * kThreads < n4) reinterpret_cast<float4*>(xs)[base + i * kThreads] = v[i];
  }
  __syncthreads();
}

// block_sum_squares<NT> (warp.cuh) of a block of NT threads, worked by this block's kThreads on
// the staged row: thread t does the partial sums of threads t, t + kThreads, ... in their order,
// and the warps' sums meet in the same order, so the total has rms_norm_q8's bits.
template <int NT>
__device__ __forceinline__ float sum_squares_as(const float* xs, int64_t n) {
  static_assert(NT % kThreads == 0 && NT / kWarpSize <= kWarpSize, "whole blocks of this one's threads");
  __shared__ float partial[NT / kWarpSize];
  const int lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int m = 0; m < NT / kThreads; ++m) {
    const int vt = threadIdx.x + m * kThreads;
    float sum = 0.f;
    int64_t c = vt;
    for (; c + 7 * int64_t(NT) < n; c += 8 * int64_t(NT)) {
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float v = xs[c + i * int64_t(NT)];
        sum += v * v;
      }
    }
    for (; c < n; c += NT) {
      const float v = xs[c];
      sum += v * v;
    }
    sum = warp_sum(sum);
    if (lane == 0) partial[vt / kWarpSize] = sum;
  }
  __syncthreads();
  if (threadIdx.x < kWarpSize) {
    float v = threadIdx.x < NT / kWarpSize ? partial[threadIdx.x] : 0.f;
    v = warp_sum(v);
    if (threadIdx.x == 0) partial[0] = v;
  }
  __syncthreads();
  return partial[0];
}

// R rounds of the quantize loop: thread t quantizes float4 c4 + r kThreads of the row (c4 =
// t's own, + a multiple of kThreads; eight lanes a 32-block, four values each), with no branch
// between the rounds so that their loads and shuffles interleave (run 16's trace: one round at a
// time, each a chain of dependent latencies, ~0.5 us a round). `live`: some lanes' float4s are
// past the row's end (R = 1 only; the same for a 32-block's eight lanes, n4 being a multiple of 8).
template <int R>
__device__ __forceinline__ void quantize_rounds(const float* xs, const float* w, float s, int64_t c4, int64_t n4,
                                                uint32_t* codes, float2* ds) {
  constexpr int kLanesPerBlock = kQ8Block / 4;
  const int sub = threadIdx.x % kLanesPerBlock;
  float v[R][4], amax[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t c = c4 + int64_t(r) * kThreads;
    const bool live = R > 1 || c < n4;
    v[r][0] = v[r][1] = v[r][2] = v[r][3] = 0.f;
    if (live) {
      const float4 x4 = reinterpret_cast<const float4*>(xs)[c];
      v[r][0] = x4.x, v[r][1] = x4.y, v[r][2] = x4.z, v[r][3] = x4.w;
      if (w) {
        const float4 w4 = __ldg(reinterpret_cast<const float4*>(w) + c);
        v[r][0] = v[r][0] * s * w4.x, v[r][1] = v[r][1] * s * w4.y, v[r][2] = v[r][2] * s * w4.z,
        v[r][3] = v[r][3] * s * w4.w;
      }
    }
    amax[r] = fmaxf(fmaxf(fabsf(v[r][0]), fabsf(v[r][1])), fmaxf(fabsf(v[r][2]), fabsf(v[r][3])));
  }
#pragma unroll
  for (int r = 0; r < R; ++r) amax[r] = lanes_max<kLanesPerBlock>(amax[r]);
  float d[R], total[R];
  uint32_t word[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    d[r] = amax[r] / 127.f;
    const float id = d[r] != 0.f ? 1.f / d[r] : 0.f;
    word[r] = 0;
    int sum = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int q = int(roundf(v[r][j] * id));
      sum += q;
      word[r] |= uint32_t(uint8_t(int8_t(q))) << (8 * j);
    }
    total[r] = float(sum);
  }
#pragma unroll
  for (int r = 0; r < R; ++r) total[r] = lanes_sum<kLanesPerBlock>(total[r]);  // exact: |total| <= 32 * 127
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t c = c4 + int64_t(r) * kThreads;
    if (R > 1 || c < n4) {
      codes[c] = word[r];
      if (sub == 0) ds[c / kLanesPerBlock] = make_float2(d[r], d[r] * total[r]);
    }
  }
}

// The phase's input row as q8_1 in shared memory, through the RMS norm first where the phase has
// one: rms_norm_q8's values (x * s * w), quantize_q8_1_block's codes and scales. Eight lanes
// quantize a 32-block, four consecutive values each, so a warp's norm-weight loads are 512
// contiguous bytes (run 15: a thread a block, each of its 32 scalar loads touching 32 lines,
// cost ~8 us of staging at K = 4096); thread t takes the float4s load_row gave it, kStageRounds
// rounds at a time where all of a warp's lanes have one (run 16: quantizing a 4096-wide row 4.0
// -> 1.6 us, the staging probe's phase 8.1 -> 4.9 us, against one round at a time). The block's
// max and its sum of integer codes are exact in any order, so the codes and scales are the same.
// mark(k) after step k (1: the row loaded, 2: its sum of squares, 3: quantized) for a traced
// probe. (Run 16, each measured slower: the norm weights of eight rounds loaded at once with
// redux.sync for the max and sum and a branch between the rounds, 7.9 -> 11.6 us a probe phase;
// the phase descriptions copied to shared memory by cp.async, every block reading the same 2 KB,
// a barrier 1.4 -> 1.6-3.2 us; this function called rather than inlined, no change.)
constexpr int kStageRounds = 8;  // K = 4096: one group of a warp's eight rounds
template <class Mark>
__device__ __forceinline__ void stage_row(const MatmulPhase& m, uint8_t* stage, Mark mark) {
  const int64_t K = m.K, n4 = K / 4;
  float* xs = reinterpret_cast<float*>(stage);
  uint32_t* codes = reinterpret_cast<uint32_t*>(stage + codes_at(K));
  float2* ds = reinterpret_cast<float2*>(stage + codes_at(K) + K);
  load_row(m.x, K, xs);
  mark(1);
  const float s = m.norm ? rsqrtf(sum_squares_as<kNormThreads>(xs, K) / float(K) + m.eps) : 1.f;
  mark(2);
  const int lane = threadIdx.x % kWarpSize;
  int64_t first = threadIdx.x - lane;  // the warp's first float4 of the round (warp-uniform)
  for (; first + int64_t(kStageRounds - 1) * kThreads + kWarpSize <= n4; first += int64_t(kStageRounds) * kThreads)
    quantize_rounds<kStageRounds>(xs, m.norm, s, first + lane, n4, codes, ds);
  for (; first < n4; first += kThreads) quantize_rounds<1>(xs, m.norm, s, first + lane, n4, codes, ds);
  mark(3);
}
__device__ __forceinline__ void stage_row(const MatmulPhase& m, uint8_t* stage) {
  stage_row(m, stage, [](int) {});
}

// The grid barrier: every block adds one to *bar as it leaves a phase; a phase's work after its
// wait sees everything the phases before it wrote.
__device__ __forceinline__ void grid_arrive(unsigned* bar) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(bar, 1u);
  }
}
// (Run 15: 1.4 / 1.6 / 2.0 us a barrier at 1 / 2 / 4 blocks an SM; a 100 ns sleep between polls
// made it no faster.)
__device__ __forceinline__ void grid_wait(const unsigned* bar, unsigned target) {
  if (threadIdx.x == 0) {
    const long long t0 = clock64();
    while (*reinterpret_cast<const volatile unsigned*>(bar) < target)
      if (clock64() - t0 > kHangCycles) __trap();  // a block that never became resident
    __threadfence();
  }
  __syncthreads();
}

// Each (type, epilogue)'s warp in a function of its own: inlined side by side into one kernel,
// the 21 loops' registers spilled (ptxas: a 1.5 KB stack frame); called, each is allocated alone
// within the kernel's 128 registers, as its own kernel is.
template <TensorType T, Epi E, class Wait>
__device__ __noinline__ void matmul_call(const Parts& P, const XRows& x, int64_t g, int lane, Wait wait) {
  matmul_warp<T, 1, E, false>(P, x, g, lane, wait);
}

template <TensorType T, class Wait>
__device__ __forceinline__ void matmul_typed(Epi e, const Parts& P, const XRows& x, int64_t g, int lane, Wait wait) {
  switch (e) {
    case Epi::rope_kv: return matmul_call<T, Epi::rope_kv>(P, x, g, lane, wait);
    case Epi::gated: return matmul_call<T, Epi::gated>(P, x, g, lane, wait);
    default: return matmul_call<T, Epi::store>(P, x, g, lane, wait);
  }
}

template <int HD, int GM>
__device__ __noinline__ void attention_items(const AttentionPhase& at) {
  const int groups = at.items / at.chunks;
  for (int item = blockIdx.x; item < at.items; item += gridDim.x) {
    decode_attention_block<HD, GM>(at.a, at.kv, at.st, at.q, at.out, nullptr, nullptr, at.part, nullptr,
                                   unsigned(item % groups), unsigned(item / groups), unsigned(at.chunks));
    __syncthreads();  // its shared memory is the next item's
  }
}

// Whether any of this block's warps has rows in the phase (warps are assigned from the first):
// the blocks past them skip the staging, which every block would otherwise read from the same
// L2 lines.
__device__ __forceinline__ bool block_has_rows(const MatmulPhase& m) {
  return int64_t(blockIdx.x) * kWarpsPerBlock < m.group_end[m.n_groups - 1];
}

// Warp g's part of a matmul phase: its type group's matmul_warp, whose wait is the barrier and
// then the block's staging of the input row.
template <class Barrier>
__device__ __forceinline__ void matmul_phase(const MatmulPhase& m, int64_t g, int lane, uint8_t* stage,
                                             Barrier barrier) {
  const XRows x{reinterpret_cast<int8_t*>(stage + codes_at(m.K)),
                reinterpret_cast<float2*>(stage + codes_at(m.K) + m.K), m.K};
  auto wait = [&] {
    barrier();
    if (block_has_rows(m)) stage_row(m, stage);
    __syncthreads();
  };
  int gi = -1;
  int64_t first = 0;
  for (int i = 0; i < m.n_groups; ++i) {
    if (g < m.group_end[i]) {
      gi = i;
      break;
    }
    first = m.group_end[i];
  }
  if (gi < 0) return wait();
  const Parts& P = m.groups[gi];
  const int64_t j = g - first;
  switch (P.p[0].type) {
    case TensorType::Q4_0: return matmul_typed<TensorType::Q4_0>(m.epi, P, x, j, lane, wait);
    case TensorType::Q4_1: return matmul_typed<TensorType::Q4_1>(m.epi, P, x, j, lane, wait);
    case TensorType::Q5_0: return matmul_typed<TensorType::Q5_0>(m.epi, P, x, j, lane, wait);
    case TensorType::Q8_0: return matmul_typed<TensorType::Q8_0>(m.epi, P, x, j, lane, wait);
    case TensorType::Q4_K: return matmul_typed<TensorType::Q4_K>(m.epi, P, x, j, lane, wait);
    case TensorType::Q5_K: return matmul_typed<TensorType::Q5_K>(m.epi, P, x, j, lane, wait);
    case TensorType::Q6_K: return matmul_typed<TensorType::Q6_K>(m.epi, P, x, j, lane, wait);
    default: return wait();  // the host admits none other
  }
}

// HD, GM: the attention phases' head_dim and group size (decode_attention_block's).
template <int HD, int GM>
__global__ void __launch_bounds__(kThreads, kPersistentBlocks)
    decode_persistent_kernel(const Phase* __restrict__ phases, int n, unsigned* bar, unsigned long long* trace) {
  extern __shared__ __align__(16) uint8_t stage[];
  const int lane = threadIdx.x % kWarpSize;
  const int64_t g = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  for (int i = 0; i < n; ++i) {
    const Phase& ph = phases[i];
    const unsigned target = unsigned(i) * gridDim.x;  // every block's arrivals from the phases before
    auto barrier = [&] { grid_wait(bar, target); };
    if (ph.kind == PhaseKind::matmul) {
      matmul_phase(ph.mm, g, lane, stage, barrier);
    } else if (ph.kind == PhaseKind::probe_barrier) {
      barrier();
    } else if (ph.kind == PhaseKind::probe_stage) {
      long long t[5];
      t[0] = clock64();
      barrier();
      t[1] = clock64();
      if (block_has_rows(ph.mm)) {
        stage_row(ph.mm, stage, [&](int k) {
          if (!trace) return;
          __syncthreads();
          t[k + 1] = clock64();
        });
        if (trace && threadIdx.x == 0) {
          for (int k = 0; k < 4; ++k) atomicAdd(trace + k, static_cast<unsigned long long>(t[k + 1] - t[k]));
          atomicAdd(trace + 4, 1ull);
        }
      }
    } else if (ph.kind == PhaseKind::attention) {
      barrier();
      attention_items<HD, GM>(ph.at);
    } else {
      const MergePhase& mg = ph.mg;
      barrier();
      for (int64_t h = blockIdx.x; h < mg.heads; h += gridDim.x) combine_head<HD>(mg.part, mg.chunks, mg.out, nullptr, nullptr, h);
    }
    grid_arrive(bar);
  }
}

using KernelFn = void (*)(const Phase*, int, unsigned*, unsigned long long*);

// The instantiations: the head_dim and group size of the llama shapes (a group's heads rounded up
// to a power of two, as attention_decode.cu's launch does).
KernelFn kernel_for(int hd, int gm) {
  if (hd == 64 && gm == 4) return decode_persistent_kernel<64, 4>;
  if (hd == 128 && gm == 4) return decode_persistent_kernel<128, 4>;
  return nullptr;
}

int group_heads(const AttentionShape& a) {  // GM of attention_decode.cu's launch_head_dim
  const int heads = std::min(a.n_head / a.n_kv, kMaxGroupHeads);
  return heads <= 1 ? 1 : heads <= 2 ? 2 : heads <= 4 ? 4 : 8;
}

}  // namespace

struct PersistentStep::Impl {
  std::vector<Phase> host;     // complete but for the matmul phases' warps, which upload assigns
  std::vector<Parts> parts;    // per matmul phase, in order: all its parts
  std::vector<size_t> mm_at;   // its index in host
  int hd = 0, gm = 0;
  int64_t max_k = 0;
  int grid = 0;
  size_t smem = 0;
  KernelFn kernel = nullptr;
  DeviceBuffer dev, bar, trace;  // trace: 4 sums of clocks and a count (StageTrace), when traced
};

PersistentStep::PersistentStep() : impl_(std::make_unique<Impl>()) {}
PersistentStep::~PersistentStep() = default;
PersistentStep::PersistentStep(PersistentStep&&) noexcept = default;
PersistentStep& PersistentStep::operator=(PersistentStep&&) noexcept = default;

std::string PersistentStep::unsupported(const PersistentMatmul& m) {
  if (m.parts.empty() || m.parts.size() > size_t(kMaxParts)) return "a matmul phase takes 1 to 4 weights";
  if (!m.x || reinterpret_cast<uintptr_t>(m.x) % 16) return "a matmul phase reads a 16-byte aligned row";
  if (reinterpret_cast<uintptr_t>(m.norm) % 16) return "a matmul phase's norm weights are not 16-byte aligned";
  if (m.K <= 0 || m.K % kQ8Block || m.K > 32768) return "a staged row is a multiple of 32 wide, at most 32768";
  for (const MatmulPart& p : m.parts) {
    if (!has_q8_kernel(p.type, m.K) || !p.w) return "a weight without an integer-dot kernel";
    if (p.y == m.x) return "a matmul writes the row it reads (every block stages it while others store)";
  }
  if (m.e != MatmulEpilogue::store && (m.parts.size() != 2 || m.parts[0].type != m.parts[1].type))
    return "gate and up of different types";
  return "";
}

std::string PersistentStep::unsupported(const PersistentAttention& p) {
  const AttentionShape& a = p.a;
  if (a.n_kv <= 0 || a.n_head % a.n_kv || a.head_dim != a.value_dim) return "an attention shape without the decode kernel";
  if (!kernel_for(a.head_dim, group_heads(a)))
    return "attention of head_dim " + std::to_string(a.head_dim) + " and " + std::to_string(a.n_head / a.n_kv) +
           " query heads a KV head (the kernel has 64 or 128, and 3 or 4)";
  if (p.kv.k_width % 8 || p.kv.v_width % 8 || reinterpret_cast<uintptr_t>(p.kv.k) % 16 ||
      reinterpret_cast<uintptr_t>(p.kv.v) % 16)
    return "KV rows that are not 16-byte aligned";
  if (p.chunks < 1 || p.chunks > kMaxDecodeChunks || (p.chunks > 1 && !p.scratch)) return "attention chunks without scratch";
  return "";
}

void PersistentStep::add(const PersistentMatmul& m) {
  if (const std::string why = unsupported(m); !why.empty()) cuda_invalid(("persistent step: " + why).c_str());
  int64_t rows = 0;
  Phase ph{PhaseKind::matmul, {}, {}, {}};
  ph.mm.epi = m.rope ? Epi::rope_kv : m.e != MatmulEpilogue::store ? Epi::gated : Epi::store;
  ph.mm.K = m.K;
  ph.mm.x = m.x;
  ph.mm.norm = m.norm;
  ph.mm.eps = m.eps;
  impl_->mm_at.push_back(impl_->host.size());
  impl_->host.push_back(ph);
  impl_->parts.push_back(make_parts(m.parts.data(), int(m.parts.size()), m.e, m.K, 1, {}, m.rope, &rows));
  impl_->max_k = std::max(impl_->max_k, m.K);
}

void PersistentStep::add(const PersistentAttention& p) {
  if (const std::string why = unsupported(p); !why.empty()) cuda_invalid(("persistent step: " + why).c_str());
  const int hd = p.a.head_dim, gm = group_heads(p.a);
  if (impl_->hd && (impl_->hd != hd || impl_->gm != gm)) cuda_invalid("persistent step: attentions of several shapes");
  impl_->hd = hd, impl_->gm = gm;
  Phase ph{PhaseKind::attention, {}, {}, {}};
  const int groups = p.a.n_kv * group_parts(p.a);  // one row
  ph.at = {p.a, p.kv, p.st, p.q, p.out, p.chunks > 1 ? p.scratch : nullptr, p.chunks, groups * p.chunks};
  impl_->host.push_back(ph);
  if (p.chunks > 1) {
    Phase mg{PhaseKind::merge, {}, {}, {}};
    mg.mg = {p.scratch, p.out, p.chunks, p.a.n_head};
    impl_->host.push_back(mg);
  }
}

void PersistentStep::upload(const PersistentLaunch& how) {
  Impl& m = *impl_;
  m.kernel = kernel_for(m.hd ? m.hd : 64, m.hd ? m.gm : 4);
  m.smem = stage_bytes(m.max_k);
  LOOM_CUDA_CHECK(cudaFuncSetAttribute(m.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(m.smem)));
  int blocks = 0;
  LOOM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, m.kernel, kThreads, m.smem));
  if (blocks < 1) cuda_invalid("persistent step: the kernel does not fit a multiprocessor");
  if (how.blocks_per_sm > 0) blocks = std::min(blocks, how.blocks_per_sm);
  m.grid = blocks * device_sms();
  const double warps = double(m.grid) * kWarpsPerBlock;
  for (size_t i = 0; i < m.parts.size(); ++i) {
    const Parts& P = m.parts[i];
    MatmulPhase& ph = m.host[m.mm_at[i]].mm;
    ph.n_groups = 0;  // a second upload assigns them afresh
    int64_t end = 0;
    auto add_group = [&](Parts& group) {
      end += group.warps;
      ph.groups[ph.n_groups] = group;
      ph.group_end[ph.n_groups++] = end;
    };
    if (ph.epi == Epi::gated) {
      Parts group = P;
      assign_warps<1, Epi::gated>(group, warps);
      add_group(group);
    } else {  // a group a weight type, each on its share of the warps (as the launches split them)
      for_each_type(P, [&](Parts same, double share) {
        if (ph.epi == Epi::rope_kv) assign_warps<1, Epi::rope_kv>(same, warps * share);
        else assign_warps<1, Epi::store>(same, warps * share);
        add_group(same);
      });
    }
    if (end > int64_t(warps)) cuda_invalid("persistent step: a matmul needs more warps than the grid has");
    m.host[m.mm_at[i]].kind = how.probe == PersistentProbe::full      ? PhaseKind::matmul
                              : how.probe == PersistentProbe::barrier ? PhaseKind::probe_barrier
                                                                      : PhaseKind::probe_stage;
  }
  m.dev = DeviceBuffer(m.host.size() * sizeof(Phase));
  LOOM_CUDA_CHECK(cudaMemcpy(m.dev.get(), m.host.data(), m.dev.bytes(), cudaMemcpyHostToDevice));
  m.bar = DeviceBuffer(sizeof(unsigned));
  m.trace = DeviceBuffer();
  if (how.trace) {
    m.trace = DeviceBuffer(5 * sizeof(unsigned long long));
    LOOM_CUDA_CHECK(cudaMemset(m.trace.get(), 0, m.trace.bytes()));
  }
}

void PersistentStep::launch(cudaStream_t s) const {
  const Impl& m = *impl_;
  if (!m.dev.bytes()) cuda_invalid("persistent step: launched before upload");
  LOOM_CUDA_CHECK(cudaMemsetAsync(m.bar.get(), 0, sizeof(unsigned), s));
  // Plainly (no programmatic launch): its blocks read the embedding's output without a wait.
  m.kernel<<<unsigned(m.grid), kThreads, m.smem, s>>>(m.dev.get<Phase>(), int(m.host.size()), m.bar.get<unsigned>(),
                                                       m.trace.bytes() ? m.trace.get<unsigned long long>() : nullptr);
  LOOM_CUDA_CHECK_LAUNCH();
}

StageTrace PersistentStep::stage_trace() const {
  const Impl& m = *impl_;
  if (!m.trace.bytes()) cuda_invalid("persistent step: stage_trace without a traced upload");
  unsigned long long sums[5];
  LOOM_CUDA_CHECK(cudaMemcpy(sums, m.trace.get(), sizeof sums, cudaMemcpyDeviceToHost));
  int dev = 0, khz = 0;
  LOOM_CUDA_CHECK(cudaGetDevice(&dev));
  LOOM_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev));
  StageTrace t;
  t.phases = static_cast<long long>(sums[4]);
  if (!t.phases) return t;
  const auto us = [&](int k) { return double(sums[k]) / double(t.phases) / (double(khz) * 1e-3); };
  t.barrier_us = us(0), t.load_us = us(1), t.sum_us = us(2), t.quantize_us = us(3);
  return t;
}

}  // namespace loom::backend::cuda
