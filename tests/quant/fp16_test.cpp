// fp16 and bf16 conversions, exhaustively over all 65536 bit patterns and every rounding
// boundary, against straightforward references built from ldexp and double arithmetic.
#include <gtest/gtest.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <random>

#include "quant/fp16.h"

using namespace loom::quant;

namespace {

// Value of a half by its definition (NaN handled separately by the callers).
double half_value(uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double mag = e == 0 ? std::ldexp(double(m), -24) : std::ldexp(double(1024 + m), e - 25);
  return (h & 0x8000) ? -mag : mag;
}

// Nearest half by brute force over the finite magnitudes, ties to the even pattern;
// |f| >= 65520 (the midpoint past 65504) is inf.
uint16_t reference_fp32_to_fp16(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (std::isnan(f)) return sign | 0x7e00;
  const double a = std::fabs(double(f));
  if (a >= 65520.0) return sign | 0x7c00;
  uint16_t lo = 0, hi = 0x7bff;  // largest pattern with value <= a
  while (lo < hi) {
    const uint16_t mid = uint16_t((lo + hi + 1) / 2);
    if (half_value(mid) <= a) lo = mid; else hi = uint16_t(mid - 1);
  }
  if (lo == 0x7bff) return sign | lo;
  const double dlo = a - half_value(lo), dhi = half_value(uint16_t(lo + 1)) - a;
  if (dlo < dhi) return sign | lo;
  if (dhi < dlo) return sign | uint16_t(lo + 1);
  return sign | ((lo & 1) ? uint16_t(lo + 1) : lo);
}

uint16_t reference_fp32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return uint16_t((x >> 16) | 0x40);
  const uint16_t lo = uint16_t(x >> 16);
  const double v = f, vlo = bf16_to_fp32(lo);
  const uint16_t up = uint16_t(lo + 1);  // next magnitude
  if (std::isinf(vlo)) return lo;
  // Past the largest finite bf16 the next step is 2^128 (where IEEE rounding puts inf).
  const double vup = (up & 0x7fff) == 0x7f80 ? std::copysign(std::ldexp(1.0, 128), v)
                                             : double(std::bit_cast<float>(uint32_t(up) << 16));
  const double dlo = std::fabs(v - vlo), dup = std::fabs(vup - v);
  if (dlo < dup) return lo;
  if (dup < dlo) return up;
  return (lo & 1) ? up : lo;
}

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

}  // namespace

TEST(Fp16, ToFp32AllPatterns) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_fp32(uint16_t(h));
    const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 31 && m != 0) {  // NaN: sign and payload kept, quiet bit set
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      ASSERT_EQ(bits(f), ((h & 0x8000u) << 16) | 0x7fc00000u | (uint32_t(m) << 13)) << std::hex << h;
    } else if (e == 31) {
      ASSERT_TRUE(std::isinf(f)) << std::hex << h;
      ASSERT_EQ(std::signbit(f), bool(h & 0x8000)) << std::hex << h;
    } else {
      ASSERT_EQ(double(f), half_value(uint16_t(h))) << std::hex << h;
      ASSERT_EQ(std::signbit(f), bool(h & 0x8000)) << std::hex << h;  // keeps -0
    }
  }
}

TEST(Fp16, FromFp32RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const bool nan = ((h >> 10) & 0x1f) == 31 && (h & 0x3ff);
    const uint16_t back = fp32_to_fp16(fp16_to_fp32(uint16_t(h)));
    ASSERT_EQ(back, nan ? uint16_t((h & 0x8000) | 0x7e00) : uint16_t(h)) << std::hex << h;
  }
}

TEST(Fp16, FromFp32AtEveryRoundingBoundary) {
  // For each pair of neighbouring halves: the midpoint and the floats one ulp either side.
  int checked = 0;
  for (uint32_t sign : {0u, 0x8000u}) {
    for (uint32_t h = 0; h < 0x7c00; ++h) {
      const double mid = (half_value(uint16_t(h)) + half_value(uint16_t(h + 1))) / 2;
      const float m = float(sign ? -mid : mid);  // exact: 12 significant bits
      ASSERT_EQ(double(std::fabs(m)), mid);
      for (float f : {m, std::nextafter(m, 0.f), std::nextafter(m, sign ? -INFINITY : INFINITY)}) {
        ASSERT_EQ(fp32_to_fp16(f), reference_fp32_to_fp16(f)) << "f=" << f << " bits " << std::hex << bits(f);
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 2 * 0x7c00 * 3);
}

TEST(Fp16, FromFp32RandomBitPatterns) {
  const uint64_t seed = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 1000000; ++i) {
    const float f = std::bit_cast<float>(uint32_t(rng()));
    const uint16_t got = fp32_to_fp16(f), want = reference_fp32_to_fp16(f);
    ASSERT_EQ(got, want) << "seed=" << seed << " bits " << std::hex << bits(f);
  }
}

TEST(Bf16, ToFp32AllPatterns) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = bf16_to_fp32(uint16_t(h));
    const int e = (h >> 7) & 0xff, m = h & 0x7f;
    if (e == 255) {
      ASSERT_EQ(std::isnan(f), m != 0) << std::hex << h;
      ASSERT_EQ(bits(f), h << 16);
      continue;
    }
    const double mag = e == 0 ? std::ldexp(double(m), -133) : std::ldexp(double(128 + m), e - 134);
    ASSERT_EQ(double(f), (h & 0x8000) ? -mag : mag) << std::hex << h;
  }
}

TEST(Bf16, FromFp32AtEveryRoundingBoundaryAndRandom) {
  for (uint32_t b = 0; b < 65536; ++b) {
    for (uint32_t low : {0x7fffu, 0x8000u, 0x8001u, 0u}) {
      const float f = std::bit_cast<float>((b << 16) | low);
      ASSERT_EQ(fp32_to_bf16(f), reference_fp32_to_bf16(f)) << std::hex << bits(f);
    }
  }
  const uint64_t seed = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 1000000; ++i) {
    const float f = std::bit_cast<float>(uint32_t(rng()));
    ASSERT_EQ(fp32_to_bf16(f), reference_fp32_to_bf16(f)) << "seed=" << seed << " " << std::hex << bits(f);
  }
}
