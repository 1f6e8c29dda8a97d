// The porter on real models (when provisioned), on `loom synth` files of every shape it has,
// and on hand-written tiny files (phi3, broken ones): each program verifies, round-trips
// through the text form, binds to its file, and says what llama.cpp's graph says.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>

#include "common/error.h"
#include "gguf/file.h"
#include "gguf/writer.h"
#include "ir/text.h"
#include "ir/verify.h"
#include "port/port.h"
#include "support/real_models.h"
#include "synth/model.h"

namespace fs = std::filesystem;

namespace {

fs::path temp_dir() {
  fs::path d = fs::temp_directory_path() / ("loom_port_test_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const loom::Error& e) {
    return e.what();
  }
  return "";
}

std::vector<const ir::Op*> ops_named(const ir::Module& m, const std::string& opcode) {
  std::vector<const ir::Op*> out;
  for (const auto& op : m.funcs.at(0).body)
    if (op.opcode == opcode) out.push_back(&op);
  return out;
}

const ir::Op* op_result(const ir::Module& m, const std::string& result) {
  for (const auto& op : m.funcs.at(0).body)
    if (op.result == result) return &op;
  return nullptr;
}

// Everything every ported program must satisfy.
void check_program(const ir::Module& m, const gguf::File& f) {
  ASSERT_NO_THROW(ir::verify(m));
  EXPECT_EQ(ir::attr_string(m.attrs, "gguf.sha256"), f.sha256());
  EXPECT_EQ(ir::attr_string(m.attrs, "arch"), f.architecture());
  EXPECT_NO_THROW(port::check_bindings(m, f));
  std::map<std::string, int> bound;
  for (const auto& w : m.weights) EXPECT_EQ(++bound[w.gguf_name], 1) << w.gguf_name << " bound twice";
  const std::string text = ir::print(m);
  const ir::Module back = ir::parse(text, "ported.loom");
  EXPECT_NO_THROW(ir::verify(back));
  EXPECT_TRUE(back == m) << "parse(print(m)) differs from m";
  EXPECT_EQ(ir::print(back), text);
  const ir::Func& step = m.funcs.at(0);
  EXPECT_EQ(step.name, "step");
  ASSERT_EQ(step.result_types.size(), 1u);
  EXPECT_EQ(step.result_types[0].shape.back().value, ir::attr_int(m.attrs, "n_vocab"));
  EXPECT_EQ(int64_t(ops_named(m, "attention").size()), ir::attr_int(m.attrs, "n_layer"));
}

struct Ported {
  std::unique_ptr<gguf::File> file;
  ir::Module module;
};

Ported synth(const std::string& shape, uint32_t layers = 0) {
  auto s = loom::synth::find_shape(shape);
  loom::synth::SynthOptions opt;
  opt.type = gguf::TensorType::F32;
  if (layers) opt.n_layer = layers;
  const fs::path p = temp_dir() / (shape + std::to_string(layers) + ".gguf");
  loom::synth::write_model(s, opt, p.string());
  Ported r{std::make_unique<gguf::File>(gguf::File::open(p.string())), {}};
  r.module = port::port(*r.file);
  return r;
}

// A tiny GGUF written by hand: metadata under `arch.`, zero-filled F32 tensors (GGUF dims).
struct TinyFile {
  gguf::Writer w;
  std::string arch;
  explicit TinyFile(std::string a, int64_t L = 2, int64_t E = 32, int64_t H = 4, int64_t KV = 2, int64_t F = 48)
      : arch(std::move(a)) {
    w.set("general.architecture", gguf::Value::str(arch));
    w.set(arch + ".block_count", gguf::Value::u32(L));
    w.set(arch + ".context_length", gguf::Value::u32(128));
    w.set(arch + ".embedding_length", gguf::Value::u32(E));
    w.set(arch + ".feed_forward_length", gguf::Value::u32(F));
    w.set(arch + ".attention.head_count", gguf::Value::u32(H));
    w.set(arch + ".attention.head_count_kv", gguf::Value::u32(KV));
    w.set(arch + ".attention.layer_norm_rms_epsilon", gguf::Value::f32(1e-5f));
  }
  void tensor(const std::string& name, std::vector<uint64_t> dims, gguf::TensorType t = gguf::TensorType::F32) {
    uint64_t n = 1;
    for (auto d : dims) n *= d;
    const auto tr = *gguf::type_traits(t);
    w.add_tensor(name, dims, t, std::vector<uint8_t>(n / tr.block_elems * tr.block_bytes));
  }
  std::unique_ptr<gguf::File> open(const std::string& stem) {
    const fs::path p = temp_dir() / (stem + ".gguf");
    w.write(p.string());
    return std::make_unique<gguf::File>(gguf::File::open(p.string()));
  }
};

// Phi-3 mini's layout in miniature: fused attn_qkv, fused [gate | up] ffn_up, untied output.
std::unique_ptr<gguf::File> tiny_phi3(const std::string& stem) {
  const uint64_t E = 32, H = 4, KV = 2, D = 8, F = 48, V = 64;
  TinyFile t("phi3", 2, E, H, KV, F);
  t.w.set("phi3.rope.dimension_count", gguf::Value::u32(D));
  t.w.set("phi3.attention.sliding_window", gguf::Value::u32(16));
  t.tensor("token_embd.weight", {E, V});
  for (int l = 0; l < 2; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    t.tensor(b + "attn_norm.weight", {E});
    t.tensor(b + "attn_qkv.weight", {E, H * D + 2 * KV * D});
    t.tensor(b + "attn_output.weight", {H * D, E});
    t.tensor(b + "ffn_norm.weight", {E});
    t.tensor(b + "ffn_up.weight", {E, 2 * F});
    t.tensor(b + "ffn_down.weight", {F, E});
  }
  t.tensor("output_norm.weight", {E});
  t.tensor("output.weight", {E, V});
  return t.open(stem);
}

// A llama file with one tensor left out (or given another type).
std::unique_ptr<gguf::File> tiny_llama(const std::string& stem, const std::string& skip = "",
                                       const std::string& retype = "", gguf::TensorType type = gguf::TensorType::F32) {
  const uint64_t E = 32, F = 48, V = 64, Q = 32, K = 16;
  TinyFile t("llama");
  auto add = [&](const std::string& n, std::vector<uint64_t> d) {
    if (n != skip) t.tensor(n, d, n == retype ? type : gguf::TensorType::F32);
  };
  add("token_embd.weight", {E, V});
  for (int l = 0; l < 2; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    add(b + "attn_norm.weight", {E});
    add(b + "attn_q.weight", {E, Q});
    add(b + "attn_k.weight", {E, K});
    add(b + "attn_v.weight", {E, K});
    add(b + "attn_output.weight", {Q, E});
    add(b + "ffn_norm.weight", {E});
    add(b + "ffn_gate.weight", {E, F});
    add(b + "ffn_up.weight", {E, F});
    add(b + "ffn_down.weight", {F, E});
  }
  add("output_norm.weight", {E});
  return t.open(stem);
}

// Removes the files the tests wrote.
struct TempCleanup : ::testing::Environment {
  void TearDown() override { fs::remove_all(temp_dir()); }
};
const auto* cleanup = ::testing::AddGlobalTestEnvironment(new TempCleanup);

}  // namespace

