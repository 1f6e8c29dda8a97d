// A model whose greedy output is chosen by the test: logits = onehot(token) · M, so the next
// token after t is next[t] (token 0 when t has none). With the GPT-2 byte-level vocabulary of
// `loom synth` (259 + merges = 300 tokens) and its tokenizer metadata in the same in-memory
// GGUF, a chain of byte tokens makes a multi-byte character arrive one byte per step.
#pragma once
#include <cstring>
#include <map>
#include <optional>
#include <vector>

#include "gguf/file.h"
#include "gguf/writer.h"
#include "ir/module.h"
#include "synth/vocab.h"

namespace loom::testing {

struct ChainModel {
  static constexpr int V = 300;
  synth::BpeVocab vocab;
  std::vector<uint8_t> bytes;
  std::optional<gguf::File> file;
  ir::Module module;
  int32_t byte_token(uint8_t b) const {  // the vocabulary's token for one raw byte
    const std::string want = synth::byte_to_unicode(b);
    for (size_t i = 0; i < vocab.tokens.size(); ++i)
      if (vocab.tokens[i] == want) return int32_t(i);
    return -1;
  }
};

inline ChainModel make_chain_model(const std::map<int32_t, int32_t>& next_of) {
  using gguf::Value;
  using gguf::ValueType;
  constexpr int V = ChainModel::V;
  ChainModel cm;
  cm.vocab = synth::make_bpe_vocab(V);
  gguf::Writer w;
  w.set("general.architecture", Value::str("chain"));
  auto strings = [](const std::vector<std::string>& v) {
    std::vector<Value> items;
    for (const auto& s : v) items.push_back(Value::str(s));
    return Value::array(ValueType::STRING, std::move(items));
  };
  w.set("tokenizer.ggml.model", Value::str("gpt2"));
  w.set("tokenizer.ggml.pre", Value::str("default"));
  w.set("tokenizer.ggml.tokens", strings(cm.vocab.tokens));
  std::vector<Value> types;
  for (int32_t t : cm.vocab.token_types) types.push_back(Value::i32(t));
  w.set("tokenizer.ggml.token_type", Value::array(ValueType::I32, std::move(types)));
  w.set("tokenizer.ggml.merges", strings(cm.vocab.merges));
  w.set("tokenizer.ggml.bos_token_id", Value::u32(cm.vocab.bos_id));
  w.set("tokenizer.ggml.eos_token_id", Value::u32(cm.vocab.eos_id));
  w.set("tokenizer.ggml.add_bos_token", Value::boolean(false));
  auto add = [&](const std::string& name, const std::vector<float>& v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    w.add_tensor(name, {uint64_t(V), uint64_t(V)}, gguf::TensorType::F32, b);
    cm.module.weights.push_back({name, {{ir::Dim::of(V), ir::Dim::of(V)}, ir::Elem::f32}, name});
  };
  std::vector<float> eye(size_t(V) * V, 0.f), out(size_t(V) * V, 0.f);
  for (int i = 0; i < V; ++i) eye[size_t(i) * V + i] = 1.f;
  for (auto [from, to] : next_of) out[size_t(to) * V + size_t(from)] = 1.f;  // row `to` picks up `from`
  add("tok", eye);
  add("out", out);
  const ir::Dim T = ir::Dim::symbol("T");
  auto& m = cm.module;
  m.name = "chain";
  m.dims = {{"T", 1, 512}, {"P", 0, 512}};
  ir::Func f;
  f.name = "step";
  f.params = {{"tok", {{T}, ir::Elem::i32}}, {"pos", {{T}, ir::Elem::i32}}};
  using O = ir::Operand;
  f.body.push_back({"x", "embed", {O::weight("tok"), O::value("tok")}, {}, {{T, ir::Dim::of(V)}, ir::Elem::f32}});
  f.body.push_back({"logits", "matmul", {O::value("x"), O::weight("out")}, {}, {{T, ir::Dim::of(V)}, ir::Elem::f32}});
  f.results = {"logits"};
  f.result_types = {{{T, ir::Dim::of(V)}, ir::Elem::f32}};
  m.funcs.push_back(std::move(f));
  cm.bytes = w.to_bytes();
  cm.file.emplace(gguf::File::from_bytes(cm.bytes, "chain.gguf"));
  return cm;
}

}  // namespace loom::testing
