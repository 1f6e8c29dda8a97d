// Quantized matrix-vector products for decode and small batches: one warp per weight row;
// lane l dequantizes elements [it*256 + 8l, +8) of the row in each pass (dequant.cuh) and
// dots them with up to kMaxRows activation rows, so the weight bytes are read once per pass.
// Partial sums meet in a warp reduction.
#include "backend/cuda/check.h"
#include "backend/cuda/dequant.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/warp.cuh"

namespace loom::backend::cuda {

namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kMaxRows = 8;
constexpr int kPassElems = kWarpSize * 8;

template <TensorType T, int R>
__global__ void __launch_bounds__(kWarpsPerBlock * kWarpSize)
    matmul_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t N, int64_t K, const float* __restrict__ x,
                  int64_t ldx, float* __restrict__ y, int64_t ldy) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t n = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (n >= N) return;
  const uint8_t* row = w + size_t(n) * row_bytes;
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.f;
#pragma unroll 2
  for (int64_t e = int64_t(lane) * 8; e < K; e += kPassElems) {
    float wv[8];
    dequant8<T>(row, e, wv);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float4* xr = reinterpret_cast<const float4*>(x + r * ldx + e);
      const float4 a = xr[0], b = xr[1];
      acc[r] += wv[0] * a.x + wv[1] * a.y + wv[2] * a.z + wv[3] * a.w + wv[4] * b.x + wv[5] * b.y + wv[6] * b.z +
                wv[7] * b.w;
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float v = warp_sum(acc[r]);
    if (lane == 0) y[r * ldy + n] = v;
  }
}

template <TensorType T>
__global__ void embed_kernel(const uint8_t* __restrict__ table, size_t row_bytes, int64_t n_rows, int64_t K,
                             const int32_t* __restrict__ ids, float* __restrict__ out) {
  const int64_t r = blockIdx.x;
  const int32_t id = ids[r];
  float* o = out + r * K;
  for (int64_t e = int64_t(threadIdx.x) * 8; e < K; e += int64_t(blockDim.x) * 8) {
    float wv[8];
    if (id < 0 || id >= n_rows) {
#pragma unroll
      for (int i = 0; i < 8; ++i) wv[i] = __int_as_float(0x7fc00000);
    } else {
      dequant8<T>(table + size_t(id) * row_bytes, e, wv);
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) o[e + i] = wv[i];
  }
}

template <TensorType T, int R>
void launch_rows(const uint8_t* w, size_t rb, int64_t N, int64_t K, const float* x, int64_t ldx, float* y,
                 int64_t ldy, cudaStream_t s) {
  const dim3 grid(unsigned((N + kWarpsPerBlock - 1) / kWarpsPerBlock));
  matmul_kernel<T, R><<<grid, kWarpsPerBlock * kWarpSize, 0, s>>>(w, rb, N, K, x, ldx, y, ldy);
  LOOM_CUDA_CHECK_LAUNCH();
}

template <TensorType T>
void launch_matmul(const uint8_t* w, size_t rb, int64_t N, int64_t K, const float* x, int64_t ldx, int64_t rows,
                   float* y, int64_t ldy, cudaStream_t s) {
  for (int64_t r0 = 0; r0 < rows; r0 += kMaxRows) {
    const int64_t r = rows - r0 < kMaxRows ? rows - r0 : kMaxRows;
    const float* xr = x + r0 * ldx;
    float* yr = y + r0 * ldy;
    switch (r) {
      case 1: launch_rows<T, 1>(w, rb, N, K, xr, ldx, yr, ldy, s); break;
      case 2: launch_rows<T, 2>(w, rb, N, K, xr, ldx, yr, ldy, s); break;
      case 3: launch_rows<T, 3>(w, rb, N, K, xr, ldx, yr, ldy, s); break;
      case 4: launch_rows<T, 4>(w, rb, N, K, xr, ldx, yr, ldy, s); break;
      case 5: launch_rows<T, 5>(w, rb, N, K, xr, ldx, yr, ldy, s); break;
      case 6: launch_rows<T, 6>(w, rb, N, K, xr, ldx, yr, ldy, s); break;
      case 7: launch_rows<T, 7>(w, rb, N, K, xr, ldx, yr, ldy, s); break;
      default: launch_rows<T, 8>(w, rb, N, K, xr, ldx, yr, ldy, s); break;
    }
  }
}