TEST(PortReal, SmolLM2) {
  const fs::path p = loom::testing::real_model("SmolLM2-135M-Instruct.Q4_1.gguf");
  LOOM_REQUIRE_MODEL(p);
  const gguf::File f = gguf::File::open(p.string());
  const ir::Module m = port::port(f);
  check_program(m, f);
  EXPECT_EQ(ir::attr_int(m.attrs, "n_layer"), 30);
  EXPECT_EQ(ir::attr_int(m.attrs, "head_dim"), 64);
  EXPECT_EQ(ir::attr_float(m.attrs, "rope.base"), 100000.0);
  EXPECT_EQ(op_result(m, "logits")->operands[1].name, "token_embd");  // tied
  for (const auto* r : ops_named(m, "rope")) EXPECT_EQ(ir::attr_string(r->attrs, "mode"), "normal");
  EXPECT_EQ(m.weights.size(), f.tensors().size());
}

TEST(PortReal, Gemma3) {
  const fs::path p = loom::testing::real_model("gemma-3-270m-it-Q4_K_M.gguf");
  LOOM_REQUIRE_MODEL(p);
  const gguf::File f = gguf::File::open(p.string());
  const ir::Module m = port::port(f);
  check_program(m, f);
  const auto att = ops_named(m, "attention");
  ASSERT_EQ(att.size(), 18u);
  for (size_t l = 0; l < att.size(); ++l) {
    const bool global = l % 6 == 5;
    EXPECT_EQ(ir::attr_int(att[l]->attrs, "window", 0), global ? 0 : 512) << "layer " << l;
    // Queries scaled by 1/sqrt(256) after the rope, attention scale 1 (as llama.cpp builds it).
    EXPECT_DOUBLE_EQ(ir::attr_float(att[l]->attrs, "scale"), 1.0);
    const ir::Op* qs = op_result(m, "b" + std::to_string(l) + ".q_scaled");
    ASSERT_TRUE(qs);
    EXPECT_DOUBLE_EQ(ir::attr_float(qs->attrs, "factor"), 1.0 / 16);
    const ir::Op* q = op_result(m, "b" + std::to_string(l) + ".q_rope");
    ASSERT_TRUE(q);
    EXPECT_EQ(ir::attr_float(q->attrs, "base"), global ? 1e6 : 1e4) << "layer " << l;
    EXPECT_EQ(ir::attr_string(q->attrs, "mode"), "neox");
  }
  const ir::Op* x0 = op_result(m, "x0");
  ASSERT_TRUE(x0);
  EXPECT_EQ(x0->opcode, "scale");
  EXPECT_FLOAT_EQ(float(ir::attr_float(x0->attrs, "factor")), std::sqrt(640.0f));
  EXPECT_EQ(ops_named(m, "geglu").size(), 18u);
  EXPECT_EQ(m.weights.size(), f.tensors().size());
}

