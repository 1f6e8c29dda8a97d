#include "synth/model.h"

#include <fmt/format.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "common/error.h"
#include "gguf/writer.h"
#include "quant/mixture.h"
#include "quant/quant.h"
#include "synth/rng.h"
#include "synth/vocab.h"

namespace loom::synth {
namespace {

using gguf::TensorType;
using gguf::Value;
using gguf::ValueType;

constexpr double kWeightStd = 0.02;

// Encodes one row of floats into `out` in type t (the row's exact byte size).
void encode_row(const float* x, uint64_t n, TensorType t, uint8_t* out) {
  switch (t) {
    case TensorType::F32: std::memcpy(out, x, n * 4); return;
    case TensorType::F16:
      for (uint64_t i = 0; i < n; ++i) {
        uint16_t h = quant::fp32_to_fp16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case TensorType::BF16:
      for (uint64_t i = 0; i < n; ++i) {
        uint16_t h = quant::fp32_to_bf16(x[i]);
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
        uint16_t dh = quant::fp32_to_fp16(d);
        std::memcpy(blk, &dh, 2);
        for (int i = 0; i < 32; ++i) blk[2 + i] = uint8_t(int8_t(std::lround(v[i] * id)));
      }
      return;
    case TensorType::Q4_0: case TensorType::Q4_1: case TensorType::Q5_0: case TensorType::Q5_1:
      quant::quantize_row(t, x, out, int64_t(n));  // ggml's reference quantizers (no search: cheap)
      return;
    default: loom::fail("synth: cannot encode {}", gguf::type_name(t));
  }
}

// The k-quants are written as random codes, not as a quantized draw: their quantizers search
// each group's scale (make_qkx2_quants, make_qx_quants), 44 of the 70 s that the 1B shape's
// Q4_K_M file took through f16 + `loom quantize` on 2 cores (BENCHMARKS.md; the 8B's took 71-110 s
// of each 16-core device call), and a random code costs a random bit. Every code bit is uniform, so a code is uniform over its range
// (Q4_K 0..15, Q5_K 0..31, Q6_K 0..63), and each block's scales are fixed so that the values have
// mean ~0 and standard deviation `sd` (Q6_K, having no offset, keeps a mean of -d * sc / 2, 2.7%
// of sd): the same bytes a token for the kernels, other values than a quantized normal draw.
bool random_codes(TensorType t) {
  return t == TensorType::Q4_K || t == TensorType::Q5_K || t == TensorType::Q6_K;
}

void random_code_row(TensorType t, SplitMix64& g, double sd, uint8_t* out, uint64_t n) {
  const uint64_t bb = uint64_t(quant::block_bytes(t)), blocks = n / quant::kQK_K;
  for (uint64_t i = 0; i < bb * blocks; i += 8) {
    const uint64_t r = g.next();
    std::memcpy(out + i, &r, std::min<uint64_t>(8, bb * blocks - i));
  }
  // Uniform codes over 0 .. L - 1: mean (L - 1) / 2, standard deviation sqrt((L^2 - 1) / 12).
  auto code_sd = [](double L) { return std::sqrt((L * L - 1) / 12); };
  for (uint64_t b = 0; b < blocks; ++b) {
    uint8_t* blk = out + b * bb;
    if (t == TensorType::Q6_K) {  // x = d * sc * (q - 32)
      constexpr int kSc = 16;
      auto* q = reinterpret_cast<quant::BlockQ6_K*>(blk);
      for (auto& sc : q->scales) sc = kSc;
      q->d = quant::fp32_to_fp16(float(sd / (kSc * code_sd(64))));
      continue;
    }
    // Q4_K, Q5_K: x = d * sc * q - dmin * m with every group's 6-bit sc and m set to 8 (the
    // packing of get_scale_min_k4: bytes 0-3 the scales, 4-7 the mins, 8-11 both nibbles).
    constexpr uint8_t kSc = 8;
    const double L = t == TensorType::Q4_K ? 16 : 32, d = sd / (kSc * code_sd(L));
    auto* q = reinterpret_cast<quant::BlockQ4_K*>(blk);  // Q5_K's d, dmin and scales lie alike
    static_assert(offsetof(quant::BlockQ4_K, scales) == offsetof(quant::BlockQ5_K, scales));
    for (int j = 0; j < 8; ++j) q->scales[j] = kSc;
    for (int j = 8; j < 12; ++j) q->scales[j] = uint8_t((kSc & 15) | ((kSc & 15) << 4));
    q->d = quant::fp32_to_fp16(float(d));
    q->dmin = quant::fp32_to_fp16(float(d * (L - 1) / 2));  // dmin * m = d * sc * mean code
  }
}

Value u32(uint64_t x) { return Value::u32(uint32_t(x)); }

Value string_array(const std::vector<std::string>& xs) {
  std::vector<Value> v;
  v.reserve(xs.size());
  for (const auto& s : xs) v.push_back(Value::str(s));
  return Value::array(ValueType::STRING, std::move(v));
}

// general.file_type (llama_ftype) of a file whose matrices are all of type t: the file type of
// the same name (Q8_0, Q4_0, ...), else 1024, llama.cpp's "guessed" (Q4_K, Q5_K, Q6_K alone).
uint32_t file_type(TensorType t) {
  switch (t) {
    case TensorType::F32: return 0;
    case TensorType::F16: return 1;
    case TensorType::BF16: return 32;
    default: break;
  }
  const auto f = quant::file_type_from_name(gguf::type_name(t));
  return f && f->base == t ? f->llama_ftype : 1024;
}

}  // namespace

bool synth_supports(TensorType t) {
  switch (t) {
    case TensorType::F32: case TensorType::F16: case TensorType::BF16: case TensorType::Q8_0:
    case TensorType::Q4_0: case TensorType::Q4_1: case TensorType::Q5_0: case TensorType::Q5_1:
      return true;
    default: return random_codes(t);
  }
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
  constexpr const char* kWrites = "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K, q6_K";
  if (!opt.file_type && !synth_supports(opt.type))
    loom::fail("synth: not supported: writing {} weights (synth writes {}; use `loom quantize` for other types)",
               gguf::type_name(opt.type), kWrites);
  auto tensors = synth_tensors(s, opt.file_type ? TensorType::F16 : opt.type);
  if (opt.file_type) {  // the matrices' types as llama-quantize's mixture picks them
    std::vector<quant::TensorDesc> desc;
    for (const auto& t : tensors) desc.push_back({t.name, t.dims, t.type});
    const quant::ModelFacts facts{s.arch, int(s.n_layer), int(s.n_head), int(s.n_head_kv)};
    const auto chosen = quant::choose_types(facts, *opt.file_type, desc);
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (tensors[i].kind != SynthTensor::Matrix) continue;
      tensors[i].type = chosen[i].type;
      if (!synth_supports(chosen[i].type))
        loom::fail("synth: not supported: {} puts tensor '{}' in {} (synth writes {}; write f16 and use `loom "
                   "quantize`)", opt.file_type->name, tensors[i].name, gguf::type_name(chosen[i].type), kWrites);
    }
  }
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
  w.set("general.file_type", u32(opt.file_type ? opt.file_type->llama_ftype : file_type(opt.type)));
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
      if (random_codes(d.type)) {  // a row's stream starts at a fixed count: the same bytes on any thread count
        for (uint64_t r = r0; r < r1; ++r) {
          SplitMix64 g = SplitMix64::at(seed, r * (rb / 8 + 1));
          random_code_row(d.type, g, std_dev, out.data() + r * rb, row);
        }
        return;
      }
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
