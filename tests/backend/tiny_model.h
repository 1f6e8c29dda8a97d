// A two-layer llama-shaped program with random F32 weights in an in-memory GGUF, for tests
// of the executor's bookkeeping (KV cache, row dropping, batching) independent of any porter.
#pragma once
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "ir/module.h"

namespace loom::testing {

struct TinyModel {
  static constexpr int V = 37, E = 16, H = 4, HKV = 2, DH = 4, F = 24, L = 2;
  std::vector<uint8_t> bytes;
  std::optional<gguf::File> file;  // views `bytes`, whose buffer survives moves
  ir::Module module;
};

inline ir::Type tt(std::vector<ir::Dim> s, ir::Elem e = ir::Elem::f32) { return {std::move(s), e}; }

inline TinyModel make_tiny_model(std::string rope_mode = "normal", int64_t window = 0, unsigned seed = 1) {
  using D = ir::Dim;
  const D T = D::symbol("T");
  constexpr int V = TinyModel::V, E = TinyModel::E, H = TinyModel::H, HKV = TinyModel::HKV, DH = TinyModel::DH,
                F = TinyModel::F, L = TinyModel::L;
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 0.5f);
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::str("tiny"));
  ir::Module m;
  m.name = "tiny";
  m.dims = {{"T", 1, 512}, {"P", 0, 512}};
  auto weight = [&](std::string name, std::vector<int64_t> shape, bool ones = false) {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    std::vector<float> v(n);
    for (auto& x : v) x = ones ? 1.0f + 0.1f * nd(rng) : nd(rng);
    std::vector<uint8_t> b(n * 4);
    std::memcpy(b.data(), v.data(), b.size());
    std::vector<uint64_t> dims(shape.rbegin(), shape.rend());
    w.add_tensor(name, dims, gguf::TensorType::F32, b);
    ir::Type t;
    for (auto d : shape) t.shape.push_back(D::of(d));
    m.weights.push_back({name, t, name});
  };
  weight("tok", {V, E});
  weight("out_norm", {E}, true);
  weight("out", {V, E});
  ir::Func f;
  f.name = "step";
  f.params = {{"tok", tt({T}, ir::Elem::i32)}, {"pos", tt({T}, ir::Elem::i32)}};
  auto op = [&](std::string res, std::string code, std::vector<ir::Operand> ops, int64_t cols, ir::Attrs at = {}) {
    f.body.push_back({res, code, std::move(ops), std::move(at), tt({T, D::of(cols)})});
  };
  using O = ir::Operand;
  op("x0", "embed", {O::weight("tok"), O::value("tok")}, E);
  std::string x = "x0";
  for (int l = 0; l < L; ++l) {
    const std::string p = "b" + std::to_string(l) + ".";
    weight(p + "attn_norm", {E}, true);
    weight(p + "wq", {H * DH, E});
    weight(p + "wk", {HKV * DH, E});
    weight(p + "wv", {HKV * DH, E});
    weight(p + "wo", {E, H * DH});
    weight(p + "ffn_norm", {E}, true);
    weight(p + "gate", {F, E});
    weight(p + "up", {F, E});
    weight(p + "down", {E, F});
    ir::Attrs rope = {{"head_dim", int64_t(DH)}, {"n_rot", int64_t(DH)}, {"base", 10000.0}, {"mode", rope_mode}};
    op(p + "h", "rms_norm", {O::value(x), O::weight(p + "attn_norm")}, E, {{"eps", 1e-5}});
    op(p + "q0", "matmul", {O::value(p + "h"), O::weight(p + "wq")}, H * DH);
    op(p + "k0", "matmul", {O::value(p + "h"), O::weight(p + "wk")}, HKV * DH);
    op(p + "v", "matmul", {O::value(p + "h"), O::weight(p + "wv")}, HKV * DH);
    op(p + "q", "rope", {O::value(p + "q0"), O::value("pos")}, H * DH, rope);
    op(p + "k", "rope", {O::value(p + "k0"), O::value("pos")}, HKV * DH, rope);
    op(p + "a", "attention", {O::value(p + "q"), O::value(p + "k"), O::value(p + "v"), O::value("pos")}, H * DH,
       {{"layer", int64_t(l)}, {"n_head", int64_t(H)}, {"n_kv_head", int64_t(HKV)}, {"head_dim", int64_t(DH)},
        {"value_dim", int64_t(DH)}, {"scale", 0.5}, {"window", window}});
    op(p + "o", "matmul", {O::value(p + "a"), O::weight(p + "wo")}, E);
    op(p + "r", "add", {O::value(x), O::value(p + "o")}, E);
    op(p + "h2", "rms_norm", {O::value(p + "r"), O::weight(p + "ffn_norm")}, E, {{"eps", 1e-5}});
    op(p + "g", "matmul", {O::value(p + "h2"), O::weight(p + "gate")}, F);
    op(p + "u", "matmul", {O::value(p + "h2"), O::weight(p + "up")}, F);
    op(p + "s", "swiglu", {O::value(p + "g"), O::value(p + "u")}, F);
    op(p + "d", "matmul", {O::value(p + "s"), O::weight(p + "down")}, E);
    op(p + "y", "add", {O::value(p + "r"), O::value(p + "d")}, E);
    x = p + "y";
  }
  op("hn", "rms_norm", {O::value(x), O::weight("out_norm")}, E, {{"eps", 1e-5}});
  op("logits", "matmul", {O::value("hn"), O::weight("out")}, V);
  f.results = {"logits"};
  f.result_types = {tt({T, D::of(V)})};
  m.funcs.push_back(std::move(f));
  TinyModel tm{w.to_bytes(), std::nullopt, std::move(m)};
  tm.file.emplace(gguf::File::from_bytes(tm.bytes, "tiny.gguf"));
  return tm;
}

}  // namespace loom::testing