TEST(PortSynth, EveryTinyShape) {
  for (const char* shape : {"tiny-llama", "tiny-llama-untied", "tiny-qwen2", "tiny-qwen3", "tiny-gemma3"}) {
    SCOPED_TRACE(shape);
    const Ported p = synth(shape);
    check_program(p.module, *p.file);
    EXPECT_EQ(p.module.weights.size(), p.file->tensors().size());
  }
}

TEST(PortSynth, ArchitectureDetails) {
  const Ported untied = synth("tiny-llama-untied");
  EXPECT_EQ(op_result(untied.module, "logits")->operands[1].name, "output");
  const Ported q2 = synth("tiny-qwen2");
  EXPECT_EQ(op_result(q2.module, "b0.q")->opcode, "add");  // q = x·Wq + bq
  EXPECT_EQ(op_result(q2.module, "b0.q")->operands[1].name, "blk0.attn_q.bias");
  EXPECT_EQ(ir::attr_string(op_result(q2.module, "b0.q_rope")->attrs, "mode"), "neox");
  const Ported q3 = synth("tiny-qwen3");
  const ir::Op* qn = op_result(q3.module, "b1.q_norm");
  ASSERT_TRUE(qn);
  EXPECT_EQ(qn->operands[1].name, "blk1.attn_q_norm");
  EXPECT_EQ(op_result(q3.module, "b1.q_rope")->operands[0].name, "b1.q_norm");  // norm before rope
  const Ported g7 = synth("tiny-gemma3", 7);
  const auto att = ops_named(g7.module, "attention");
  ASSERT_EQ(att.size(), 7u);
  for (size_t l = 0; l < 7; ++l) EXPECT_EQ(ir::attr_int(att[l]->attrs, "window", 0) == 0, l == 5) << l;
}

