// Causal grouped-query attention over the KV cache, as llama.cpp's graph computes it with flash
// attention off:
//   s_j = q·k_j; s_j = softcap·tanh(s_j/softcap) when softcap > 0; s_j *= scale;
//   w = softmax(s) over the visible keys; out = Σ w_j v_j,
// the dots, exp and sums associated as ggml-cpu's kernels do (quant/ggml_order.h: RowDot,
// SoftmaxSum, expf), cell j of the cache being position j of the sequence.
// (llama.cpp caps the raw q·k and folds the scale into soft_max_ext, in that order.) With an
// f16 cache, q and the normalized w are rounded to f16 before they meet the f16 keys/values.
// A query at position q of sequence s sees the keys of s at positions p ≤ q, and with a
// sliding window W > 0 only those with q - p < W (llama_hparams::is_masked_swa, standard SWA).
// This step's keys and values are written into the cache first, so a prefill attends to itself.
//
// A q8_0 cache is computed as llama.cpp computes it: llama.cpp needs flash attention for a
// quantized V cache, so this is ggml-cpu's flash_attn_ext (one chunk over all cells; its
// split-KV decode path takes only f16/f32 caches): rows stored by quantize_row_q8_0, q
// quantized the same way, s_j = vec_dot_q8_0_q8_0(k_j, q) (quant::ggml::dot), and an online
// softmax in cell order with libm expf: M, S and the f32 accumulator VKQ rescaled by
// expf(M_old - M) on a new max, VKQ = fma(dequantize(v_j), expf(s_j - M), VKQ), out = VKQ / S.
// One difference is kept on purpose: the soft cap stays the op's (cap the raw q·k, then
// scale); llama.cpp's flash attention caps after scaling, a different function when scale != 1.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/reference_kernels.h"
#include "common/error.h"
#include "quant/blocks.h"
#include "quant/fp16.h"
#include "quant/ggml_order.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace loom::backend::cpu {

namespace {

void to_f16(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
#endif
  for (; i < n; ++i) dst[i] = loom::quant::fp32_to_fp16(src[i]);
}

void from_f16(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
#endif
  for (; i < n; ++i) dst[i] = loom::quant::fp16_to_fp32(src[i]);
}

void store_row(KvElem e, const float* src, void* dst, int64_t n) {
  if (e == KvElem::f32) std::memcpy(dst, src, n * sizeof(float));
  else if (e == KvElem::f16) to_f16(src, static_cast<uint16_t*>(dst), n);
  else loom::quant::ggml::quantize_activations(gguf::TensorType::Q8_0, src, dst, n);
}

// ggml's dequantize_row_q8_0 over n elements (whole blocks) from `src`.
void from_q8_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const loom::quant::BlockQ8_0*>(src);
  for (int64_t i = 0; i < n / 32; ++i) {
    const float d = loom::quant::fp16_to_fp32(b[i].d);
    for (int j = 0; j < 32; ++j) dst[i * 32 + j] = float(b[i].qs[j]) * d;
  }
}

// Output of query head h (row qh) over positions [lo, p] with a q8_0 cache (see the header).
void attend_q8_0(const HostKvView& kv, int layer, int32_t s, int32_t lo, int32_t p, const float* qh, int64_t g, int64_t hd,
                 int64_t vd, float scale, float softcap, float* o) {
  const size_t k_head = kv_row_bytes(KvElem::q8_0, g * hd), v_head = kv_row_bytes(KvElem::q8_0, g * vd);
  std::vector<loom::quant::BlockQ8_0> qq(size_t(hd / 32));
  loom::quant::ggml::quantize_activations(gguf::TensorType::Q8_0, qh, qq.data(), hd);
  std::vector<float> v32(size_t(vd), 0.f);
  std::fill(o, o + vd, 0.f);
  float M = -INFINITY, S = 0.f;
  for (int32_t j = lo; j <= p; ++j) {
    const uint8_t* kr = kv.k_row(layer, s, j) + k_head;
    float sc = loom::quant::ggml::dot(gguf::TensorType::Q8_0, kr, qq.data(), hd, 1);
    if (softcap > 0) sc = std::tanh(sc / softcap) * softcap;
    sc *= scale;
    float ms = 1.f, vs = 1.f;
    if (sc > M) {
      const float m_old = M;
      M = sc;
      ms = std::exp(m_old - M);
      for (int64_t c = 0; c < vd; ++c) o[c] *= ms;
    } else {
      vs = std::exp(sc - M);
    }
    from_q8_0(static_cast<const uint8_t*>(kv.v_row(layer, s, j)) + v_head, v32.data(), vd);
    for (int64_t c = 0; c < vd; ++c) o[c] = std::fma(v32[c], vs, o[c]);
    S = S * ms + vs;
  }
  const float inv = S == 0.f ? 0.f : 1.f / S;
  for (int64_t c = 0; c < vd; ++c) o[c] *= inv;
}

void load_row(KvElem e, const void* src, float* dst, int64_t n) {
  if (e == KvElem::f32) std::memcpy(dst, src, n * sizeof(float));
  else from_f16(static_cast<const uint16_t*>(src), dst, n);
}

}  // namespace

