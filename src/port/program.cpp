#include "port/program.h"

#include "port/port.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "common/error.h"

namespace port {
namespace {

using ir::Dim;

std::string key(const gguf::File& f, const std::string& k) { return f.architecture() + "." + k; }

// An integer that llama.cpp reads with get_key_or_arr: a scalar, or an array whose entries agree
// (one value per layer). Per-layer differences would need per-layer shapes; refuse them.
std::optional<int64_t> uniform_int(const gguf::File& f, const std::string& k) {
  const gguf::Value* v = f.find(k);
  if (!v) return std::nullopt;
  if (v->type != gguf::ValueType::ARRAY) return v->as_int();
  const auto& items = v->as_array().items;
  if (items.empty()) loom::fail("{}: metadata key '{}' is an empty array", f.path(), k);
  for (const auto& x : items)
    if (x.as_int() != items[0].as_int())
      loom::fail("{}: metadata key '{}' differs between layers, which Loom's porter does not support yet", f.path(), k);
  return items[0].as_int();
}

int64_t required_int(const gguf::File& f, const std::string& k) {
  auto v = uniform_int(f, k);
  if (!v) loom::fail("{}: missing metadata key '{}'", f.path(), k);
  if (*v <= 0) loom::fail("{}: metadata key '{}' must be positive, got {}", f.path(), k, *v);
  return *v;
}

std::string module_name(const gguf::File& f) {
  std::string raw = f.get_string("general.basename");
  if (!raw.empty() && f.find("general.size_label")) raw += "_" + f.get_string("general.size_label");
  if (raw.empty()) raw = f.get_string("general.name");
  if (raw.empty()) raw = std::filesystem::path(f.path()).stem().string();
  std::string out;
  for (char c : raw) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c));
    if (ok) out += char(std::tolower(static_cast<unsigned char>(c)));
    else if (!out.empty() && out.back() != '_') out += '_';
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "m_" + out;
  return out;
}

ir::Type rows_of(int64_t width, ir::Elem e = ir::Elem::f32) { return {{Dim::symbol("T"), Dim::of(width)}, e}; }

}  // namespace

std::optional<double> arch_float(const gguf::File& f, const std::string& k) {
  const std::string full = key(f, k);
  if (!f.find(full)) return std::nullopt;
  return f.get_float(full, 0.0);
}

std::optional<int64_t> arch_int(const gguf::File& f, const std::string& k) { return uniform_int(f, key(f, k)); }

HParams read_hparams(const gguf::File& f) {
  HParams h;
  h.arch = f.architecture();
  if (h.arch.empty()) loom::fail("{}: no general.architecture key", f.path());
  h.n_layer = required_int(f, key(f, "block_count"));
  h.n_embd = required_int(f, key(f, "embedding_length"));
  h.n_ff = required_int(f, key(f, "feed_forward_length"));
  h.n_head = required_int(f, key(f, "attention.head_count"));
  h.n_kv_head = uniform_int(f, key(f, "attention.head_count_kv")).value_or(h.n_head);
  h.head_dim = uniform_int(f, key(f, "attention.key_length")).value_or(h.n_embd / h.n_head);
  h.value_dim = uniform_int(f, key(f, "attention.value_length")).value_or(h.n_embd / h.n_head);
  h.n_rot = uniform_int(f, key(f, "rope.dimension_count")).value_or(h.head_dim);
  h.n_ctx_train = required_int(f, key(f, "context_length"));
  if (h.n_kv_head <= 0 || h.n_head % h.n_kv_head != 0)
    loom::fail("{}: head_count {} is not a multiple of head_count_kv {}", f.path(), h.n_head, h.n_kv_head);
  const gguf::TensorInfo& embd = f.tensor("token_embd.weight");
  if (embd.dims.size() != 2) loom::fail("{}: token_embd.weight must be 2-D", f.path());
  h.n_vocab = int64_t(embd.dims[1]);

  h.rope_base = f.get_float(key(f, "rope.freq_base"), 10000.0);
  // llama.cpp: rope.scale_linear, else rope.scaling.factor; scaling type "none" never scales.
  double factor = f.get_float(key(f, "rope.scale_linear"), 0.0);
  if (factor == 0.0) factor = f.get_float(key(f, "rope.scaling.factor"), 0.0);
  const std::string scaling = f.get_string(key(f, "rope.scaling.type"), "linear");
  if (scaling == "linear") h.rope_freq_scale = factor == 0.0 ? 1.0 : double(1.0f / float(factor));
  else if (scaling != "none")
    loom::fail("{}: rope scaling type '{}' ({}) is not supported by the rope op yet", f.path(), scaling,
               key(f, "rope.scaling.type"));

  const std::string eps_key = key(f, "attention.layer_norm_rms_epsilon");
  if (!f.find(eps_key)) loom::fail("{}: missing metadata key '{}'", f.path(), eps_key);
  h.eps = f.get_float(eps_key, 0.0);
  h.sliding_window = uniform_int(f, key(f, "attention.sliding_window")).value_or(0);
  h.bos = f.get_int("tokenizer.ggml.bos_token_id", -1);
  h.eos = f.get_int("tokenizer.ggml.eos_token_id", -1);
  return h;
}