TEST(PortPhi3, FusedProjectionsSlice) {
  const auto f = tiny_phi3("phi3");
  const ir::Module m = port::port(*f);
  check_program(m, *f);
  const ir::Op* k = op_result(m, "b0.k");
  ASSERT_TRUE(k);
  EXPECT_EQ(k->opcode, "slice");
  EXPECT_EQ(ir::attr_int(k->attrs, "start"), 32);
  EXPECT_EQ(ir::attr_int(k->attrs, "size"), 16);
  EXPECT_EQ(ir::attr_int(op_result(m, "b0.v")->attrs, "start"), 48);
  EXPECT_EQ(ir::attr_int(op_result(m, "b1.gate")->attrs, "start"), 0);  // gate is the first half
  EXPECT_EQ(ir::attr_int(op_result(m, "b1.up")->attrs, "start"), 48);
  for (const auto* a : ops_named(m, "attention")) EXPECT_EQ(ir::attr_int(a->attrs, "window", 0), 0);  // as llama.cpp
  EXPECT_EQ(op_result(m, "logits")->operands[1].name, "output");
}

TEST(PortErrors, UnknownArchitecture) {
  TinyFile t("xyz");
  t.tensor("token_embd.weight", {32, 64});
  const auto f = t.open("xyz");
  EXPECT_NE(error_of([&] { port::port(*f); })
                .find("unsupported architecture 'xyz' (supported: gemma3, llama, phi3, qwen2, qwen3)"),
            std::string::npos);
}

TEST(PortErrors, MissingTensorIsNamed) {
  const auto f = tiny_llama("missing", "blk.1.ffn_down.weight");
  const std::string e = error_of([&] { port::port(*f); });
  EXPECT_NE(e.find("missing tensor 'blk.1.ffn_down.weight'"), std::string::npos) << e;
}

TEST(PortErrors, UnsupportedWeightTypeIsNamed) {
  const auto f = tiny_llama("iq4", "", "blk.0.attn_q.weight", gguf::TensorType::IQ4_NL);
  const std::string e = error_of([&] { port::port(*f); });
  EXPECT_NE(e.find("blk.0.attn_q.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("iq4_nl"), std::string::npos) << e;
}

TEST(PortErrors, MissingMetadataKeyIsNamed) {
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::str("qwen3"));
  const fs::path p = temp_dir() / "nokeys.gguf";
  w.write(p.string());
  const gguf::File f = gguf::File::open(p.string());
  const std::string e = error_of([&] { port::port(f); });
  EXPECT_NE(e.find("missing metadata key 'qwen3.block_count'"), std::string::npos) << e;
}

TEST(Bindings, ShapeTypeAndHash) {
  const auto f = tiny_llama("bind");
  ir::Module m = port::port(*f);
  EXPECT_TRUE(port::check_bindings(m, *f).empty());

  ir::Module wrong_shape = m;
  wrong_shape.weights[1].type.shape[0].value = 31;
  std::string e = error_of([&] { port::check_bindings(wrong_shape, *f); });
  EXPECT_NE(e.find("tensor<31xf32>"), std::string::npos) << e;
  EXPECT_NE(e.find("blk.0.attn_norm.weight"), std::string::npos) << e;

  ir::Module wrong_type = m;
  wrong_type.weights[0].type.elem = ir::Elem::q8_0;
  EXPECT_NE(error_of([&] { port::check_bindings(wrong_type, *f); }).find("token_embd.weight"), std::string::npos);

  ir::Module gone = m;
  gone.weights[2].gguf_name = "blk.0.attn_qq.weight";
  EXPECT_NE(error_of([&] { port::check_bindings(gone, *f); }).find("no tensor 'blk.0.attn_qq.weight'"),
            std::string::npos);

  const auto other = tiny_llama("bind_other", "", "blk.0.attn_norm.weight", gguf::TensorType::F16);
  const auto same_shape = tiny_llama("bind_copy");  // same bytes, same hash
  EXPECT_TRUE(port::check_bindings(m, *same_shape).empty());
  ir::Module rehashed = m;
  for (auto& a : rehashed.attrs)
    if (a.name == "gguf.sha256") a.value = std::string(64, '0');
  e = error_of([&] { port::check_bindings(rehashed, *f); });
  EXPECT_NE(e.find(std::string(64, '0')), std::string::npos) << e;
  EXPECT_NE(e.find(f->sha256()), std::string::npos) << e;
  const auto warnings = port::check_bindings(rehashed, *f, {false});
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find(f->sha256()), std::string::npos);
  EXPECT_NE(error_of([&] { port::check_bindings(m, *other); }), "");
}
