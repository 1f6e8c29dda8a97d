// Rotary embedding for the fast backend. The cos/sin of every (row, frequency) are computed
// once per step and rope configuration and shared by the q and k rotations of every layer
// that uses it (a prefill of 512 tokens would otherwise take ~60 sin/cos per row per layer).
// theta is the reference's (and ggml's) running fp32 product pos * ts * ts ..., ts = base^(-2/n_rot).
#include <cmath>

#include "backend/cpu/fast/plan.h"

namespace loom::backend::cpu::fast {

namespace {

const float* rope_table(const Step& s, Exec& e) {
  std::vector<float>& cs = (*e.rope_tables)[s.rope];
  if ((*e.rope_ready)[s.rope]) return cs.data();
  const RopeConfig& rc = (*e.ropes)[s.rope];
  const int64_t half = rc.n_rot / 2;
  if (cs.size() < size_t(e.rows * rc.n_rot)) cs.resize(e.rows * rc.n_rot);
  parallel_rows(e, e.rows, 8 * half, [&](int64_t b, int64_t en) {
    for (int64_t t = b; t < en; ++t) {
      float theta = float(e.positions[t]);
      float* row = cs.data() + t * rc.n_rot;
      for (int64_t i = 0; i < half; ++i, theta *= rc.theta_scale) {
        const float th = rc.freq_scale * (rc.freq_factors ? theta / rc.freq_factors[i] : theta);
        row[2 * i] = std::cos(th);
        row[2 * i + 1] = std::sin(th);
      }
    }
  });
  (*e.rope_ready)[s.rope] = 1;
  return cs.data();
}

}  // namespace

void run_rope(const Step& s, Exec& e) {
  const float* cs = rope_table(s, e);
  const RopeConfig& rc = (*e.ropes)[s.rope];
  const float* x = e.value(s.in[0]);
  float* out = e.value(s.out);
  const int64_t n = s.cols, hd = s.group, heads = n / hd, half = rc.n_rot / 2, n_rot = rc.n_rot;
  const bool neox = s.f0 != 0;
  parallel_rows(e, e.rows, n, [&](int64_t b, int64_t en) {
    for (int64_t t = b; t < en; ++t) {
      const float* c = cs + t * n_rot;
      for (int64_t h = 0; h < heads; ++h) {
        const float* xi = x + t * n + h * hd;
        float* o = out + t * n + h * hd;
        if (neox) {
          for (int64_t i = 0; i < half; ++i) {
            const float x0 = xi[i], x1 = xi[i + half];
            o[i] = x0 * c[2 * i] - x1 * c[2 * i + 1];
            o[i + half] = x0 * c[2 * i + 1] + x1 * c[2 * i];
          }
        } else {
          for (int64_t i = 0; i < half; ++i) {
            const float x0 = xi[2 * i], x1 = xi[2 * i + 1];
            o[2 * i] = x0 * c[2 * i] - x1 * c[2 * i + 1];
            o[2 * i + 1] = x0 * c[2 * i + 1] + x1 * c[2 * i];
          }
        }
        for (int64_t i = n_rot; i < hd; ++i) o[i] = xi[i];
      }
    }
  });
}

}  // namespace loom::backend::cpu::fast
