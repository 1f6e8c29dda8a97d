// x8 layouts (packed.h): portable packing/unpacking, and the dispatch of gemm_packed.
#include "quant/simd/packed.h"

#include <cstring>
#include <vector>

#include "common/error.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "quant/simd/isa.h"
#include "quant/simd/kernels.h"

namespace loom::quant::simd {
namespace {

using gguf::TensorType;

// One stored block of one row in a format-neutral form: unsigned weights u, scales, mins.
struct Canon {
  uint8_t u[256];
  uint8_t sc[16];
  uint8_t mn[8];
  Half d, dmin;
};

void decode(TensorType t, const uint8_t* blk, Canon& c) {
  switch (t) {
    case TensorType::Q8_0: {
      const auto& b = *reinterpret_cast<const BlockQ8_0*>(blk);
      c.d = b.d;
      for (int i = 0; i < 32; ++i) c.u[i] = uint8_t(b.qs[i]) ^ 0x80;
      break;
    }
    case TensorType::Q4_0: {
      const auto& b = *reinterpret_cast<const BlockQ4_0*>(blk);
      c.d = b.d;
      for (int j = 0; j < 16; ++j) c.u[j] = b.qs[j] & 0x0f, c.u[j + 16] = b.qs[j] >> 4;
      break;
    }
    case TensorType::Q4_1: {
      const auto& b = *reinterpret_cast<const BlockQ4_1*>(blk);
      c.d = b.d;
      c.dmin = b.m;
      for (int j = 0; j < 16; ++j) c.u[j] = b.qs[j] & 0x0f, c.u[j + 16] = b.qs[j] >> 4;
      break;
    }
    case TensorType::Q5_0: {
      const auto& b = *reinterpret_cast<const BlockQ5_0*>(blk);
      uint32_t qh;
      std::memcpy(&qh, b.qh, 4);
      c.d = b.d;
      for (int j = 0; j < 16; ++j) {
        c.u[j] = uint8_t((b.qs[j] & 0x0f) | (((qh >> j) & 1) << 4));
        c.u[j + 16] = uint8_t((b.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
      }
      break;
    }
    case TensorType::Q4_K: {
      const auto& b = *reinterpret_cast<const BlockQ4_K*>(blk);
      c.d = b.d;
      c.dmin = b.dmin;
      const uint8_t* q = b.scales;
      for (int j = 0; j < 8; ++j) {
        if (j < 4) {
          c.sc[j] = q[j] & 63;
          c.mn[j] = q[j + 4] & 63;
        } else {
          c.sc[j] = uint8_t((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
          c.mn[j] = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
        }
      }
      for (int jj = 0; jj < 4; ++jj)
        for (int l = 0; l < 32; ++l) {
          c.u[64 * jj + l] = b.qs[32 * jj + l] & 0x0f;
          c.u[64 * jj + 32 + l] = b.qs[32 * jj + l] >> 4;
        }
      break;
    }
    case TensorType::Q6_K: {
      const auto& b = *reinterpret_cast<const BlockQ6_K*>(blk);
      c.d = b.d;
      for (int s = 0; s < 16; ++s) c.sc[s] = uint8_t(b.scales[s]);
      for (int n = 0; n < 2; ++n)
        for (int l = 0; l < 32; ++l) {
          const uint8_t* ql = b.ql + 64 * n;
          const uint8_t h = b.qh[32 * n + l];
          uint8_t* u = c.u + 128 * n;
          u[l] = uint8_t((ql[l] & 0x0f) | ((h & 3) << 4));
          u[l + 32] = uint8_t((ql[l + 32] & 0x0f) | (((h >> 2) & 3) << 4));
          u[l + 64] = uint8_t((ql[l] >> 4) | (((h >> 4) & 3) << 4));
          u[l + 96] = uint8_t((ql[l + 32] >> 4) | (((h >> 6) & 3) << 4));
        }
      break;
    }
    default: fail("quant::simd: no x8 layout for {}", gguf::type_name(t));
  }
}

void encode(TensorType t, const Canon& c, uint8_t* blk) {
  switch (t) {
    case TensorType::Q8_0: {
      auto& b = *reinterpret_cast<BlockQ8_0*>(blk);
      b.d = c.d;
      for (int i = 0; i < 32; ++i) b.qs[i] = int8_t(c.u[i] ^ 0x80);
      break;
    }
    case TensorType::Q4_0: {
      auto& b = *reinterpret_cast<BlockQ4_0*>(blk);
      b.d = c.d;
      for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t((c.u[j] & 0x0f) | ((c.u[j + 16] & 0x0f) << 4));
      break;
    }
    case TensorType::Q4_1: {
      auto& b = *reinterpret_cast<BlockQ4_1*>(blk);
      b.d = c.d;
      b.m = c.dmin;
      for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t((c.u[j] & 0x0f) | ((c.u[j + 16] & 0x0f) << 4));
      break;
    }
    case TensorType::Q5_0: {
      auto& b = *reinterpret_cast<BlockQ5_0*>(blk);
      b.d = c.d;
      uint32_t qh = 0;
      for (int j = 0; j < 16; ++j) {
        b.qs[j] = uint8_t((c.u[j] & 0x0f) | ((c.u[j + 16] & 0x0f) << 4));
        qh |= uint32_t(c.u[j] >> 4) << j;
        qh |= uint32_t(c.u[j + 16] >> 4) << (j + 16);
      }
      std::memcpy(b.qh, &qh, 4);
      break;
    }
    case TensorType::Q4_K: {
      auto& b = *reinterpret_cast<BlockQ4_K*>(blk);
      b.d = c.d;
      b.dmin = c.dmin;
      uint8_t* q = b.scales;
      for (int j = 0; j < 4; ++j) {
        q[j] = uint8_t(c.sc[j] | ((c.sc[j + 4] >> 4) << 6));
        q[j + 4] = uint8_t(c.mn[j] | ((c.mn[j + 4] >> 4) << 6));
        q[j + 8] = uint8_t((c.sc[j + 4] & 0x0f) | ((c.mn[j + 4] & 0x0f) << 4));
      }
      for (int jj = 0; jj < 4; ++jj)
        for (int l = 0; l < 32; ++l) b.qs[32 * jj + l] = uint8_t(c.u[64 * jj + l] | (c.u[64 * jj + 32 + l] << 4));
      break;
    }
    case TensorType::Q6_K: {
      auto& b = *reinterpret_cast<BlockQ6_K*>(blk);
      b.d = c.d;
      for (int s = 0; s < 16; ++s) b.scales[s] = int8_t(c.sc[s]);
      for (int n = 0; n < 2; ++n)
        for (int l = 0; l < 32; ++l) {
          uint8_t* ql = b.ql + 64 * n;
          const uint8_t* u = c.u + 128 * n;
          ql[l] = uint8_t((u[l] & 0x0f) | ((u[l + 64] & 0x0f) << 4));
          ql[l + 32] = uint8_t((u[l + 32] & 0x0f) | ((u[l + 96] & 0x0f) << 4));
          b.qh[32 * n + l] = uint8_t((u[l] >> 4) | ((u[l + 32] >> 4) << 2) | ((u[l + 64] >> 4) << 4) | ((u[l + 96] >> 4) << 6));
        }
      break;
    }
    default: fail("quant::simd: no x8 layout for {}", gguf::type_name(t));
  }
}

// 8 stored blocks; Q4_K's scales and mins are unpacked to bytes (8 x 12 -> 128: +2.8%).
size_t group_block_bytes(TensorType t) { return t == TensorType::Q4_K ? 1184 : size_t(kPackRows) * size_t(block_bytes(t)); }

// Offset of weight e (< 32) of a 32-weight chunk in a [j=0..3][r][4] nibble area: low nibble
// for e in 4j..4j+3, high nibble for e in 16+4j..16+4j+3.
inline size_t nib_off(int r, int e) { return size_t(((e & 15) >> 2) * 32 + r * 4 + (e & 3)); }
inline int nib_shift(int e) { return e >= 16 ? 4 : 0; }

// Canonical blocks of 8 rows <-> one group block. `to_group` selects the direction.
void group_block(TensorType t, Canon* c, uint8_t* g, bool to_group) {
  auto put16 = [&](size_t off, Half Canon::*f) {  // d[8] style fields
    for (int r = 0; r < 8; ++r) {
      if (to_group) std::memcpy(g + off + 2 * r, &(c[r].*f), 2);
      else std::memcpy(&(c[r].*f), g + off + 2 * r, 2);
    }
  };
  auto nib = [&](uint8_t* area, int r, int e, uint8_t& u) {  // 4-bit value in a nibble area
    uint8_t& byte = area[nib_off(r, e)];
    const int sh = nib_shift(e);
    if (to_group) byte = uint8_t((byte & ~(0x0f << sh)) | ((u & 0x0f) << sh));
    else u = uint8_t((u & ~0x0f) | ((byte >> sh) & 0x0f));
  };
  if (to_group) std::memset(g, 0, group_block_bytes(t));
  else
    for (int r = 0; r < 8; ++r) std::memset(c[r].u, 0, sizeof c[r].u);
  switch (t) {
    case TensorType::Q8_0:
      put16(0, &Canon::d);
      for (int r = 0; r < 8; ++r)
        for (int e = 0; e < 32; ++e) {
          uint8_t& b = g[16 + (e >> 2) * 32 + r * 4 + (e & 3)];
          if (to_group) b = c[r].u[e];
          else c[r].u[e] = b;
        }
      break;
    case TensorType::Q4_0:
    case TensorType::Q4_1:
      put16(0, &Canon::d);
      if (t == TensorType::Q4_1) put16(16, &Canon::dmin);
      for (int r = 0; r < 8; ++r)
        for (int e = 0; e < 32; ++e) nib(g + (t == TensorType::Q4_1 ? 32 : 16), r, e, c[r].u[e]);
      break;
    case TensorType::Q5_0:
      put16(0, &Canon::d);
      for (int r = 0; r < 8; ++r)
        for (int e = 0; e < 32; ++e) {
          nib(g + 48, r, e, c[r].u[e]);
          uint8_t& m = g[16 + (e >> 2) * 4 + (4 * r + (e & 3)) / 8];
          const int bit = (4 * r + (e & 3)) % 8;
          if (to_group) m = uint8_t(m | ((c[r].u[e] >> 4) << bit));
          else c[r].u[e] = uint8_t(c[r].u[e] | (((m >> bit) & 1) << 4));
        }
      break;
    case TensorType::Q4_K:
      put16(0, &Canon::d);
      put16(16, &Canon::dmin);
      for (int r = 0; r < 8; ++r) {
        for (int s = 0; s < 8; ++s) {
          uint8_t& sb = g[32 + s * 8 + r];
          uint8_t& mb = g[96 + (s / 2) * 16 + r * 2 + (s & 1)];
          if (to_group) sb = c[r].sc[s], mb = c[r].mn[s];
          else c[r].sc[s] = sb, c[r].mn[s] = mb;
        }
        for (int e = 0; e < 256; ++e) nib(g + 160 + (e / 32) * 128, r, e % 32, c[r].u[e]);
      }
      break;
    case TensorType::Q6_K:
      put16(0, &Canon::d);
      for (int r = 0; r < 8; ++r) {
        for (int s = 0; s < 16; ++s) {
          uint8_t& sb = g[16 + s * 8 + r];
          if (to_group) sb = c[r].sc[s];
          else c[r].sc[s] = sb;
        }
        for (int e = 0; e < 256; ++e) {
          const int ch = e / 32, w = e % 32;
          nib(g + 144 + ch * 128, r, w, c[r].u[e]);
          // top 2 bits: area h = w/16, field f = (w%16)/4
          uint8_t& hb = g[1168 + ch * 64 + (w / 16) * 32 + r * 4 + (w & 3)];
          const int sh = 2 * ((w % 16) / 4);
          if (to_group) hb = uint8_t(hb | ((c[r].u[e] >> 4) << sh));
          else c[r].u[e] = uint8_t(c[r].u[e] | (((hb >> sh) & 3) << 4));
        }
      }
      break;
    default: fail("quant::simd: no x8 layout for {}", gguf::type_name(t));
  }
}

// group_block(.., to_group = true) without its per-element generality: the load-time path.
// The round-trip test checks it against group_block's unpacking.
void pack_group_block(TensorType t, const Canon* c, uint8_t* g) {
  auto put_d = [&](size_t off, Half Canon::*f) {
    for (int r = 0; r < 8; ++r) std::memcpy(g + off + 2 * r, &(c[r].*f), 2);
  };
  // 32 weights at u -> the [j][r][4] nibble area `a` (row r), from the low 4 bits of u.
  auto nibbles = [](uint8_t* a, int r, const uint8_t* u) {
    for (int j = 0; j < 4; ++j)
      for (int p = 0; p < 4; ++p) a[32 * j + 4 * r + p] = uint8_t((u[4 * j + p] & 0x0f) | ((u[16 + 4 * j + p] & 0x0f) << 4));
  };
  switch (t) {
    case TensorType::Q8_0:
      put_d(0, &Canon::d);
      for (int r = 0; r < 8; ++r)
        for (int q = 0; q < 8; ++q) std::memcpy(g + 16 + 32 * q + 4 * r, c[r].u + 4 * q, 4);
      break;
    case TensorType::Q4_0:
    case TensorType::Q4_1:
      put_d(0, &Canon::d);
      if (t == TensorType::Q4_1) put_d(16, &Canon::dmin);
      for (int r = 0; r < 8; ++r) nibbles(g + (t == TensorType::Q4_1 ? 32 : 16), r, c[r].u);
      break;
    case TensorType::Q5_0:
      put_d(0, &Canon::d);
      std::memset(g + 16, 0, 32);
      for (int r = 0; r < 8; ++r) {
        nibbles(g + 48, r, c[r].u);
        for (int e = 0; e < 32; ++e) g[16 + (e >> 2) * 4 + (4 * r + (e & 3)) / 8] |= uint8_t((c[r].u[e] >> 4) << ((4 * r + (e & 3)) % 8));
      }
      break;
    case TensorType::Q4_K:
      put_d(0, &Canon::d);
      put_d(16, &Canon::dmin);
      for (int r = 0; r < 8; ++r) {
        for (int s = 0; s < 8; ++s) {
          g[32 + s * 8 + r] = c[r].sc[s];
          g[96 + (s / 2) * 16 + r * 2 + (s & 1)] = c[r].mn[s];
        }
        for (int s = 0; s < 8; ++s) nibbles(g + 160 + 128 * s, r, c[r].u + 32 * s);
      }
      break;
    case TensorType::Q6_K:
      put_d(0, &Canon::d);
      for (int r = 0; r < 8; ++r) {
        for (int s = 0; s < 16; ++s) g[16 + s * 8 + r] = c[r].sc[s];
        for (int ch = 0; ch < 8; ++ch) {
          const uint8_t* u = c[r].u + 32 * ch;
          nibbles(g + 144 + 128 * ch, r, u);
          for (int h = 0; h < 2; ++h)
            for (int p = 0; p < 4; ++p) {
              uint8_t b = 0;
              for (int f = 0; f < 4; ++f) b = uint8_t(b | ((u[16 * h + 4 * f + p] >> 4) << (2 * f)));
              g[1168 + 64 * ch + 32 * h + 4 * r + p] = b;
            }
        }
      }
      break;
    default: fail("quant::simd: no x8 layout for {}", gguf::type_name(t));
  }
}

// The 32-element types without the canonical round trip: their group blocks are 4-byte pieces
// of the stored blocks (nibble bytes as stored, Q8_0 bytes biased, Q5_0's fifth bits four per
// row into each mask word). Packing is most of a small model's start-up on hosts that use the
// x8 layout; the round-trip test checks this path against group_block's unpacking. False for
// the other types.
bool pack_legacy_rows(TensorType t, const uint8_t* w, size_t w_row_bytes, int64_t n_rows, int64_t k, uint8_t* out) {
  if (t != TensorType::Q8_0 && t != TensorType::Q5_0 && t != TensorType::Q4_0 && t != TensorType::Q4_1) return false;
  const int64_t nb = k / kQK;
  const size_t bb = size_t(block_bytes(t)), gbb = group_block_bytes(t), gb = packed_group_bytes(t, k);
  for (int64_t g = 0; g < n_rows / kPackRows; ++g)
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* o = out + size_t(g) * gb + size_t(b) * gbb;
      uint32_t mask[8] = {};
      for (int r = 0; r < 8; ++r) {
        const uint8_t* blk = w + size_t(g * 8 + r) * w_row_bytes + size_t(b) * bb;
        switch (t) {
          case TensorType::Q8_0: {
            const auto& q = *reinterpret_cast<const BlockQ8_0*>(blk);
            std::memcpy(o + 2 * r, &q.d, 2);
            for (int e = 0; e < 32; ++e) o[16 + 32 * (e >> 2) + 4 * r + (e & 3)] = uint8_t(q.qs[e]) ^ 0x80;
            break;
          }
          case TensorType::Q4_0: {
            const auto& q = *reinterpret_cast<const BlockQ4_0*>(blk);
            std::memcpy(o + 2 * r, &q.d, 2);
            for (int j = 0; j < 4; ++j) std::memcpy(o + 16 + 32 * j + 4 * r, q.qs + 4 * j, 4);
            break;
          }
          case TensorType::Q4_1: {
            const auto& q = *reinterpret_cast<const BlockQ4_1*>(blk);
            std::memcpy(o + 2 * r, &q.d, 2);
            std::memcpy(o + 16 + 2 * r, &q.m, 2);
            for (int j = 0; j < 4; ++j) std::memcpy(o + 32 + 32 * j + 4 * r, q.qs + 4 * j, 4);
            break;
          }
          default: {  // Q5_0: weight e's fifth bit is bit e of qh
            const auto& q = *reinterpret_cast<const BlockQ5_0*>(blk);
            uint32_t qh;
            std::memcpy(&qh, q.qh, 4);
            std::memcpy(o + 2 * r, &q.d, 2);
            for (int j = 0; j < 4; ++j) std::memcpy(o + 48 + 32 * j + 4 * r, q.qs + 4 * j, 4);
            for (int tt = 0; tt < 8; ++tt) mask[tt] |= ((qh >> (4 * tt)) & 0xfu) << (4 * r);
            break;
          }
        }
      }
      if (t == TensorType::Q5_0) std::memcpy(o + 16, mask, sizeof mask);
    }
  return true;
}

void check(TensorType wt, int64_t n_rows, int64_t k) {
  if (!has_packed_layout(wt)) fail("quant::simd: no x8 layout for {}", gguf::type_name(wt));
  if (n_rows < 0 || n_rows % kPackRows) fail("quant::simd: {} rows is not a multiple of {}", n_rows, kPackRows);
  if (k <= 0 || k % block_elems(wt)) fail("quant::simd: k = {} is not a whole number of {} blocks", k, gguf::type_name(wt));
}

}  // namespace

bool has_packed_layout(TensorType wt) {
  return wt == TensorType::Q8_0 || wt == TensorType::Q5_0 || wt == TensorType::Q4_0 || wt == TensorType::Q4_1 ||
         wt == TensorType::Q4_K || wt == TensorType::Q6_K;
}

bool has_packed_kernel(TensorType wt, Isa level) {
  return level >= Isa::avx2 && has_packed_layout(wt);
}

size_t packed_group_bytes(TensorType wt, int64_t k) { return size_t(k / block_elems(wt)) * group_block_bytes(wt); }

void pack_rows(TensorType wt, const void* w, size_t w_row_bytes, int64_t n_rows, int64_t k, void* out) {
  check(wt, n_rows, k);
  if (pack_legacy_rows(wt, (const uint8_t*)w, w_row_bytes, n_rows, k, (uint8_t*)out)) return;
  const int64_t nb = k / block_elems(wt);
  const size_t bb = size_t(block_bytes(wt)), gbb = group_block_bytes(wt);
  Canon c[8];
  for (int64_t g = 0; g < n_rows / kPackRows; ++g)
    for (int64_t b = 0; b < nb; ++b) {
      for (int r = 0; r < 8; ++r) decode(wt, (const uint8_t*)w + size_t(g * 8 + r) * w_row_bytes + size_t(b) * bb, c[r]);
      pack_group_block(wt, c, (uint8_t*)out + size_t(g) * packed_group_bytes(wt, k) + size_t(b) * gbb);
    }
}

void unpack_rows(TensorType wt, const void* packed, int64_t n_rows, int64_t k, void* w, size_t w_row_bytes) {
  check(wt, n_rows, k);
  const int64_t nb = k / block_elems(wt);
  const size_t bb = size_t(block_bytes(wt)), gbb = group_block_bytes(wt);
  Canon c[8];
  for (int64_t g = 0; g < n_rows / kPackRows; ++g)
    for (int64_t b = 0; b < nb; ++b) {
      group_block(wt, c, (uint8_t*)packed + size_t(g) * packed_group_bytes(wt, k) + size_t(b) * gbb, false);
      for (int r = 0; r < 8; ++r) encode(wt, c[r], (uint8_t*)w + size_t(g * 8 + r) * w_row_bytes + size_t(b) * bb);
    }
}

void gemm_packed(TensorType wt, const void* packed, int64_t n_rows, const void* act, size_t act_row_bytes,
                 int64_t n_act, float* out, size_t out_stride, int64_t k, uint64_t act_version) {
  check(wt, n_rows, k);
  if (act_row_bytes < row_size(act_type(wt), k)) fail("quant::simd::gemm_packed: activation rows too short");
  if (n_act > 1 && out_stride < size_t(n_rows)) fail("quant::simd::gemm_packed: out_stride < n_rows");
  if (n_rows == 0 || n_act == 0) return;
  const detail::GemmArgs g{(const uint8_t*)packed, packed_group_bytes(wt, k), n_rows, (const uint8_t*)act,
                           act_row_bytes, n_act, out, out_stride, k, act_version};
  if (isa() == Isa::avx512 && detail::avx512::gemm_packed(wt, g)) return;
  if (isa() == Isa::avx2 && detail::avx2::gemm_packed(wt, g)) return;
  // Lower levels: unpack one group at a time and run the stored-format kernels.
  const size_t rb = row_size(wt, k), gb = packed_group_bytes(wt, k);
  thread_local std::vector<uint8_t> rows;
  rows.resize(rb * kPackRows);
  for (int64_t g = 0; g < n_rows / kPackRows; ++g) {
    unpack_rows(wt, (const uint8_t*)packed + size_t(g) * gb, kPackRows, k, rows.data(), rb);
    gemm(wt, rows.data(), rb, kPackRows, act, act_row_bytes, n_act, out + g * kPackRows, out_stride, k);
  }
}

}  // namespace loom::quant::simd