std::optional<ir::Elem> elem_of(gguf::TensorType t) {
  using T = gguf::TensorType;
  using E = ir::Elem;
  switch (t) {
    case T::F32: return E::f32;
    case T::F16: return E::f16;
    case T::BF16: return E::bf16;
    case T::Q4_0: return E::q4_0;
    case T::Q4_1: return E::q4_1;
    case T::Q5_0: return E::q5_0;
    case T::Q5_1: return E::q5_1;
    case T::Q8_0: return E::q8_0;
    case T::Q2_K: return E::q2_k;
    case T::Q3_K: return E::q3_k;
    case T::Q4_K: return E::q4_k;
    case T::Q5_K: return E::q5_k;
    case T::Q6_K: return E::q6_k;
    case T::Q8_K: return E::q8_k;
    default: return std::nullopt;
  }
}

ir::Type type_of(const gguf::TensorInfo& t) {
  auto e = elem_of(t.type);
  if (!e)
    loom::fail("tensor '{}' has type {}, which Loom programs cannot hold (supported: f32, f16, bf16, q4_0, q4_1, "
               "q5_0, q5_1, q8_0, q2_K..q6_K, q8_K)", t.name, gguf::type_name(t.type));
  ir::Type ty;
  ty.elem = *e;
  for (auto it = t.dims.rbegin(); it != t.dims.rend(); ++it) ty.shape.push_back(Dim::of(int64_t(*it)));
  return ty;
}

std::string weight_name(const std::string& g) {
  std::string n = g;
  if (n.size() > 7 && n.ends_with(".weight")) n.resize(n.size() - 7);
  if (n.starts_with("blk.")) {
    const size_t dot = n.find('.', 4);
    if (dot != std::string::npos) n = "blk" + n.substr(4, dot - 4) + n.substr(dot);
  }
  return n;
}

void record_sha256(ir::Module& m, const std::string& hex) {
  auto it = std::find_if(m.attrs.begin(), m.attrs.end(), [](const ir::Attr& a) { return a.name == "gguf.sha256"; });
  if (it == m.attrs.end()) return;
  if (hex.empty()) m.attrs.erase(it);
  else it->value = hex;
}

void set_context(ir::Module& m, int64_t n_ctx) {
  for (auto& d : m.dims)
    if (d.name == "T" || d.name == "P") d.hi = n_ctx;
  for (auto& a : m.attrs)
    if (a.name == "kv.n_ctx") a.value = n_ctx;
}

void record_weights_path(ir::Module& m, const std::string& gguf_path, const std::string& program_path) {
  namespace fs = std::filesystem;
  // Both folders made absolute with symlinks resolved: `dir/../x` is resolved by the kernel
  // through the real folder, so a path computed between unresolved names could miss.
  const bool to_stdout = program_path.empty() || program_path == "-";
  const fs::path from = fs::weakly_canonical(to_stdout ? fs::current_path() : fs::absolute(program_path).parent_path());
  const fs::path weights = fs::weakly_canonical(fs::absolute(gguf_path).parent_path()) / fs::path(gguf_path).filename();
  const std::string rel = weights.lexically_relative(from).generic_string();
  const std::string value = rel.empty() ? weights.generic_string() : rel;
  for (auto& a : m.attrs)
    if (a.name == "gguf.file") {
      a.value = value;
      return;
    }
  m.attrs.push_back({"gguf.file", value});
}

