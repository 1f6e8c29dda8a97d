// The compiled form of a program for the fast CPU backend (internal to src/backend/cpu/fast).
//
// Compilation resolves every SSA value to a slot of one activation arena (slots are re-used
// once a value is dead, and the arena holds `capacity` rows of every slot, so a step never
// allocates once the arena has grown to the largest batch seen), dequantizes 1-D weights to
// f32, and turns the op list into steps. Matmuls that read the same activation in the same
// quantized format (q/k/v, gate/up) become one step: the activation is quantized once and the
// weight rows of all of them are split across threads in one parallel section.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/host_kv.h"
#include "backend/cpu/fast/spin_pool.h"
#include "passes/lowering.h"

namespace loom::backend::cpu::fast {

// A step runs one op (or, for matmul, a group of them): its kind is the op's.
using StepKind = passes::Opcode;

// Where a value's rows live: arena + offset * capacity, row r at + r * row_bytes.
struct Slot {
  int64_t offset = 0;     // bytes per arena row before this slot
  int64_t row_bytes = 0;
};

struct MatmulPart {
  gguf::TensorType type = gguf::TensorType::F32;  // as stored, or as repacked (repack.h)
  const uint8_t* data = nullptr;
  size_t row_bytes = 0;  // bytes of one weight row
  int64_t rows = 0;      // N: output width
  int out = -1;          // value written
  // The layout prefill uses (repack.h); decode keeps the smaller stored rows, since it is
  // bound by bytes rather than by unpacking.
  gguf::TensorType prefill_type = gguf::TensorType::F32;
  const uint8_t* prefill_data = nullptr;
  size_t prefill_row_bytes = 0;
  // Rows 0..packed_rows-1 (a multiple of 8) also as x8 groups (quant/simd/packed.h), which
  // decode and prefill read instead of data / prefill_data; the rows after them come from
  // data / prefill_data.
  const uint8_t* packed = nullptr;
  int64_t packed_rows = 0;
  size_t packed_group_bytes = 0;
};

struct RopeConfig {
  int64_t n_rot = 0;
  float base = 0, freq_scale = 1;
  const float* freq_factors = nullptr;
  float theta_scale = 1;        // base^(-2/n_rot): theta_i = ((pos * ts) * ts)..., as ggml's rope cache builds it
};

struct AttentionSpec {
  int layer = 0;
  int64_t n_head = 0, n_kv = 0, head_dim = 0, value_dim = 0, window = 0;
  float scale = 1, softcap = 0;
  int32_t chunk = 0;  // positions per split-K chunk, cut at multiples of it (0: the kernel's default, 256)
  int32_t rows = 0;   // query rows of one sequence per block sharing each key and value read (0: 16)
};

struct Step {
  StepKind kind;
  const ir::Op* op = nullptr;
  int out = -1;
  int in[4] = {-1, -1, -1, -1};  // value operands (-1: a weight or absent)
  int64_t cols = 0;               // width of the result
  int64_t in_cols = 0;            // width of the first operand
  const float* vec = nullptr;     // a 1-D weight operand in f32 (norm weight, bias, factor)
  int64_t group = 0;              // rms_norm: elements normalised together
  float f0 = 0;                   // eps, factor or cap
  int64_t start = 0;              // slice start
  const gguf::TensorInfo* table = nullptr;  // embed
  int rope = -1;                  // index into the plan's rope configs
  AttentionSpec attn;
  // matmul: every part reads value in[0] (k wide) as act_type, from act_slot when quantized.
  std::vector<MatmulPart> parts;
  gguf::TensorType act_type = gguf::TensorType::F32;
  int64_t k = 0;
  int64_t stream_rows = 8;        // steps of at most this many rows: weight-streaming tiles (matmul.cpp)
  int act_slot = -1;              // -1: the f32 value is used directly
  bool quantize = false;          // this step fills act_slot (the first reader of the value)
};

// Everything a step's kernel sees while it runs.
struct Exec {
  SpinPool& pool;
  const StepBatch& batch;
  HostKvView kv;
  int64_t rows = 0;                 // rows of every value now (T, or the kept rows after the drop)
  const int32_t* tokens = nullptr;  // per row
  const int32_t* positions = nullptr;
  uint8_t* arena = nullptr;
  int64_t capacity = 0;
  const std::vector<Slot>* slots = nullptr;  // per value
  const std::vector<Slot>* quant_slots = nullptr;
  int result = -1;
  float* logits = nullptr;          // the result's rows go straight here when set
  std::vector<RopeConfig>* ropes = nullptr;
  std::vector<std::vector<float>>* rope_tables = nullptr;  // per config: cos/sin for this step's rows
  std::vector<uint8_t>* rope_ready = nullptr;
  std::vector<std::vector<float>>* scratch = nullptr;      // per thread

  float* value(int v) const {
    if (v == result && logits) return logits;
    return reinterpret_cast<float*>(arena + (*slots)[v].offset * capacity);
  }
  uint8_t* quant(int q) const { return arena + (*quant_slots)[q].offset * capacity; }
  float* scratch_for(int thread, size_t n) const {
    auto& s = (*scratch)[thread];
    if (s.size() < n) s.resize(n);
    return s.data();
  }
};

// Splits `rows` rows of work across the pool, or runs them on the caller when the whole job
// is too small to be worth waking a worker (a decode step's elementwise ops).
template <typename F>
void parallel_rows(Exec& e, int64_t rows, int64_t work_per_row, F&& fn) {
  constexpr int64_t kSerialWork = 1 << 14;
  const int nt = e.pool.size();
  if (nt == 1 || rows <= 1 || rows * work_per_row < kSerialWork) {
    fn(int64_t(0), rows);
    return;
  }
  const int64_t chunks = std::min<int64_t>(rows, 4 * nt);
  e.pool.for_each(chunks, [&](int64_t c, int) { fn(rows * c / chunks, rows * (c + 1) / chunks); });
}

// Kernels, by file.
void run_embed(const Step& s, Exec& e);      // rowwise.cpp
void run_rms_norm(const Step& s, Exec& e);
void run_binary(const Step& s, Exec& e);     // add, mul, swiglu, geglu
void run_unary(const Step& s, Exec& e);      // scale, softcap
void run_slice(const Step& s, Exec& e);
void run_rope(const Step& s, Exec& e);       // rope.cpp
void run_attention(const Step& s, Exec& e);  // attention.cpp
void run_matmul(const Step& s, Exec& e);     // matmul.cpp

}  // namespace loom::backend::cpu::fast
