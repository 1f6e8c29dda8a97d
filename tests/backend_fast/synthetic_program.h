// Small llama/gemma-shaped programs with random weights stored in quantized GGUF types, in an
// in-memory GGUF: the fast backend quantizes activations for these weight types, so they
// exercise its real paths (grouped matmuls, Q8 activations, K-quant GEMM) at test speed.
#pragma once
#include <cctype>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "ir/module.h"
#include "quant/quant.h"

namespace loom::testing {

struct SyntheticSpec {
  int V = 300, E = 256, H = 8, HKV = 2, DH = 32, F = 512, L = 2;
  gguf::TensorType wtype = gguf::TensorType::Q4_K;  // projections
  gguf::TensorType vtype = gguf::TensorType::Q6_K;  // attn_v and ffn_down, as Q4_K_M mixes them
  gguf::TensorType otype = gguf::TensorType::Q8_0;  // output
  std::string rope_mode = "normal";
  int64_t window = 0;          // every layer but the last, when > 0
  double attn_softcap = 0;
  double logit_softcap = 0;
  bool gemma = false;          // geglu, scaled embedding, q/k norms, post norms
  unsigned seed = 7;
};

struct SyntheticModel {
  SyntheticSpec spec;
  std::vector<uint8_t> bytes;
  std::optional<gguf::File> file;
  ir::Module module;
};

inline SyntheticModel make_synthetic(const SyntheticSpec& sp) {
  using D = ir::Dim;
  using O = ir::Operand;
  const D T = D::symbol("T");
  std::mt19937 rng(sp.seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::str("synthetic"));
  ir::Module m;
  m.name = "synthetic";
  m.dims = {{"T", 1, 1024}, {"P", 0, 1024}};
  auto tt = [](std::vector<D> s, ir::Elem e = ir::Elem::f32) { return ir::Type{std::move(s), e}; };
  auto elem_of = [](gguf::TensorType t) {
    std::string n(gguf::type_name(t));
    for (auto& c : n) c = char(std::tolower(c));
    return *ir::elem_from_name(n);
  };
  auto weight = [&](const std::string& name, int64_t rows, int64_t k, gguf::TensorType type, float stddev, float mean = 0) {
    std::vector<float> v(rows * k);
    for (auto& x : v) x = mean + stddev * nd(rng);
    std::vector<uint8_t> b(loom::quant::row_size(type, k) * rows);
    for (int64_t r = 0; r < rows; ++r)
      loom::quant::quantize_row(type, v.data() + r * k, b.data() + r * loom::quant::row_size(type, k), k);
    std::vector<uint64_t> dims = rows == 1 ? std::vector<uint64_t>{uint64_t(k)} : std::vector<uint64_t>{uint64_t(k), uint64_t(rows)};
    w.add_tensor(name, dims, type, b);
    ir::Type t;
    if (rows > 1) t.shape.push_back(D::of(rows));
    t.shape.push_back(D::of(k));
    t.elem = elem_of(type);
    m.weights.push_back({name, t, name});
  };
  auto vec = [&](const std::string& name, int64_t n) { weight(name, 1, n, gguf::TensorType::F32, 0.1f, 1.0f); };
  const float ws = 1.0f / std::sqrt(float(sp.E));
  weight("tok", sp.V, sp.E, gguf::TensorType::Q8_0, 1.0f);
  vec("out_norm", sp.E);
  weight("out", sp.V, sp.E, sp.otype, ws * 4);
  ir::Func f;
  f.name = "step";
  f.params = {{"tok", tt({T}, ir::Elem::i32)}, {"pos", tt({T}, ir::Elem::i32)}};
  auto op = [&](std::string res, std::string code, std::vector<O> ops, int64_t cols, ir::Attrs at = {}) {
    f.body.push_back({res, code, std::move(ops), std::move(at), tt({T, D::of(cols)})});
    return res;
  };
  std::string x = op("x0", "embed", {O::weight("tok"), O::value("tok")}, sp.E);
  if (sp.gemma) x = op("x0s", "scale", {O::value(x)}, sp.E, {{"factor", double(std::sqrt(float(sp.E)))}});
  const int64_t QW = sp.H * sp.DH, KW = sp.HKV * sp.DH;
  for (int l = 0; l < sp.L; ++l) {
    const std::string p = "b" + std::to_string(l) + ".";
    vec(p + "attn_norm", sp.E);
    weight(p + "wq", QW, sp.E, sp.wtype, ws);
    weight(p + "wk", KW, sp.E, sp.wtype, ws);
    weight(p + "wv", KW, sp.E, sp.vtype, ws);
    weight(p + "wo", sp.E, QW, sp.wtype, 1.0f / std::sqrt(float(QW)));
    vec(p + "ffn_norm", sp.E);
    weight(p + "gate", sp.F, sp.E, sp.wtype, ws);
    weight(p + "up", sp.F, sp.E, sp.wtype, ws);
    weight(p + "down", sp.E, sp.F, sp.vtype, 1.0f / std::sqrt(float(sp.F)));
    ir::Attrs rope = {{"head_dim", int64_t(sp.DH)}, {"n_rot", int64_t(sp.DH)}, {"base", 10000.0}, {"mode", sp.rope_mode}};
    const std::string h = op(p + "h", "rms_norm", {O::value(x), O::weight(p + "attn_norm")}, sp.E, {{"eps", 1e-5}});
    std::string q = op(p + "q0", "matmul", {O::value(h), O::weight(p + "wq")}, QW);
    std::string k = op(p + "k0", "matmul", {O::value(h), O::weight(p + "wk")}, KW);
    const std::string v = op(p + "v", "matmul", {O::value(h), O::weight(p + "wv")}, KW);
    if (sp.gemma) {
      vec(p + "q_norm", sp.DH);
      vec(p + "k_norm", sp.DH);
      q = op(p + "qn", "rms_norm", {O::value(q), O::weight(p + "q_norm")}, QW, {{"eps", 1e-6}});
      k = op(p + "kn", "rms_norm", {O::value(k), O::weight(p + "k_norm")}, KW, {{"eps", 1e-6}});
    }
    q = op(p + "q", "rope", {O::value(q), O::value("pos")}, QW, rope);
    k = op(p + "k", "rope", {O::value(k), O::value("pos")}, KW, rope);
    ir::Attrs at = {{"layer", int64_t(l)}, {"n_head", int64_t(sp.H)}, {"n_kv_head", int64_t(sp.HKV)},
                    {"head_dim", int64_t(sp.DH)}, {"value_dim", int64_t(sp.DH)},
                    {"scale", double(1.0f / std::sqrt(float(sp.DH)))}};
    if (sp.window > 0 && l + 1 < sp.L) at.push_back({"window", sp.window});
    if (sp.attn_softcap > 0) at.push_back({"softcap", sp.attn_softcap});
    std::string a = op(p + "a", "attention", {O::value(q), O::value(k), O::value(v), O::value("pos")}, QW, at);
    std::string o = op(p + "o", "matmul", {O::value(a), O::weight(p + "wo")}, sp.E);
    if (sp.gemma) {
      vec(p + "post_attn", sp.E);
      o = op(p + "on", "rms_norm", {O::value(o), O::weight(p + "post_attn")}, sp.E, {{"eps", 1e-6}});
    }
    const std::string r = op(p + "r", "add", {O::value(x), O::value(o)}, sp.E);
    const std::string h2 = op(p + "h2", "rms_norm", {O::value(r), O::weight(p + "ffn_norm")}, sp.E, {{"eps", 1e-5}});
    const std::string u = op(p + "u", "matmul", {O::value(h2), O::weight(p + "up")}, sp.F);
    const std::string g = op(p + "g", "matmul", {O::value(h2), O::weight(p + "gate")}, sp.F);
    const std::string s = op(p + "s", sp.gemma ? "geglu" : "swiglu", {O::value(g), O::value(u)}, sp.F);
    std::string d = op(p + "d", "matmul", {O::value(s), O::weight(p + "down")}, sp.E);
    if (sp.gemma) {
      vec(p + "post_ffn", sp.E);
      d = op(p + "dn", "rms_norm", {O::value(d), O::weight(p + "post_ffn")}, sp.E, {{"eps", 1e-6}});
    }
    x = op(p + "y", "add", {O::value(r), O::value(d)}, sp.E);
  }
  const std::string hn = op("hn", "rms_norm", {O::value(x), O::weight("out_norm")}, sp.E, {{"eps", 1e-5}});
  std::string logits = op("logits", "matmul", {O::value(hn), O::weight("out")}, sp.V);
  if (sp.logit_softcap > 0) logits = op("capped", "softcap", {O::value(logits)}, sp.V, {{"cap", sp.logit_softcap}});
  f.results = {logits};
  f.result_types = {tt({T, D::of(sp.V)})};
  m.funcs.push_back(std::move(f));
  SyntheticModel sm{sp, w.to_bytes(), std::nullopt, std::move(m)};
  sm.file.emplace(gguf::File::from_bytes(sm.bytes, "synthetic.gguf"));
  return sm;
}

}  // namespace loom::testing