Program::Program(const gguf::File& f, const HParams& hp) : f_(f), hp_(hp) {
  m_.name = module_name(f);
  auto& a = m_.attrs;
  a.push_back({"arch", hp.arch});
  a.push_back({"name", f.get_string("general.name", m_.name)});
  a.push_back({"gguf.sha256", std::string()});  // port() fills it in (PortOptions)
  a.push_back({"gguf.file", std::filesystem::path(f.path()).filename().string()});
  a.push_back({"n_layer", hp.n_layer});
  a.push_back({"n_embd", hp.n_embd});
  a.push_back({"n_head", hp.n_head});
  a.push_back({"n_kv_head", hp.n_kv_head});
  a.push_back({"head_dim", hp.head_dim});
  a.push_back({"value_dim", hp.value_dim});
  a.push_back({"n_ff", hp.n_ff});
  a.push_back({"n_vocab", hp.n_vocab});
  a.push_back({"n_ctx_train", hp.n_ctx_train});
  a.push_back({"n_rot", hp.n_rot});
  a.push_back({"rope.base", hp.rope_base});
  a.push_back({"rope.freq_scale", hp.rope_freq_scale});
  a.push_back({"eps", hp.eps});
  a.push_back({"bos_id", hp.bos});
  a.push_back({"eos_id", hp.eos});
  step_.name = "step";
  step_.params = {{"tok", {{Dim::symbol("T")}, ir::Elem::i32}}, {"pos", {{Dim::symbol("T")}, ir::Elem::i32}}};
  widths_["tok"] = 1;
  widths_["pos"] = 1;
}

Operand Program::weight(const std::string& g) {
  if (auto it = bound_.find(g); it != bound_.end()) return Operand::weight(it->second);
  const gguf::TensorInfo* t = f_.find_tensor(g);
  if (!t) loom::fail("{} ({}): missing tensor '{}'", f_.path(), hp_.arch, g);
  const std::string n = weight_name(g);
  if (m_.find_weight(n)) loom::fail("{}: tensors '{}' and another both map to weight @{}", f_.path(), g, n);
  m_.weights.push_back({n, type_of(*t), g});
  bound_[g] = n;
  return Operand::weight(n);
}

std::optional<Operand> Program::maybe_weight(const std::string& g) {
  if (!has_tensor(g)) return std::nullopt;
  return weight(g);
}

int64_t Program::width(const Operand& x) const {
  if (x.kind == Operand::Kind::weight) {
    const ir::Weight* w = m_.find_weight(x.name);
    if (!w) loom::fail("porter: unknown weight @{}", x.name);
    return w->type.shape.back().value;
  }
  auto it = widths_.find(x.name);
  if (it == widths_.end()) loom::fail("porter: unknown value %{}", x.name);
  return it->second;
}

Operand Program::emit(const std::string& name, const std::string& opcode, std::vector<Operand> operands,
                      ir::Attrs attrs, int64_t width) {
  if (widths_.count(name)) loom::fail("porter: value %{} defined twice", name);
  widths_[name] = width;
  step_.body.push_back({name, opcode, std::move(operands), std::move(attrs), rows_of(width)});
  return Operand::value(name);
}

namespace {
// Names a weight by its GGUF tensor for error messages.
std::string describe(const ir::Module& m, const Operand& w) {
  const ir::Weight* x = m.find_weight(w.name);
  return x ? fmt::format("'{}'", x->gguf_name) : "%" + w.name;
}
int64_t rank_of(const ir::Module& m, const Operand& w) {
  const ir::Weight* x = m.find_weight(w.name);
  return x ? int64_t(x->type.shape.size()) : 2;
}
int64_t rows_of_weight(const ir::Module& m, const Operand& w) {
  const ir::Weight* x = m.find_weight(w.name);
  return x && x->type.shape.size() == 2 ? x->type.shape[0].value : 0;
}
}  // namespace

Operand Program::embed(const std::string& name, const Operand& table) {
  if (rank_of(m_, table) != 2) loom::fail("{}: embedding table {} must be 2-D", f_.path(), describe(m_, table));
  return emit(name, "embed", {table, tokens()}, {}, width(table));
}

Operand Program::rms_norm(const std::string& name, const Operand& x, const Operand& w, double eps) {
  const int64_t g = width(w), d = width(x);
  if (rank_of(m_, w) != 1 || g <= 0 || d % g != 0)
    loom::fail("{}: norm weight {} has {} elements, which does not divide the width {} of %{}", f_.path(),
               describe(m_, w), g, d, x.name);
  return emit(name, "rms_norm", {x, w}, {{"eps", eps}}, d);
}

Operand Program::matmul(const std::string& name, const Operand& x, const Operand& w) {
  if (rank_of(m_, w) != 2 || width(w) != width(x))
    loom::fail("{}: {} has rows of {} elements, but %{} is {} wide", f_.path(), describe(m_, w), width(w), x.name,
               width(x));
  return emit(name, "matmul", {x, w}, {}, rows_of_weight(m_, w));
}

Operand Program::add(const std::string& name, const Operand& a, const Operand& b) {
  if (width(a) != width(b))
    loom::fail("{}: cannot add {} ({} wide) to %{} ({} wide)", f_.path(), describe(m_, b), width(b), a.name, width(a));
  return emit(name, "add", {a, b}, {}, width(a));
}