void kernel_attention(KernelArgs& a) {
  for (int i = 0; i < 4; ++i)
    if (!a.in[i]) loom::fail("%{}: attention operands must be values", a.op.result);
  const Tensor &q = *a.in[0], &k = *a.in[1], &v = *a.in[2], &pos = *a.in[3];
  const auto& at = a.op.attrs;
  const int layer = int(ir::attr_int(at, "layer"));
  const int64_t n_head = ir::attr_int(at, "n_head"), n_kv = ir::attr_int(at, "n_kv_head");
  const int64_t hd = ir::attr_int(at, "head_dim"), vd = ir::attr_int(at, "value_dim");
  const float scale = float(ir::attr_float(at, "scale"));
  const int64_t window = ir::attr_int(at, "window", 0);
  const float softcap = float(ir::attr_float(at, "softcap", 0.0));
  if (n_kv <= 0 || n_head % n_kv) loom::fail("%{}: n_head {} is not a multiple of n_kv_head {}", a.op.result, n_head, n_kv);
  if (q.cols != n_head * hd || k.cols != n_kv * hd || v.cols != n_kv * vd || a.out.cols != n_head * vd)
    loom::fail("%{}: q/k/v/result widths {}/{}/{}/{} do not match heads {}x{}, {}x{}/{}", a.op.result, q.cols, k.cols,
               v.cols, a.out.cols, n_head, hd, n_kv, hd, vd);
  const int64_t T = q.rows;
  if (int64_t(a.ctx.batch.size()) != T) loom::fail("%{}: attention after rows were dropped", a.op.result);
  const HostKvView& kv = a.ctx.kv;
  const KvElem elem = kv.elem();
  if (elem == KvElem::q8_0 && (hd % 32 || vd % 32))
    loom::fail("%{}: a q8_0 KV cache needs head widths that are multiples of 32 (head_dim {}, value_dim {}); use --kv-type f16",
               a.op.result, hd, vd);

  for (int64_t t = 0; t < T; ++t) {
    const int32_t s = a.ctx.batch.seq(t);
    store_row(elem, k.f.data() + t * k.cols, kv.k_row(layer, s, pos.i[t]), k.cols);
    store_row(elem, v.f.data() + t * v.cols, kv.v_row(layer, s, pos.i[t]), v.cols);
  }

  a.out.f.assign(T * a.out.cols, 0.f);
  const int64_t group = n_head / n_kv;
  const bool batched = T >= 2;  // llama.cpp: tinyBLAS for a ubatch of >= 2 tokens, vec_dot for one
  a.ctx.pool.parallel_for(T, [&](int64_t b, int64_t e, int) {
    std::vector<float> keys, vals, w, qr;
    for (int64_t t = b; t < e; ++t) {
      const int32_t s = a.ctx.batch.seq(t), p = pos.i[t];
      const int32_t lo = window > 0 ? std::max<int64_t>(0, int64_t(p) - window + 1) : 0;
      const int64_t n = p - lo + 1;
      if (elem == KvElem::q8_0) {
        for (int64_t h = 0; h < n_head; ++h)
          attend_q8_0(kv, layer, s, lo, p, q.f.data() + t * q.cols + h * hd, h / group, hd, vd, scale, softcap,
                      a.out.f.data() + t * a.out.cols + h * vd);
        continue;
      }
      keys.resize(n * k.cols);
      vals.resize(n * v.cols);
      w.resize(n);
      for (int64_t j = 0; j < n; ++j) {
        load_row(elem, kv.k_row(layer, s, lo + int32_t(j)), keys.data() + j * k.cols, k.cols);
        load_row(elem, kv.v_row(layer, s, lo + int32_t(j)), vals.data() + j * v.cols, v.cols);
      }
      for (int64_t h = 0; h < n_head; ++h) {
        // With an f16 cache, ggml (flash attention off) multiplies the f16 keys and values by
        // operands rounded to f16: the query for q·k and the normalized weights for Σ w v.
        qr.assign(q.f.data() + t * q.cols + h * hd, q.f.data() + t * q.cols + (h + 1) * hd);
        if (elem == KvElem::f16)
          for (float& x : qr) x = loom::quant::round_to_fp16(x);
        const float* qh = qr.data();
        const int64_t g = h / group;
        float mx = -INFINITY;
        for (int64_t j = 0; j < n; ++j) {
          const float* kj = keys.data() + j * k.cols + g * hd;
          loom::quant::ggml::RowDot d(batched, hd);
          for (int64_t c = 0; c < hd; ++c) d.add(c, kj[c], qh[c]);
          float sc = d.sum();
          if (softcap > 0) sc = std::tanh(sc / softcap) * softcap;
          sc *= scale;
          w[j] = sc;
          mx = std::max(mx, sc);
        }
        loom::quant::ggml::SoftmaxSum total;
        for (int64_t j = 0; j < n; ++j) {
          w[j] = loom::quant::ggml::expf(w[j] - mx);
          total.add(lo + j, w[j]);
        }
        const float inv = float(1.0 / total.sum());
        for (int64_t j = 0; j < n; ++j) w[j] = elem == KvElem::f16 ? loom::quant::round_to_fp16(w[j] * inv) : w[j] * inv;
        float* o = a.out.f.data() + t * a.out.cols + h * vd;
        // The cells of the cache llama.cpp's Σ w v runs over: the used ones padded to 256.
        const int64_t cells = (int64_t(p) + 1 + 255) / 256 * 256;
        for (int64_t c = 0; c < vd; ++c) {
          loom::quant::ggml::RowDot d(batched, cells);
          for (int64_t j = 0; j < n; ++j) d.add(lo + j, w[j], vals[j * v.cols + g * vd + c]);
          o[c] = d.sum();
        }
      }
    }
  });
}

}  // namespace loom::backend::cpu
