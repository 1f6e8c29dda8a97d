#include "backend/backend.h"

#include <algorithm>

#include "common/error.h"
#include "ir/ops.h"
#include "port/port.h"
#include "passes/lowering.h"

namespace loom::backend {

// The one check of a program's bindings against a file (port/bindings.cpp, also `loom check
// --gguf`): every tensor present with exactly the declared type. The file's hash is the
// loader's business (runtime/model_loader.h): binding never hashes the file.
WeightSource WeightSource::bind(const ir::Module& m, const gguf::File& file) {
  port::check_bindings(m, file, {.hash_mismatch_is_error = false, .check_hash = false});
  WeightSource ws;
  ws.file_ = &file;
  for (const auto& w : m.weights) ws.bound_.push_back({w.name, Bound{&w, file.find_tensor(w.gguf_name)}});
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

// One pass over the row keeping the best k so far in a heap whose top is the worst kept: ids
// come in ascending order, so an equal logit never displaces a kept one (lowest id wins ties).
void top_logits(std::span<const float> row, int32_t k, TopLogit* out) {
  if (k < 1 || size_t(k) > row.size()) loom::fail("top_logits: k = {} outside [1, {}]", k, row.size());
  if (k == 1) {
    TopLogit best{0, row[0]};
    for (size_t i = 1; i < row.size(); ++i)
      if (row[i] > best.logit) best = {int32_t(i), row[i]};
    *out = best;
    return;
  }
  std::vector<TopLogit> heap;
  heap.reserve(size_t(k));
  for (size_t i = 0; i < row.size(); ++i) {
    const TopLogit c{int32_t(i), row[i]};
    if (heap.size() < size_t(k)) {
      heap.push_back(c);
      std::push_heap(heap.begin(), heap.end(), ranks_before);
    } else if (ranks_before(c, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), ranks_before);
      heap.back() = c;
      std::push_heap(heap.begin(), heap.end(), ranks_before);
    }
  }
  std::sort_heap(heap.begin(), heap.end(), ranks_before);
  std::copy(heap.begin(), heap.end(), out);
}

void Plan::run_top(const StepBatch& batch, KvStorage& kv, int32_t k, TopLogit* out) {
  const size_t V = size_t(vocab_size()), rows = batch.n_logit_rows();
  if (k < 1 || size_t(k) > V) loom::fail("run_top: k = {} outside [1, {}]", k, V);
  top_rows_.resize(rows * V);
  run(batch, kv, top_rows_.data());
  for (size_t r = 0; r < rows; ++r) top_logits({top_rows_.data() + r * V, V}, k, out + r * size_t(k));
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