Operand Program::mul(const std::string& name, const Operand& a, const Operand& b) {
  if (width(a) != width(b)) loom::fail("porter: mul of %{} and %{} with different widths", a.name, b.name);
  return emit(name, "mul", {a, b}, {}, width(a));
}

Operand Program::scale(const std::string& name, const Operand& x, double factor) {
  return emit(name, "scale", {x}, {{"factor", factor}}, width(x));
}

Operand Program::softcap(const std::string& name, const Operand& x, double cap) {
  return emit(name, "softcap", {x}, {{"cap", cap}}, width(x));
}

Operand Program::glu(const std::string& name, const std::string& opcode, const Operand& gate, const Operand& up) {
  if (width(gate) != width(up))
    loom::fail("{}: gate %{} ({} wide) and up %{} ({} wide) differ", f_.path(), gate.name, width(gate), up.name,
               width(up));
  return emit(name, opcode, {gate, up}, {}, width(gate));
}

Operand Program::slice(const std::string& name, const Operand& x, int64_t start, int64_t size) {
  if (start < 0 || size <= 0 || start + size > width(x))
    loom::fail("{}: columns [{}, {}) lie outside %{} ({} wide)", f_.path(), start, start + size, x.name, width(x));
  return emit(name, "slice", {x}, {{"start", start}, {"size", size}}, size);
}

Operand Program::rope(const std::string& name, const Operand& x, const RopeSpec& r) {
  if (r.head_dim <= 0 || width(x) % r.head_dim != 0 || r.n_rot <= 0 || r.n_rot > r.head_dim || r.n_rot % 2)
    loom::fail("{}: rope of %{} ({} wide) with head_dim {} and n_rot {} is invalid", f_.path(), x.name, width(x),
               r.head_dim, r.n_rot);
  std::vector<Operand> ops = {x, positions()};
  if (r.freqs) {
    if (width(*r.freqs) != r.n_rot / 2)
      loom::fail("{}: rope frequency factors {} have {} elements, want n_rot/2 = {}", f_.path(),
                 describe(m_, *r.freqs), width(*r.freqs), r.n_rot / 2);
    ops.push_back(*r.freqs);
  }
  ir::Attrs at = {{"head_dim", r.head_dim}, {"n_rot", r.n_rot}, {"base", r.base}, {"mode", r.mode}};
  if (r.freq_scale != 1.0) at.push_back({"freq_scale", r.freq_scale});
  return emit(name, "rope", std::move(ops), std::move(at), width(x));
}

Operand Program::attention(const std::string& name, const Operand& q, const Operand& k, const Operand& v,
                           const AttentionSpec& a) {
  if (width(q) != a.n_head * a.head_dim || width(k) != a.n_kv_head * a.head_dim ||
      width(v) != a.n_kv_head * a.value_dim)
    loom::fail("{}: layer {} attention widths q {}, k {}, v {} do not match {} heads / {} kv heads of {}/{}",
               f_.path(), a.layer, width(q), width(k), width(v), a.n_head, a.n_kv_head, a.head_dim, a.value_dim);
  ir::Attrs at = {{"layer", a.layer},         {"n_head", a.n_head},       {"n_kv_head", a.n_kv_head},
                  {"head_dim", a.head_dim},   {"value_dim", a.value_dim}, {"scale", a.scale}};
  if (a.window > 0) at.push_back({"window", a.window});
  if (a.softcap > 0) at.push_back({"softcap", a.softcap});
  return emit(name, "attention", {q, k, v, positions()}, std::move(at), a.n_head * a.value_dim);
}

ir::Module Program::finish(const Operand& logits) {
  const int64_t n_ctx = hp_.n_ctx_train;
  m_.attrs.push_back({"kv.n_layer", hp_.n_layer});
  m_.attrs.push_back({"kv.n_kv_head", hp_.n_kv_head});
  m_.attrs.push_back({"kv.head_dim", hp_.head_dim});
  m_.attrs.push_back({"kv.value_dim", hp_.value_dim});
  m_.attrs.push_back({"kv.n_ctx", n_ctx});
  m_.dims = {{"T", 1, n_ctx}, {"P", 0, n_ctx}};
  step_.results = {logits.name};
  step_.result_types = {rows_of(width(logits))};
  m_.funcs.push_back(std::move(step_));
  // threads = 0: all cores. The tuner rewrites this section; the graph above never reads it.
  m_.schedule.push_back({"", "", {{"threads", int64_t(0)}}, {}});
  return std::move(m_);
}

}  // namespace port
