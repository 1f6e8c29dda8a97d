// Host entry points of the CUDA kernels (one .cu file each, beside this header). Pointers are
// device pointers; every launch is checked (check.h). Row-major activations: row r of a
// [rows x cols] value starts at base + r * ld. Semantics are the reference backend's
// (src/backend/cpu/reference_*.cpp); tests/backend_cuda compares each kernel with it.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <vector>

#include "gguf/tensor_type.h"

namespace loom::backend::cuda {

// True when matmul_rows / embed_rows have a kernel for weights of type t.
bool has_weight_kernel(gguf::TensorType t);

// y[r][n] = sum_k W[n][k] * x[r][k] for r < rows, n < N: the weight's N rows of K elements in
// its stored GGUF format (row_bytes apart), x f32. Reads the weight once for all rows; meant
// for decode and small batches (rows <= 8 per pass, more rows loop over passes).
void matmul_rows(gguf::TensorType t, const uint8_t* w, size_t row_bytes, int64_t N, int64_t K, const float* x,
                 int64_t ldx, int64_t rows, float* y, int64_t ldy, cudaStream_t s);

// The integer-dot path (matmul_q8.cu), preferred for the types it has: activations quantized
// once to q8_1 (codes q[r * K + k], per 32 elements ds = {d, d * sum(codes)}), weights in the
// packed layout of packed_layout.h (pack_rows, weight_pack.cpp, makes it from stored rows).
bool has_q8_kernel(gguf::TensorType t, int64_t K);
void quantize_q8_1(const float* x, int64_t ldx, int64_t rows, int64_t K, int8_t* q, float2* ds, cudaStream_t s);
// max_warps caps the warps of a launch, each of which streams an even, contiguous range of rows
// (0: as many as the device holds at once; kWarpPerRow: one tile a warp, a pair of rows or a
// gate row and its up row, version 5's grid by tiles).
constexpr int64_t kWarpPerRow = int64_t(1) << 62;
void matmul_q8(gguf::TensorType t, const uint8_t* packed, size_t row_bytes, int64_t N, int64_t K, const int8_t* q,
               const float2* ds, int64_t rows, float* y, int64_t ldy, cudaStream_t s, int64_t max_warps = 0);
std::vector<uint8_t> pack_rows(gguf::TensorType t, const uint8_t* stored, int64_t rows, int64_t K);

// Several packed weights that read the same q8_1 activations, in one launch a weight type (decode fusion):
// store: part i writes y_i[r][n] = W_i[n] . x[r] (+ residual_i[r][n] when residual is set);
// swiglu / geglu: parts (gate, up) of equal N; part 0's y[r][n] = act(gate . x) * (up . x).
struct MatmulPart {
  gguf::TensorType type = gguf::TensorType::F32;
  const uint8_t* w = nullptr;  // packed rows
  size_t row_bytes = 0;
  int64_t N = 0;
  float* y = nullptr;
  int64_t ldy = 0;
  const float* residual = nullptr;
  int64_t ld_residual = 0;
  // Store launches of one activation row with a RopeKvOut: what becomes of the part's outputs.
  // y: stored as above; rope_q: queries, rotated (RopeKvOut::rope) into y; rope_k: keys,
  // rotated and stored as f16 into the KV pool at the row's position; kv_v: values, stored
  // there. The same values as storing them and running rope_kv_store.
  enum class Out : uint8_t { y, rope_q, rope_k, kv_v } out = Out::y;
};
enum class MatmulEpilogue { store, swiglu, geglu };
// A gated epilogue may also write its output in q8_1 (codes[r * N + n], ds[r * N / 32 + n / 32],
// as quantize_q8_1 of the output would; N a multiple of 32), for the down projection after it;
// counters: N / 32 ints, zero before the launch and left zero after it.
struct GatedQ8 {
  int8_t* codes = nullptr;
  float2* ds = nullptr;
  int* counters = nullptr;
};
struct RopeKvOut;  // below
// Batches of at least min_rows rows whose parts all have a tensor-core kernel (has_mma_kernel)
// run on int8 MMA (matmul_mma.cu) on devices that have it (sm_80+), the activations re-laid in
// `scratch` (at least mma_scratch_bytes(rows, K)); min_rows 0: never. split_warps: the warps
// of a block that splits K in a store launch (4 or 8; gated launches split over 4). tiled: blocks of
// 128 weight rows whose activations and weights pass through shared-memory stages, the weights
// dequantized to f16 in registers and multiplied with the activations (d * code in f16) on f16
// tensor cores summing in f32; K split over blocks where the row tiles leave SMs idle
// (split_warps does not apply). where_faster: the launches it was measured faster on
// (matmul_mma_tiled.cu, tiled_pays); always: every launch (tests, the kernel bench). Devices whose shared
// memory cannot hold its stages keep the int8 kernel either way.
enum class MmaTiles : uint8_t { off, where_faster, always };
struct MmaPath {
  void* scratch = nullptr;
  size_t bytes = 0;
  int64_t min_rows = 0;
  int split_warps = 4;
  MmaTiles tiled = MmaTiles::off;
};
bool has_mma_kernel(gguf::TensorType t);
// tiled: the scratch the tiled kernel needs as well (larger activations, its partial sums).
size_t mma_scratch_bytes(int64_t rows, int64_t K, bool tiled = false);
int device_sms();  // the current device's multiprocessors (cached)
bool mma_device();
void matmul_mma_parts(const MatmulPart* parts, int n_parts, MatmulEpilogue e, int64_t K, const int8_t* q,
                      const float2* ds, int64_t rows, cudaStream_t s, const MmaPath& mma);
// rope (one activation row only): the rope and KV pool of parts with Out rope_q, rope_k, kv_v.
void matmul_q8_parts(const MatmulPart* parts, int n_parts, MatmulEpilogue e, int64_t K, const int8_t* q,
                     const float2* ds, int64_t rows, cudaStream_t s, const GatedQ8& q8 = {}, const MmaPath& mma = {},
                     int64_t max_warps = 0, const RopeKvOut* rope = nullptr);

// Prefill (dequant_f16.cu): weight rows (stored format, or packed for the types has_q8_kernel
// accepts) to N x K halves, and f32 activations to halves, for the cuBLAS GEMM (gemm.h).
void weights_to_f16(gguf::TensorType t, bool packed, const uint8_t* w, size_t row_bytes, int64_t N, int64_t K,
                    __half* out, cudaStream_t s);
void f32_to_f16(const float* x, int64_t n, __half* out, cudaStream_t s);

// out[r] = dequantized row ids[r] of the table (ids checked against n_rows on the device:
// an out-of-range id yields a row of NaN).
void embed_rows(gguf::TensorType t, const uint8_t* table, size_t row_bytes, int64_t n_rows, int64_t K,
                const int32_t* ids, int64_t rows, float* out, cudaStream_t s);

// Pointwise and row ops (pointwise.cu). `b` rows: b_rows == 1 broadcasts one row.
enum class Binary { add, mul, swiglu, geglu };
void binary(Binary op, const float* a, const float* b, int64_t b_rows, float* out, int64_t rows, int64_t cols,
            cudaStream_t s);
void scale(const float* x, float factor, float* out, int64_t n, cudaStream_t s);
void softcap(const float* x, float cap, float* out, int64_t n, cudaStream_t s);
void rms_norm(const float* x, const float* w, float eps, float* out, int64_t rows, int64_t cols, int64_t group,
              cudaStream_t s);
// rms_norm over whole rows (cols a multiple of 32) that also writes its output in q8_1 (codes
// q[r * cols + c], scales ds[r * cols / 32 + c / 32]), as quantize_q8_1 of `out` would.
void rms_norm_q8(const float* x, const float* w, float eps, float* out, int64_t rows, int64_t cols, int8_t* q,
                 float2* ds, cudaStream_t s);
void slice(const float* x, int64_t ldx, int64_t start, float* out, int64_t rows, int64_t cols, cudaStream_t s);
// out[r] = in[idx[r]] for r < rows (rows of `cols` floats; out must not overlap in).
void gather_rows(const float* in, const int32_t* idx, float* out, int64_t rows, int64_t cols, cudaStream_t s);

// Rotary embedding (rope.cu), ggml_rope_ext without YaRN: theta_i = pos * freq_scale *
// base^(-2i/n_rot) / ff_i; neox rotates (i, i + n_rot/2), normal (2i, 2i+1). ff may be null.
void rope(const float* x, const int32_t* pos, float* out, int64_t rows, int64_t cols, int64_t head_dim, int64_t n_rot,
          float base, float freq_scale, const float* ff, bool neox, cudaStream_t s);

// Paged KV (attention.cu). Storage of one layer: rows of k_width (v_width) elements, f16, in
// blocks of block_size positions; position p of a sequence is row
// table[p / block_size] * block_size + p % block_size.
struct KvView {
  __half* k = nullptr;
  __half* v = nullptr;
  int64_t k_width = 0, v_width = 0;
  int32_t block_size = 0;
};
// Writes the rows' keys and values at their positions (the tables of their sequences).
struct StepTables {
  const int32_t* seq_of_row = nullptr;  // per step row
  const int32_t* pos_of_row = nullptr;
  const int32_t* tables = nullptr;      // [n_seqs x max_blocks] block ids
  int32_t max_blocks = 0;
  // How many sequences the step's rows belong to, counted by the host (0: not counted). A
  // kernel's choice, never its correctness, depends on it (attention: one sequence's prompt).
  int32_t n_seqs = 0;
  // The tensor-core attention's row tiles, made by the host (attention_tiles): runs of rows of
  // one sequence cut into tiles of at most 16 rows, entry = first row << 5 | rows; tile_slots
  // entries, those past the step's tiles 0 (a captured step launches for a bound). None: tiles
  // of 16 consecutive rows.
  const int32_t* tiles = nullptr;
  int32_t tile_slots = 0;
};
// The tiles of StepTables::tiles for rows of these sequences (at most `rows` entries); returns
// how many.
int64_t attention_tiles(const int32_t* seq_of_row, int64_t rows, int32_t* tiles);
void kv_store(const KvView& kv, const StepTables& st, const float* k, const float* v, int64_t rows, cudaStream_t s);

// rope of the queries into q_out, and rope of the keys plus kv_store of keys and values, in one
// launch (decode fusion): the same values as rope(q), rope(k) and kv_store. q rows are
// n_head * head_dim wide, k rows kv.k_width (n_kv heads), v rows kv.v_width.
struct RopeSpec {
  int64_t head_dim = 0, n_rot = 0;
  float base = 10000, freq_scale = 1;
  const float* ff = nullptr;
  bool neox = false;
};
void rope_kv_store(const RopeSpec& rope, const float* q, int64_t n_head, float* q_out, const float* k, const float* v,
                   const KvView& kv, const StepTables& st, int64_t rows, cudaStream_t s);
// The same for the outputs of a q/k/v matmul launch of one activation row (matmul_q8_parts,
// MatmulPart::Out): pairs (2i, 2i + 1) only (neox false), a store tile's rows.
struct RopeKvOut {
  RopeSpec rope;
  KvView kv;
  StepTables st;
};

// Causal grouped-query attention of each row over its sequence's positions <= its own (and
// > pos - window when window > 0): softmax(scale * softcap(q.k)) . v.
struct AttentionShape {
  int n_head = 0, n_kv = 0, head_dim = 0, value_dim = 0, window = 0;
  float scale = 1, softcap = 0;
  // The schedule's choice (key attention_mma): steps of more than 8 rows that are not a batch
  // of decodes run attention_mma, on devices that have it (mma_device) and for head dims it has,
  // when they are of one sequence or the tables carry the host's tiles (StepTables::tiles).
  bool tensor_cores = false;
  // The schedule's choice (key attention_mma_shared): the tensor-core kernel stages each pass's
  // keys and values in shared memory for the block's warps (where they are 4 heads of one KV head).
  bool mma_shared_kv = false;
  // The schedule's choice (key decode_merge_in_kernel): a decode step split into chunks has the
  // last of each row's blocks merge them (attention()'s counters), not a combine launch.
  bool merge_in_kernel = false;
};
// Steps of few rows (decode), and steps of one row for each sequence (st.n_seqs == rows), run
// one block per (row, KV head, chunk) for all the query heads of the group; with scratch of at
// least attention_scratch_floats() floats (nonzero for such steps over more than one chunk's
// positions), the chunks' partial results are merged by a second kernel (flash-decoding) or,
// with a.merge_in_kernel and counters (attention_counter_words() of them, zero before their
// first use; every launch leaves them zero), by the last block of each row to finish; without
// scratch, one chunk per row. Other steps with a.tensor_cores: attention_mma when the
// step is one sequence's or the tables carry tiles; else one block per (row, head). The same
// function either way.
// With q8 and q8_ds set, the output is also written in q8_1 (as quantize_q8_1 of `out` would:
// row r's codes at q8 + r * n_head * value_dim), for the output projection.
void attention(const AttentionShape& a, const KvView& kv, const StepTables& st, const float* q, float* out,
               int64_t rows, cudaStream_t s, float* scratch = nullptr, size_t scratch_floats = 0, int8_t* q8 = nullptr,
               float2* q8_ds = nullptr, unsigned* counters = nullptr);
size_t attention_scratch_floats(const AttentionShape& a, const KvView& kv, const StepTables& st, int64_t rows);
size_t attention_counter_words(const AttentionShape& a, int64_t rows);
// The chunks attention() splits a decode step's rows into with this much scratch (1: none; 0:
// not a step of the decode kernel).
int decode_chunks(const AttentionShape& a, const KvView& kv, const StepTables& st, int64_t rows, size_t scratch_floats);
// The tensor-core kernel attention() picks for a prompt (attention_mma.cu): a warp takes 16
// rows and one query head, queries and probabilities in f16 on MMAs with f32 sums, the softmax
// in f32. Any step (tests call it directly): tiles of the host's (StepTables::tiles), else of
// 16 consecutive rows; a tile of rows of several sequences takes them one sequence at a time. head_dim 32, 64, 96, 128 or 256; sm_80+ (mma_device).
void attention_mma(const AttentionShape& a, const KvView& kv, const StepTables& st, const float* q, float* out,
                   int64_t rows, cudaStream_t s, int8_t* q8 = nullptr, float2* q8_ds = nullptr);
bool has_attention_mma(int head_dim);

// The k largest of each of `rows` rows of V floats (x row-major): ids[r * k + j] and
// vals[r * k + j], j < k, in no particular order; among equal values the lowest ids
// (top_logits.cu). 1 <= k <= V.
void top_logits(const float* x, int64_t rows, int64_t V, int k, int32_t* ids, float* vals, cudaStream_t s);

}  // namespace loom::backend::cuda
