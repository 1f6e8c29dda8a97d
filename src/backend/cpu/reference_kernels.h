// The reference CPU executor's kernels: one function per ir op, looked up by Opcode
// (reference_kernels.cpp). Activations are fp32, row-major [rows x cols]; weights are
// read from the GGUF mapping in their stored type. Semantics follow ir/ops.h; the arithmetic
// (activation quantizers, dot and attention accumulation orders, exp, SiLU) is llama.cpp's x86
// CPU backend's, written as scalar code in quant/ggml_order.h, so the reference's logits can
// be llama.cpp's bit for bit (tests/python/test_correctness.py checks that they are).
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "backend/host_kv.h"
#include "backend/cpu/thread_pool.h"
#include "passes/lowering.h"

namespace loom::backend::cpu {

// An activation: fp32 rows, or int32 for the token/position parameters (cols == 1).
struct Tensor {
  int64_t rows = 0, cols = 0;
  std::vector<float> f;
  std::vector<int32_t> i;
};

// What a kernel sees of the step it runs in.
struct StepContext {
  ThreadPool& pool;
  const StepBatch& batch;
  HostKvView kv;
};

struct KernelArgs {
  const ir::Op& op;
  std::vector<const Tensor*> in;                    // per operand; nullptr for weights
  std::vector<const gguf::TensorInfo*> weight;      // per operand; nullptr for values
  std::vector<const float*> dense;                  // per operand: small weights as f32, else nullptr
  Tensor& out;                                      // rows and cols set; data to be filled
  StepContext& ctx;
};

using Kernel = void (*)(KernelArgs&);

// The kernel of an op (every op of ir/ops.h has one).
Kernel kernel_for(passes::Opcode c);

// Kernels, by file.
void kernel_embed(KernelArgs&);      // reference_pointwise.cpp
void kernel_rms_norm(KernelArgs&);
void kernel_add(KernelArgs&);
void kernel_mul(KernelArgs&);
void kernel_scale(KernelArgs&);
void kernel_softcap(KernelArgs&);
void kernel_swiglu(KernelArgs&);
void kernel_geglu(KernelArgs&);
void kernel_slice(KernelArgs&);
void kernel_matmul(KernelArgs&);     // reference_matmul.cpp
void kernel_rope(KernelArgs&);       // reference_rope.cpp
void kernel_attention(KernelArgs&);  // reference_attention.cpp

// sum_i a[i]*b[i] in fp32, vectorisable.
float dot_f32(const float* a, const float* b, int64_t n);

}  // namespace loom::backend::cpu