template <TensorType T>
void launch_embed(const uint8_t* table, size_t rb, int64_t n_rows, int64_t K, const int32_t* ids, int64_t rows,
                  float* out, cudaStream_t s) {
  if (rows <= 0) return;
  embed_kernel<T><<<unsigned(rows), 128, 0, s>>>(table, rb, n_rows, K, ids, out);
  LOOM_CUDA_CHECK_LAUNCH();
}

// One table from weight type to its instantiations, so a type is added in one place.
template <typename F>
bool with_type(TensorType t, F&& f) {
  switch (t) {
    case TensorType::F32: f.template operator()<TensorType::F32>(); return true;
    case TensorType::F16: f.template operator()<TensorType::F16>(); return true;
    case TensorType::BF16: f.template operator()<TensorType::BF16>(); return true;
    case TensorType::Q4_0: f.template operator()<TensorType::Q4_0>(); return true;
    case TensorType::Q4_1: f.template operator()<TensorType::Q4_1>(); return true;
    case TensorType::Q5_0: f.template operator()<TensorType::Q5_0>(); return true;
    case TensorType::Q5_1: f.template operator()<TensorType::Q5_1>(); return true;
    case TensorType::Q8_0: f.template operator()<TensorType::Q8_0>(); return true;
    case TensorType::Q4_K: f.template operator()<TensorType::Q4_K>(); return true;
    case TensorType::Q5_K: f.template operator()<TensorType::Q5_K>(); return true;
    case TensorType::Q6_K: f.template operator()<TensorType::Q6_K>(); return true;
    default: return false;
  }
}

struct Nothing {
  template <TensorType T> void operator()() const {}
};

struct MatmulLaunch {
  const uint8_t* w; size_t rb; int64_t N, K; const float* x; int64_t ldx, rows; float* y; int64_t ldy; cudaStream_t s;
  template <TensorType T> void operator()() const { launch_matmul<T>(w, rb, N, K, x, ldx, rows, y, ldy, s); }
};

struct EmbedLaunch {
  const uint8_t* table; size_t rb; int64_t n_rows, K; const int32_t* ids; int64_t rows; float* out; cudaStream_t s;
  template <TensorType T> void operator()() const { launch_embed<T>(table, rb, n_rows, K, ids, rows, out, s); }
};

}  // namespace

bool has_weight_kernel(TensorType t) { return with_type(t, Nothing{}); }

void matmul_rows(TensorType t, const uint8_t* w, size_t row_bytes, int64_t N, int64_t K, const float* x, int64_t ldx,
                 int64_t rows, float* y, int64_t ldy, cudaStream_t s) {
  if (K % 8 != 0 || ldx % 4 != 0) cuda_invalid("matmul_rows: K must be a multiple of 8 and ldx of 4");
  if (!with_type(t, MatmulLaunch{w, row_bytes, N, K, x, ldx, rows, y, ldy, s}))
    cuda_invalid("matmul_rows: no kernel for this weight type");
}

void embed_rows(TensorType t, const uint8_t* table, size_t row_bytes, int64_t n_rows, int64_t K, const int32_t* ids,
                int64_t rows, float* out, cudaStream_t s) {
  if (!with_type(t, EmbedLaunch{table, row_bytes, n_rows, K, ids, rows, out, s}))
    cuda_invalid("embed_rows: no kernel for this table type");
}

}  // namespace loom::backend::cuda
