// The porter's building blocks: hyper-parameters read with llama.cpp's keys and defaults, and a
// Program that binds GGUF tensors as weights and appends ops to `@step`, tracking every
// value's width so a mismatched tensor fails at port time with its name.
//
// Values are [T x width] f32 (the token stream); ops take ir::Operands (%value or @weight).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "ir/module.h"

namespace port {

using ir::Operand;

// What every decoder-only transformer in GGUF states under `<arch>.`; names follow llama.cpp's
// llama_hparams. Required keys throw naming the key; the rest take llama.cpp's defaults.
struct HParams {
  std::string arch;
  int64_t n_layer = 0, n_embd = 0, n_ff = 0, n_head = 0, n_kv_head = 0;
  int64_t head_dim = 0;   // attention.key_length, default n_embd / n_head
  int64_t value_dim = 0;  // attention.value_length, default n_embd / n_head
  int64_t n_rot = 0;      // rope.dimension_count, default head_dim
  int64_t n_vocab = 0;    // rows of token_embd.weight
  int64_t n_ctx_train = 0;
  double rope_base = 10000.0;
  double rope_freq_scale = 1.0;  // 1 / rope.scaling.factor for linear scaling
  double eps = 0;                // attention.layer_norm_rms_epsilon
  int64_t sliding_window = 0;    // attention.sliding_window, 0 when absent
  int64_t bos = -1, eos = -1;
};
HParams read_hparams(const gguf::File& f);

// `<arch>.<key>` look-ups for arch-specific extras.
std::optional<double> arch_float(const gguf::File& f, const std::string& key);
std::optional<int64_t> arch_int(const gguf::File& f, const std::string& key);

struct RopeSpec {
  std::string mode;  // "normal" (llama) or "neox" (qwen, gemma, phi3)
  int64_t head_dim = 0, n_rot = 0;
  double base = 10000.0, freq_scale = 1.0;
  std::optional<Operand> freqs;  // per-frequency divisors (llama3 rope_freqs, phi3 rope_factors)
};

struct AttentionSpec {
  int64_t layer = 0, n_head = 0, n_kv_head = 0, head_dim = 0, value_dim = 0;
  double scale = 1.0;
  int64_t window = 0;   // sliding window, 0 = full causal
  double softcap = 0;   // attention logit soft-capping, 0 = none
  // > 0: the queries are multiplied by this (a scale op after the rotary embedding) and the
  // attention itself has scale 1, as llama.cpp builds some families (gemma3). Not the same
  // as scale = q_prescale once q is rounded to f16 for q·k, unless it is a power of two.
  double q_prescale = 0;
};

class Program {
 public:
  Program(const gguf::File& f, const HParams& hp);

  const gguf::File& file() const { return f_; }
  const HParams& hp() const { return hp_; }
  ir::Attrs& attrs() { return m_.attrs; }

  // Binds a GGUF tensor as a weight (once; later calls return the same @name). Throws naming
  // the tensor when it is missing or its type has no Loom element type.
  Operand weight(const std::string& gguf_name);
  std::optional<Operand> maybe_weight(const std::string& gguf_name);
  bool has_tensor(const std::string& gguf_name) const { return f_.find_tensor(gguf_name) != nullptr; }
  int64_t width(const Operand& x) const;  // last extent of a value or weight

  Operand tokens() const { return Operand::value("tok"); }
  Operand positions() const { return Operand::value("pos"); }

  // One method per op of ir/ops.h; `name` is the result's SSA name.
  Operand embed(const std::string& name, const Operand& table);
  Operand rms_norm(const std::string& name, const Operand& x, const Operand& w, double eps);
  Operand matmul(const std::string& name, const Operand& x, const Operand& w);
  Operand add(const std::string& name, const Operand& a, const Operand& b);
  Operand mul(const std::string& name, const Operand& a, const Operand& b);
  Operand scale(const std::string& name, const Operand& x, double factor);
  Operand softcap(const std::string& name, const Operand& x, double cap);
  Operand glu(const std::string& name, const std::string& opcode, const Operand& gate, const Operand& up);
  Operand slice(const std::string& name, const Operand& x, int64_t start, int64_t size);
  Operand rope(const std::string& name, const Operand& x, const RopeSpec& r);
  Operand attention(const std::string& name, const Operand& q, const Operand& k, const Operand& v,
                    const AttentionSpec& a);

  // Closes `@step` returning `logits`, adds the default schedule, and hands the module over.
  ir::Module finish(const Operand& logits);

 private:
  Operand emit(const std::string& name, const std::string& opcode, std::vector<Operand> operands,
               ir::Attrs attrs, int64_t width);
  const gguf::File& f_;
  HParams hp_;
  ir::Module m_;
  ir::Func step_;
  std::map<std::string, std::string, std::less<>> bound_;  // gguf name -> weight name
  std::map<std::string, int64_t, std::less<>> widths_;     // value name -> width
};

// Fills the `gguf.sha256` attribute the Program left empty, or drops it when `hex` is empty.
void record_sha256(ir::Module& m, const std::string& hex);

// Loom's element type for a GGUF tensor type; nullopt for types Loom programs cannot hold.
std::optional<ir::Elem> elem_of(gguf::TensorType t);
// The ir::Type of a GGUF tensor: dims reversed (outermost first), element type mapped.
ir::Type type_of(const gguf::TensorInfo& t);
// `blk.3.attn_q.weight` -> `blk3.attn_q`, `token_embd.weight` -> `token_embd`.
std::string weight_name(const std::string& gguf_name);

}  // namespace port
