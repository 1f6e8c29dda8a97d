#include "synth/model.h"

#include <fmt/format.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "common/error.h"
#include "gguf/writer.h"
#include "synth/rng.h"
#include "synth/vocab.h"

namespace loom::synth {
namespace {

using gguf::TensorType;
using gguf::Value;
using gguf::ValueType;

constexpr double kWeightStd = 0.02;

uint16_t to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = int32_t((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff) return uint16_t(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 31) return uint16_t(sign | 0x7c00u);
  if (exp <= 0) {  // subnormal half (or zero)
    if (exp < -10) return uint16_t(sign);
    mant |= 0x800000u;
    uint32_t shift = uint32_t(14 - exp);
    uint32_t h = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) ++h;
    return uint16_t(sign | h);
  }
  uint32_t h = (uint32_t(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;  // may carry into the exponent: correct
  return uint16_t(sign | h);
}

uint16_t to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40);
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

// Encodes one row of floats into `out` in type t (the row's exact byte size).
void encode_row(const float* x, uint64_t n, TensorType t, uint8_t* out) {
  switch (t) {
    case TensorType::F32: std::memcpy(out, x, n * 4); return;
    case TensorType::F16:
      for (uint64_t i = 0; i < n; ++i) {
        uint16_t h = to_f16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case TensorType::BF16:
      for (uint64_t i = 0; i < n; ++i) {
        uint16_t h = to_bf16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case TensorType::Q8_0:  // block: f16 scale d, 32 × int8, x ≈ d·q
      for (uint64_t b = 0; b < n / 32; ++b) {
        const float* v = x + 32 * b;
        float amax = 0;
        for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(v[i]));
        float d = amax / 127.f, id = d ? 1.f / d : 0.f;
        uint8_t* blk = out + 34 * b;
        uint16_t dh = to_f16(d);
        std::memcpy(blk, &dh, 2);
        for (int i = 0; i < 32; ++i) blk[2 + i] = uint8_t(int8_t(std::lround(v[i] * id)));
      }
      return;
    default: loom::fail("synth: cannot encode {}", gguf::type_name(t));
  }
}

Value u32(uint64_t x) { return Value::u32(uint32_t(x)); }

Value string_array(const std::vector<std::string>& xs) {
  std::vector<Value> v;
  v.reserve(xs.size());
  for (const auto& s : xs) v.push_back(Value::str(s));
  return Value::array(ValueType::STRING, std::move(v));
}

uint32_t file_type(TensorType t) {
  switch (t) {  // llama_ftype
    case TensorType::F32: return 0;
    case TensorType::F16: return 1;
    case TensorType::Q8_0: return 7;
    case TensorType::BF16: return 32;
    default: return 0;
  }
}

}  // namespace

bool synth_supports(TensorType t) {
  return t == TensorType::F32 || t == TensorType::F16 || t == TensorType::BF16 || t == TensorType::Q8_0;
}

std::vector<SynthTensor> synth_tensors(const ModelShape& s, TensorType type) {
  std::vector<SynthTensor> t;
  const uint64_t E = s.n_embd, q_dim = uint64_t(s.n_head) * s.head_dim, kv_dim = uint64_t(s.n_head_kv) * s.head_dim;
  auto mat = [&](std::string n, uint64_t in, uint64_t out) { t.push_back({std::move(n), {in, out}, type, SynthTensor::Matrix}); };
  auto vec = [&](std::string n, uint64_t len, SynthTensor::Kind k) { t.push_back({std::move(n), {len}, TensorType::F32, k}); };
  mat("token_embd.weight", E, s.n_vocab);
  for (uint32_t l = 0; l < s.n_layer; ++l) {
    std::string b = fmt::format("blk.{}.", l);
    vec(b + "attn_norm.weight", E, SynthTensor::Norm);
    if (s.fused_qkv) {
      mat(b + "attn_qkv.weight", E, q_dim + 2 * kv_dim);
    } else {
      mat(b + "attn_q.weight", E, q_dim);
      mat(b + "attn_k.weight", E, kv_dim);
      mat(b + "attn_v.weight", E, kv_dim);
    }
    if (s.qkv_bias) {
      vec(b + "attn_q.bias", q_dim, SynthTensor::Bias);
      vec(b + "attn_k.bias", kv_dim, SynthTensor::Bias);
      vec(b + "attn_v.bias", kv_dim, SynthTensor::Bias);
    }
    if (s.qk_norm) {
      vec(b + "attn_q_norm.weight", s.head_dim, SynthTensor::Norm);
      vec(b + "attn_k_norm.weight", s.head_dim, SynthTensor::Norm);
    }
    mat(b + "attn_output.weight", q_dim, E);
    if (s.post_norms) vec(b + "post_attention_norm.weight", E, SynthTensor::Norm);
    vec(b + "ffn_norm.weight", E, SynthTensor::Norm);
    if (!s.fused_gate_up) mat(b + "ffn_gate.weight", E, s.n_ff);
    mat(b + "ffn_up.weight", E, s.fused_gate_up ? 2 * uint64_t(s.n_ff) : s.n_ff);
    mat(b + "ffn_down.weight", s.n_ff, E);
    if (s.post_norms) vec(b + "post_ffw_norm.weight", E, SynthTensor::Norm);
  }
  vec("output_norm.weight", E, SynthTensor::Norm);
  if (!s.tied) mat("output.weight", E, s.n_vocab);
  return t;
}

SynthResult write_model(const ModelShape& shape_in, const SynthOptions& opt, const std::string& path) {
  ModelShape s = shape_in;
  if (opt.n_vocab) s.n_vocab = *opt.n_vocab;
  if (opt.n_layer) s.n_layer = *opt.n_layer;
  if (s.n_layer == 0) loom::fail("synth: --layers must be at least 1");
  if (!synth_supports(opt.type))
    loom::fail("synth: not supported: writing {} weights (synth writes f32, f16, bf16, q8_0; use `loom quantize` "
               "for other types)", gguf::type_name(opt.type));
  auto tensors = synth_tensors(s, opt.type);
  for (const auto& t : tensors)
    if (!gguf::row_bytes(t.type, t.dims[0]))
      loom::fail("synth: tensor '{}': row length {} is not a multiple of the {} block size", t.name, t.dims[0],
                 gguf::type_name(t.type));
  BpeVocab vocab = make_bpe_vocab(s.n_vocab);
  // llama.cpp gives a file whose general.name says Phi-3 the strip attributes of Phi-3's own
  // vocabulary by token text, and fails to load one without "<unk>", "<s>" and "</s>": the phi3
  // shapes' vocabularies end with those three control tokens in place of their last reserved ones.
  if (s.arch == "phi3") {
    size_t i = vocab.tokens.size();
    for (const char* t : {"</s>", "<s>", "<unk>"}) {
      if (i == 0 || vocab.tokens[--i].rfind("<|reserved_", 0) != 0)
        loom::fail("synth: vocab {} leaves no room for phi3's control tokens", s.n_vocab);
      vocab.tokens[i] = t;
    }
  }

  gguf::Writer w;
  const std::string a = s.arch;
  w.set("general.architecture", Value::str(a));
  w.set("general.name", Value::str(fmt::format("loom synth {} (seed {})", s.name, opt.seed)));
  w.set("general.file_type", u32(file_type(opt.type)));
  w.set("general.quantization_version", u32(2));
  w.set(a + ".context_length", u32(s.n_ctx));
  w.set(a + ".embedding_length", u32(s.n_embd));
  w.set(a + ".block_count", u32(s.n_layer));
  w.set(a + ".feed_forward_length", u32(s.n_ff));
  w.set(a + ".attention.head_count", u32(s.n_head));
  w.set(a + ".attention.head_count_kv", u32(s.n_head_kv));
  w.set(a + ".attention.key_length", u32(s.head_dim));
  w.set(a + ".attention.value_length", u32(s.head_dim));
  w.set(a + ".attention.layer_norm_rms_epsilon", Value::f32(s.rms_eps));
  w.set(a + ".rope.freq_base", Value::f32(s.rope_base));
  w.set(a + ".rope.dimension_count", u32(s.head_dim));
  w.set(a + ".vocab_size", u32(s.n_vocab));
  if (s.sliding_window) w.set(a + ".attention.sliding_window", u32(s.sliding_window));
  w.set("tokenizer.ggml.model", Value::str("gpt2"));
  w.set("tokenizer.ggml.pre", Value::str("default"));
  w.set("tokenizer.ggml.tokens", string_array(vocab.tokens));
  std::vector<Value> types;
  for (int32_t ty : vocab.token_types) types.push_back(Value::i32(ty));
  w.set("tokenizer.ggml.token_type", Value::array(ValueType::I32, std::move(types)));
  w.set("tokenizer.ggml.merges", string_array(vocab.merges));
  w.set("tokenizer.ggml.bos_token_id", u32(vocab.bos_id));
  w.set("tokenizer.ggml.eos_token_id", u32(vocab.eos_id));
  w.set("tokenizer.ggml.padding_token_id", u32(vocab.eos_id));
  w.set("tokenizer.ggml.add_bos_token", Value::boolean(false));

  SynthResult res;
  for (const auto& t : tensors) {
    w.declare_tensor(t.name, t.dims, t.type);
    uint64_t n = 1;
    for (auto d : t.dims) n *= d;
    res.params += n;
    res.bytes += *gguf::row_bytes(t.type, t.dims[0]) * (n / t.dims[0]);
  }
  res.tensors = tensors.size();

  // Rows in parallel (an 8B shape is 8e9 normal draws, ~5 minutes on one core): each row's part
  // of the tensor's stream is reached by skipping ahead (Normal::at), so the file has the same
  // bytes as one sequential pass — rows have an even length, so no row starts mid-pair.
  const unsigned workers = std::max(1u, std::min(64u, std::thread::hardware_concurrency()));
  w.write(path, [&](size_t i, const gguf::Writer::TensorDecl& d, std::span<uint8_t> out) {
    const SynthTensor& t = tensors[i];
    const uint64_t seed = stream_seed(opt.seed, t.name);
    const uint64_t row = d.dims[0], rows = d.dims.size() > 1 ? d.nbytes / *gguf::row_bytes(d.type, row) : 1;
    const uint64_t rb = *gguf::row_bytes(d.type, row);
    const double centre = t.kind == SynthTensor::Norm ? 1.0 : 0.0;
    // A random network of std 0.02 everywhere has a gain of ~0.02 sqrt(width) a layer: 0.48 at
    // the 135M's 576, 0.9 at the 1B's 2,048, 1.28 at the 8B's 4,096 — past 1 a rounding in one
    // layer grows through the next (the 8B file's logits moved KL 0.016 with only the reference's
    // KV cache in f32). --gain sets std = gain / sqrt(fan-in) for the layers' matrices, so every
    // width gets one gain; the embeddings and output head keep 0.02 (the logits' scale).
    const bool in_layer = t.kind == SynthTensor::Matrix && t.name.rfind("blk.", 0) == 0;
    const double std_dev =
        in_layer && opt.gain > 0 ? std::min(kWeightStd, opt.gain / std::sqrt(double(row))) : kWeightStd;
    auto fill = [&](uint64_t r0, uint64_t r1) {
      Normal rng = Normal::at(seed, r0 * row);
      std::vector<float> x(row);
      for (uint64_t r = r0; r < r1; ++r) {
        for (auto& v : x) v = float(centre + std_dev * rng.next());
        encode_row(x.data(), row, d.type, out.data() + r * rb);
      }
    };
    const uint64_t n = row % 2 ? 1 : std::min<uint64_t>(workers, (rows * row + (1 << 20) - 1) >> 20);
    if (n <= 1) return fill(0, rows);
    std::vector<std::thread> pool;
    for (uint64_t k = 1; k < n; ++k) pool.emplace_back(fill, rows * k / n, rows * (k + 1) / n);
    fill(0, rows / n);
    for (auto& th : pool) th.join();
  });
  return res;
}

}  // namespace loom::synth
