#include "backend/backend.h"

#include <algorithm>

#include "common/error.h"
#include "ir/ops.h"
#include "passes/lowering.h"

namespace loom::backend {

namespace {

// The GGUF storage type an ir element type names.
gguf::TensorType tensor_type_of(ir::Elem e) {
  using T = gguf::TensorType;
  switch (e) {
    case ir::Elem::f32: return T::F32;
    case ir::Elem::f16: return T::F16;
    case ir::Elem::bf16: return T::BF16;
    case ir::Elem::i32: return T::I32;
    case ir::Elem::q4_0: return T::Q4_0;
    case ir::Elem::q4_1: return T::Q4_1;
    case ir::Elem::q5_0: return T::Q5_0;
    case ir::Elem::q5_1: return T::Q5_1;
    case ir::Elem::q8_0: return T::Q8_0;
    case ir::Elem::q2_k: return T::Q2_K;
    case ir::Elem::q3_k: return T::Q3_K;
    case ir::Elem::q4_k: return T::Q4_K;
    case ir::Elem::q5_k: return T::Q5_K;
    case ir::Elem::q6_k: return T::Q6_K;
    case ir::Elem::q8_k: return T::Q8_K;
  }
  loom::fail("unknown element type {}", int(e));
}

std::string shape_text(const std::vector<uint64_t>& outer_first) {
  std::string s;
  for (size_t i = 0; i < outer_first.size(); ++i) s += (i ? "x" : "") + std::to_string(outer_first[i]);
  return s;
}

}  // namespace

WeightSource WeightSource::bind(const ir::Module& m, const gguf::File& file) {
  WeightSource ws;
  ws.file_ = &file;
  for (const auto& w : m.weights) {
    const gguf::TensorInfo* t = file.find_tensor(w.gguf_name);
    if (!t) loom::fail("weight @{}: tensor \"{}\" not found in {}", w.name, w.gguf_name, file.path());
    std::vector<uint64_t> want, have(t->dims.rbegin(), t->dims.rend());
    for (const auto& d : w.type.shape) {
      if (!d.is_static()) loom::fail("weight @{}: dimension {} is symbolic", w.name, d.sym);
      want.push_back(uint64_t(d.value));
    }
    // GGUF may store a [1 x N] tensor where the program says [N]; compare without unit dims.
    auto squeeze = [](std::vector<uint64_t> v) {
      std::erase(v, uint64_t(1));
      return v;
    };
    if (squeeze(want) != squeeze(have))
      loom::fail("weight @{}: program says tensor<{}> but \"{}\" in {} is {}", w.name, shape_text(want),
                 w.gguf_name, file.path(), shape_text(have));
    if (tensor_type_of(w.type.elem) != t->type)
      loom::fail("weight @{}: program says {} but \"{}\" is stored as {}", w.name, ir::elem_name(w.type.elem),
                 w.gguf_name, gguf::type_name(t->type));
    ws.bound_.push_back({w.name, Bound{&w, t}});
  }
  std::sort(ws.bound_.begin(), ws.bound_.end(), [](auto& a, auto& b) { return a.first < b.first; });
  return ws;
}

const WeightSource::Bound& WeightSource::at(const std::string& name) const {
  auto it = std::lower_bound(bound_.begin(), bound_.end(), name, [](auto& e, const std::string& n) { return e.first < n; });
  if (it == bound_.end() || it->first != name) loom::fail("weight @{} is not bound", name);
  return it->second;
}

size_t kv_row_bytes(KvElem e, int64_t width) {
  switch (e) {
    case KvElem::f32: return size_t(width) * 4;
    case KvElem::f16: return size_t(width) * 2;
    case KvElem::q8_0:
      if (width % 32) loom::fail("q8_0 KV cache needs rows of a multiple of 32 elements, got {}", width);
      return size_t(width / 32) * 34;
  }
  loom::fail("unknown KV element type {}", int(e));
}

const char* kv_elem_name(KvElem e) {
  switch (e) {
    case KvElem::f32: return "f32";
    case KvElem::f16: return "f16";
    case KvElem::q8_0: return "q8_0";
  }
  return "?";
}

KvElem parse_kv_elem(const std::string& name) {
  for (KvElem e : {KvElem::f32, KvElem::f16, KvElem::q8_0})
    if (name == kv_elem_name(e)) return e;
  loom::fail("unknown KV cache type \"{}\" (known: f32, f16, q8_0)", name);
}

size_t StepBatch::n_logit_rows() const {
  size_t n = 0;
  for (size_t i = 0; i < size(); ++i) n += wants(i);
  return n;
}

void StepBatch::validate() const {
  if (tokens.empty()) loom::fail("step batch is empty");
  if (positions.size() != tokens.size())
    loom::fail("step batch: {} tokens but {} positions", tokens.size(), positions.size());
  if (!seq_ids.empty() && seq_ids.size() != tokens.size())
    loom::fail("step batch: {} tokens but {} sequence ids", tokens.size(), seq_ids.size());
  if (!want_logits.empty() && want_logits.size() != tokens.size())
    loom::fail("step batch: {} tokens but {} logit flags", tokens.size(), want_logits.size());
  for (size_t i = 0; i < size(); ++i) {
    if (positions[i] < 0) loom::fail("step batch: token {} has negative position {}", i, positions[i]);
    if (seq(i) < 0) loom::fail("step batch: token {} has negative sequence id {}", i, seq(i));
  }
}

StepBatch StepBatch::sequence(std::vector<int32_t> tokens, int32_t start, bool all_logits, int32_t seq) {
  StepBatch b;
  b.positions.resize(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) b.positions[i] = start + int32_t(i);
  if (seq != 0) b.seq_ids.assign(tokens.size(), seq);
  if (all_logits) b.want_logits.assign(tokens.size(), 1);
  b.tokens = std::move(tokens);
  return b;
}

std::vector<KvLayerShape> kv_layers_of(const ir::Module& m) {
  std::vector<KvLayerShape> layers;
  std::vector<bool> seen;
  for (const auto& f : m.funcs)
    for (const auto& op : f.body) {
      if (passes::opcode_of(op.opcode) != passes::Opcode::attention) continue;
      const passes::AttentionAttrs a = passes::attention_attrs(op);
      const int64_t l = a.layer;
      if (l < 0 || l > 100000) loom::fail("attention %{}: layer {} out of range", op.result, l);
      KvLayerShape s{int(a.n_kv_head), int(a.head_dim), int(a.value_dim)};
      if (size_t(l) >= layers.size()) {
        layers.resize(l + 1);
        seen.resize(l + 1);
      }
      if (seen[l] && !(layers[l] == s))
        loom::fail("attention %{}: layer {} declared twice with different geometry", op.result, l);
      layers[l] = s;
      seen[l] = true;
    }
  for (size_t l = 0; l < layers.size(); ++l)
    if (!seen[l]) loom::fail("no attention op uses KV layer {} (layers must be numbered 0..n-1)", l);
  return layers;
}

}  // namespace loom::backend
