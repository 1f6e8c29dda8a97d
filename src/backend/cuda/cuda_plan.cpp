// The CUDA plan: the shared lowering (passes::lower) mapped onto the kernels of kernels.h.
//
// Compile uploads each matmul weight once, packed for the integer-dot kernels where its type
// has one (else in its stored format, as embed tables are), each 1-D weight as f32, and gives
// every value a buffer slot (slots are re-used once a value is dead, by exact width). A step
// uploads its token, position, sequence, kept-row and block-table arrays in one copy, runs the
// ops in order on the plan's stream, gathers the wanted rows right after the last attention,
// and copies the logits back (the only synchronisation of a step). Steps of up to `graph_rows`
// rows run as one CUDA graph replay: the op sequence is captured once per step shape (rows,
// kept rows, block-table width, buffers) and replayed, since every per-step value the kernels
// read (tokens, positions, tables) lives in the device buffer the one upload fills. Matmuls of
// more than `gemm_rows` rows (prefill) dequantize the weight to f16 and run a cuBLAS GEMM on
// the tensor cores, where cuBLAS can be loaded.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <set>

#include <fmt/format.h>

#include "backend/cuda/check.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/kernels.h"
#include "common/error.h"
#include "passes/lowering.h"
#include "quant/quant.h"

namespace loom::backend::cuda {

namespace {

using passes::Opcode;

// Pool memory of one paged KV cache: per layer, n_blocks * block_size key and value rows.
class CudaKvStorage final : public KvStorage {
 public:
  CudaKvStorage(const std::vector<KvLayerShape>& layers, int32_t n_blocks, int32_t block_size, KvElem elem)
      : n_blocks_(n_blocks), block_size_(block_size), elem_(elem) {
    if (elem != KvElem::f16)
      loom::fail("the CUDA backend keeps its KV cache in f16; --kv-type {} is not supported there", kv_elem_name(elem));
    if (n_blocks <= 0 || block_size <= 0) loom::fail("CUDA KV pool: {} blocks of {} positions", n_blocks, block_size);
    for (const auto& l : layers) {
      const size_t rows = size_t(n_blocks) * size_t(block_size);
      k_.emplace_back(rows * kv_row_bytes(elem, l.k_width()));
      v_.emplace_back(rows * kv_row_bytes(elem, l.v_width()));
      views_.push_back({k_.back().get<__half>(), v_.back().get<__half>(), l.k_width(), l.v_width(), block_size});
    }
  }
  KvElem elem() const override { return elem_; }
  uint64_t serial() const { return serial_; }
  int32_t n_blocks() const override { return n_blocks_; }
  int32_t block_size() const override { return block_size_; }
  size_t bytes() const override {
    size_t n = 0;
    for (size_t l = 0; l < k_.size(); ++l) n += k_[l].bytes() + v_[l].bytes();
    return n;
  }
  const KvView& layer(int64_t l) const { return views_.at(size_t(l)); }

 private:
  int32_t n_blocks_, block_size_;
  KvElem elem_;
  uint64_t serial_ = next_serial();
  static uint64_t next_serial() {
    static std::atomic<uint64_t> n{0};
    return ++n;
  }
  std::vector<DeviceBuffer> k_, v_;
  std::vector<KvView> views_;
};

struct DeviceWeight {
  gguf::TensorType type = gguf::TensorType::F32;
  const uint8_t* data = nullptr;    // stored format (matmul fallback, embed) or f32; null if unused
  size_t row_bytes = 0;
  const uint8_t* packed = nullptr;  // packed for matmul_q8, when the type has a kernel
  size_t packed_row_bytes = 0;
  int64_t rows = 0, cols = 0;
};

// What a captured step depends on beyond the device buffers' contents.
struct GraphKey {
  int64_t rows, kept, max_blocks;
  uint64_t kv;  // the storage's serial: a new pool at a freed one's address is another key
  const void *arena, *ints;
  auto operator<=>(const GraphKey&) const = default;
};

class CudaPlan final : public Plan {
 public:
  CudaPlan(const ir::Module& m, const WeightSource& ws, int64_t graph_rows, int64_t gemm_rows);
  ~CudaPlan() override {
    drop_graphs();
    if (stream_) cudaStreamDestroy(stream_);
  }
  std::unique_ptr<KvStorage> allocate_kv(int32_t n_blocks, int32_t block_size, KvElem elem) const override {
    return std::make_unique<CudaKvStorage>(layers_, n_blocks, block_size, elem);
  }
  void run(const StepBatch& batch, KvStorage& kv, float* logits_out) override;
  int64_t vocab_size() const override { return vocab_; }
  const std::vector<KvLayerShape>& kv_layers() const override { return layers_; }
  int threads() const override { return 1; }
  std::vector<std::string> explain() const override { return explain_; }

 private:
  const DeviceWeight& weight(const passes::OperandRef& o, const ir::Op& op) const;
  float* value(int v) const { return reinterpret_cast<float*>(arena_.get<uint8_t>() + slot_offset_[v] * capacity_); }
  void grow(int64_t rows);
  void enqueue(CudaKvStorage& kv, const StepTables& tables, int64_t T, int64_t kept);
  void replay(const GraphKey& key, CudaKvStorage& kv, const StepTables& tables, int64_t T, int64_t kept);
  void drop_graphs() {
    for (auto& [k, g] : graphs_) cudaGraphExecDestroy(g);
    graphs_.clear();
    seen_once_.clear();
  }

  passes::Lowering low_;
  cudaStream_t stream_ = nullptr;
  std::map<const ir::Weight*, DeviceWeight> weights_;
  std::vector<DeviceBuffer> weight_memory_;
  std::vector<int64_t> slot_offset_;  // per value id: bytes per arena row before its slot
  int64_t arena_row_bytes_ = 0, capacity_ = 0;
  DeviceBuffer arena_, scratch_, step_ints_, q8_codes_, q8_scales_;
  int64_t q8_max_k_ = 0;
  int q8_value_ = -1;                 // the value whose q8_1 form q8_codes_ holds in this step
  int64_t graph_rows_ = 0, gemm_rows_ = 0;
  std::unique_ptr<Gemm> gemm_;
  std::string no_gemm_;               // why gemm_ is null
  int64_t gemm_max_nk_ = 0;           // the largest matmul weight, in elements
  DeviceBuffer gemm_w_, gemm_x_;      // f16 weight tile and activations of a GEMM
  DeviceBuffer attn_scratch_;         // partial results of the split decode attention
  std::map<GraphKey, cudaGraphExec_t> graphs_;
  std::set<GraphKey> seen_once_;
  std::vector<int> live_at_drop_;     // values gathered to the kept rows after the last attention
  std::vector<int32_t> host_ints_;
  std::vector<KvLayerShape> layers_;
  std::vector<std::string> explain_;
  int64_t vocab_ = 0;
};

CudaPlan::CudaPlan(const ir::Module& m, const WeightSource& ws, int64_t graph_rows, int64_t gemm_rows)
    : low_(passes::lower(m)), graph_rows_(graph_rows), gemm_rows_(gemm_rows) {
  LOOM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  layers_ = kv_layers_of(m);
  vocab_ = low_.cols.at(size_t(low_.result));
  // How each weight is read: as a matmul's weight, as an embed table (a tied output matrix is
  // both), or as a dense f32 operand.
  std::map<const ir::Weight*, std::pair<bool, bool>> as_matmul_embed;
  for (const auto& lo : low_.ops)
    for (size_t i = 0; i < lo.in.size(); ++i)
      if (const ir::Weight* w = lo.in[i].weight) {
        auto& [mm, em] = as_matmul_embed[w];
        mm = mm || (lo.code == Opcode::matmul && i == 1);
        em = em || (lo.code == Opcode::embed && i == 0);
      }
  for (const auto& lo : low_.ops)
    for (size_t i = 0; i < lo.in.size(); ++i) {
      const ir::Weight* w = lo.in[i].weight;
      if (!w || weights_.count(w)) continue;
      const gguf::TensorInfo* t = ws.at(w->name).tensor;
      DeviceWeight dw{t->type, nullptr, 0, nullptr, 0, int64_t(t->rows()), int64_t(t->row_elems())};
      const auto [as_matmul, as_embed] = as_matmul_embed.at(w);
      if (as_matmul || as_embed) {
        if (!has_weight_kernel(t->type))
          loom::fail("weight @{}: the CUDA backend has no kernel for {}", w->name, gguf::type_name(t->type));
        dw.row_bytes = loom::quant::row_size(t->type, dw.cols);
        const bool packed = as_matmul && has_q8_kernel(t->type, dw.cols);
        if (packed) {
          const auto p = pack_rows(t->type, t->data, dw.rows, dw.cols);
          weight_memory_.push_back(DeviceBuffer::of(p));
          dw.packed = weight_memory_.back().get<uint8_t>();
          dw.packed_row_bytes = p.size() / size_t(dw.rows);
          q8_max_k_ = std::max(q8_max_k_, dw.cols);
        }
        if (as_matmul) {
          gemm_max_nk_ = std::max(gemm_max_nk_, dw.rows * dw.cols);
          q8_max_k_ = std::max(q8_max_k_, dw.cols);  // also sizes the GEMM's f16 activations
        }
        if (!packed || as_embed) {
          weight_memory_.emplace_back(dw.row_bytes * size_t(dw.rows));
          weight_memory_.back().upload(t->data, weight_memory_.back().bytes());
          dw.data = weight_memory_.back().get<uint8_t>();
        }
        weights_[w] = dw;
        continue;
      } else {
        std::vector<float> f(t->elements());
        loom::quant::dequantize_row(t->type, t->data, f.data(), int64_t(f.size()));
        dw.type = gguf::TensorType::F32;
        dw.rows = 1;
        dw.cols = int64_t(f.size());
        dw.row_bytes = f.size() * sizeof(float);
        weight_memory_.push_back(DeviceBuffer::of(f));
      }
      dw.data = weight_memory_.back().get<uint8_t>();
      weights_[w] = dw;
    }
  // Slots: a value's buffer is free again after its last reader; widths repeat layer to layer.
  const std::vector<int> last = passes::last_use(low_);
  const int n_values = int(low_.cols.size());
  slot_offset_.assign(n_values, -1);
  std::map<int64_t, std::vector<int64_t>> free_by_bytes;
  auto take = [&](int v) {
    const int64_t bytes = (low_.cols[v] * int64_t(sizeof(float)) + 255) / 256 * 256;
    auto& fl = free_by_bytes[bytes];
    if (!fl.empty()) {
      slot_offset_[v] = fl.back();
      fl.pop_back();
    } else {
      slot_offset_[v] = arena_row_bytes_;
      arena_row_bytes_ += bytes;
    }
  };
  auto give_back = [&](int v) {
    free_by_bytes[(low_.cols[v] * int64_t(sizeof(float)) + 255) / 256 * 256].push_back(slot_offset_[v]);
  };
  std::vector<int> def(n_values, -1);
  for (int i = 0; i < int(low_.ops.size()); ++i) {
    const auto& lo = low_.ops[i];
    def[lo.out] = i;
    take(lo.out);
    // A value read here for the last time is dead once this op has run (inputs are given back
    // after the output took its slot, so the two never share one).
    std::vector<int> dead;
    for (const auto& o : lo.in)
      if (o.value >= 0 && o.value != low_.tokens && o.value != low_.positions && o.value != low_.result &&
          last[o.value] == i && std::find(dead.begin(), dead.end(), o.value) == dead.end())
        dead.push_back(o.value);
    for (int v : dead) give_back(v);
    if (last[lo.out] < 0 && lo.out != low_.result) give_back(lo.out);
  }
  for (int v = 0; v < n_values; ++v)
    if (def[v] >= 0 && def[v] <= low_.last_mixing && (last[v] > low_.last_mixing || v == low_.result))
      live_at_drop_.push_back(v);
  gemm_ = Gemm::open(stream_, no_gemm_);
  explain_.push_back(gemm_ ? fmt::format("matmuls of more than {} rows: weights dequantized to f16, cuBLAS GEMM "
                                         "(f16 operands, f32 accumulation)", gemm_rows_)
                           : fmt::format("no prefill GEMM ({}): every matmul on the decode kernels", no_gemm_));
  explain_.push_back(fmt::format("steps of at most {} rows: one CUDA graph replay", graph_rows_));
  for (const auto& lo : low_.ops) {
    std::string line = fmt::format("%{} = {}", lo.op->result, passes::opcode_name(lo.code));
    if (lo.code == Opcode::matmul) {
      const DeviceWeight& w = weights_.at(lo.in[1].weight);
      line += fmt::format(" @{} {}: {}", lo.weight_name(), gguf::type_name(w.type),
                          w.packed ? "packed weights, q8_1 activations, int8-dot warp-per-row matmul, 8 rows per pass"
                                   : "dequantizing warp-per-row matmul, 8 rows per pass");
    }
    if (lo.code == Opcode::attention) line += ": paged f16 attention, one block per (row, head), online softmax";
    explain_.push_back(line);
  }
}

const DeviceWeight& CudaPlan::weight(const passes::OperandRef& o, const ir::Op& op) const {
  if (!o.weight) loom::fail("line {}: %{}: operand must be a weight", op.line, op.result);
  return weights_.at(o.weight);
}

void CudaPlan::grow(int64_t rows) {
  if (rows <= capacity_) return;
  capacity_ = (rows + 15) / 16 * 16;
  arena_ = DeviceBuffer(size_t(capacity_ * arena_row_bytes_));
  int64_t widest = 1;
  for (int v : live_at_drop_) widest = std::max(widest, low_.cols[v]);
  scratch_ = DeviceBuffer(size_t(capacity_ * widest) * sizeof(float));
  if (q8_max_k_ > 0) {
    q8_codes_ = DeviceBuffer(size_t(capacity_ * q8_max_k_));
    q8_scales_ = DeviceBuffer(size_t(capacity_ * q8_max_k_ / 32) * sizeof(float2));
  }
  if (gemm_ && capacity_ > gemm_rows_) {
    if (gemm_w_.bytes() < size_t(gemm_max_nk_) * 2) gemm_w_ = DeviceBuffer(size_t(gemm_max_nk_) * 2);
    gemm_x_ = DeviceBuffer(size_t(capacity_ * q8_max_k_) * 2);
  }
  drop_graphs();  // they name the old buffers
}

void CudaPlan::run(const StepBatch& batch, KvStorage& kv_any, float* logits_out) {
  batch.validate();
  auto* kv = dynamic_cast<CudaKvStorage*>(&kv_any);
  if (!kv) loom::fail("the CUDA plan needs KV storage from its own allocate_kv");
  const int64_t T = int64_t(batch.size());
  grow(T);
  // One upload: tokens, positions, sequences, kept rows, then the flattened block tables.
  // The table width is rounded up to a power of two so that a decode step's graph is
  // re-captured only when the context doubles (the padding entries are never read).
  int64_t max_blocks = 4;
  for (const auto& t : batch.block_tables)
    while (max_blocks < int64_t(t.size())) max_blocks *= 2;
  const int64_t n_seqs = std::max<int64_t>(1, int64_t(batch.block_tables.size()));
  host_ints_.assign(size_t(4 * T + n_seqs * max_blocks), 0);
  int32_t* h = host_ints_.data();
  int64_t kept = 0;
  for (int64_t t = 0; t < T; ++t) {
    const int32_t s = batch.seq(size_t(t));
    if (s >= n_seqs || batch.positions[t] / kv->block_size() >= int64_t(batch.block_tables.at(size_t(s)).size()))
      loom::fail("step row {}: sequence {} position {} is not covered by its block table", t, s, batch.positions[t]);
    h[t] = batch.tokens[t];
    h[T + t] = batch.positions[t];
    h[2 * T + t] = s;
    if (batch.wants(size_t(t))) h[3 * T + kept++] = int32_t(t);
  }
  for (int64_t s = 0; s < int64_t(batch.block_tables.size()); ++s)
    for (size_t i = 0; i < batch.block_tables[s].size(); ++i) {
      const int32_t b = batch.block_tables[s][i];
      if (b < 0 || b >= kv->n_blocks()) loom::fail("block table of sequence {}: block {} outside the pool", s, b);
      h[4 * T + s * max_blocks + int64_t(i)] = b;
    }
  if (step_ints_.bytes() < host_ints_.size() * 4) {
    drop_graphs();  // they read the old buffer
    step_ints_ = DeviceBuffer(host_ints_.size() * 4 * 2);
  }
  LOOM_CUDA_CHECK(cudaMemcpyAsync(step_ints_.get(), h, host_ints_.size() * 4, cudaMemcpyHostToDevice, stream_));
  const int32_t* d = step_ints_.get<int32_t>();
  const StepTables tables{d + 2 * T, d + T, d + 4 * T, int32_t(max_blocks)};
  // Scratch of the split decode attention, sized here: a captured step cannot allocate.
  size_t attn_floats = 0;
  for (const auto& lo : low_.ops)
    if (lo.code == Opcode::attention) {
      const auto aa = passes::attention_attrs(*lo.op);
      const AttentionShape shape{int(aa.n_head), int(aa.n_kv_head), int(aa.head_dim), int(aa.value_dim), int(aa.window),
                                 float(aa.scale), float(aa.softcap)};
      attn_floats = std::max(attn_floats, attention_scratch_floats(shape, kv->layer(aa.layer), tables, T));
    }
  if (attn_scratch_.bytes() < attn_floats * sizeof(float)) {
    drop_graphs();
    attn_scratch_ = DeviceBuffer(attn_floats * sizeof(float) * 2);
  }
  if (T <= graph_rows_)
    replay({T, kept, max_blocks, kv->serial(), arena_.get(), step_ints_.get()}, *kv, tables, T, kept);
  else
    enqueue(*kv, tables, T, kept);
  LOOM_CUDA_CHECK(cudaMemcpyAsync(logits_out, value(low_.result), size_t(kept * vocab_) * sizeof(float),
                                  cudaMemcpyDeviceToHost, stream_));
  LOOM_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaPlan::replay(const GraphKey& key, CudaKvStorage& kv, const StepTables& tables, int64_t T, int64_t kept) {
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    // A shape's first step runs op by op (its kernels load then, outside any capture; a shape
    // seen once, like a prompt's last chunk, costs no capture); the second captures it.
    if (seen_once_.size() >= 1024) seen_once_.clear();
    if (seen_once_.insert(key).second) {
      enqueue(kv, tables, T, kept);
      return;
    }
    if (graphs_.size() >= 32) drop_graphs();  // shapes of a long serving run: start over
    cudaGraph_t g = nullptr;
    LOOM_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    try {
      enqueue(kv, tables, T, kept);
    } catch (...) {
      cudaStreamEndCapture(stream_, &g);  // leave the stream usable; the error goes on
      if (g) cudaGraphDestroy(g);
      throw;
    }
    LOOM_CUDA_CHECK(cudaStreamEndCapture(stream_, &g));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t err = cudaGraphInstantiate(&exec, g, 0);
    cudaGraphDestroy(g);
    LOOM_CUDA_CHECK(err);
    it = graphs_.emplace(key, exec).first;
  }
  LOOM_CUDA_CHECK(cudaGraphLaunch(it->second, stream_));
}

// The step's ops in order on the plan's stream (captured into a graph or run directly).
void CudaPlan::enqueue(CudaKvStorage& kv_storage, const StepTables& tables, int64_t T, int64_t kept) {
  CudaKvStorage* kv = &kv_storage;
  const int32_t* d = tables.pos_of_row - T;
  const int32_t *d_tok = d, *d_keep = d + 3 * T, *d_pos = d + T;
  q8_value_ = -1;
  int64_t rows = T;
  auto drop_rows = [&] {
    if (kept == rows) return;
    for (int v : live_at_drop_) {
      gather_rows(value(v), d_keep, scratch_.get<float>(), kept, low_.cols[v], stream_);
      LOOM_CUDA_CHECK(cudaMemcpyAsync(value(v), scratch_.get(), size_t(kept * low_.cols[v]) * sizeof(float),
                                      cudaMemcpyDeviceToDevice, stream_));
    }
    rows = kept;
    q8_value_ = -1;
  };
  if (!low_.has_mixing()) drop_rows();
  for (int i = 0; i < int(low_.ops.size()); ++i) {
    const auto& lo = low_.ops[i];
    const ir::Op& op = *lo.op;
    float* out = value(lo.out);
    auto in = [&](int j) -> const float* {
      const int v = lo.in.at(size_t(j)).value;
      if (v < 0) loom::fail("line {}: %{}: operand {} must be a value", op.line, op.result, j + 1);
      return value(v);
    };
    auto second = [&](int64_t& b_rows) -> const float* {
      if (lo.in.at(1).weight) {
        b_rows = 1;
        return reinterpret_cast<const float*>(weight(lo.in[1], op).data);
      }
      b_rows = rows;
      return in(1);
    };
    switch (lo.code) {
      case Opcode::embed: {
        const DeviceWeight& t = weight(lo.in[0], op);
        embed_rows(t.type, t.data, t.row_bytes, t.rows, t.cols, d_tok, rows, out, stream_);
        break;
      }
      case Opcode::rms_norm: {
        const DeviceWeight& w = weight(lo.in[1], op);
        rms_norm(in(0), reinterpret_cast<const float*>(w.data), float(passes::norm_eps(op)), out, rows, lo.cols, w.cols,
                 stream_);
        break;
      }
      case Opcode::matmul: {
        const DeviceWeight& w = weight(lo.in[1], op);
        if (gemm_ && rows > gemm_rows_) {
          __half* wh = gemm_w_.get<__half>();
          __half* xh = gemm_x_.get<__half>();
          f32_to_f16(in(0), rows * w.cols, xh, stream_);
          if (w.packed) weights_to_f16(w.type, true, w.packed, w.packed_row_bytes, w.rows, w.cols, wh, stream_);
          else weights_to_f16(w.type, false, w.data, w.row_bytes, w.rows, w.cols, wh, stream_);
          gemm_->f16(wh, xh, w.rows, rows, w.cols, out, lo.cols);
        } else if (w.packed) {
          // q, k and v (gate and up) read one input: it is quantized once for all of them.
          if (q8_value_ != lo.in[0].value) {
            quantize_q8_1(in(0), w.cols, rows, w.cols, q8_codes_.get<int8_t>(), q8_scales_.get<float2>(), stream_);
            q8_value_ = lo.in[0].value;
          }
          matmul_q8(w.type, w.packed, w.packed_row_bytes, w.rows, w.cols, q8_codes_.get<int8_t>(),
                    q8_scales_.get<float2>(), rows, out, lo.cols, stream_);
        } else {
          matmul_rows(w.type, w.data, w.row_bytes, w.rows, w.cols, in(0), w.cols, rows, out, lo.cols, stream_);
        }
        break;
      }
      case Opcode::add: case Opcode::mul: {
        int64_t br = 0;
        const float* b = second(br);
        binary(lo.code == Opcode::add ? Binary::add : Binary::mul, in(0), b, br, out, rows, lo.cols, stream_);
        break;
      }
      case Opcode::swiglu: case Opcode::geglu:
        binary(lo.code == Opcode::swiglu ? Binary::swiglu : Binary::geglu, in(0), in(1), rows, out, rows, lo.cols, stream_);
        break;
      case Opcode::scale: scale(in(0), float(passes::scalar_attr(op)), out, rows * lo.cols, stream_); break;
      case Opcode::softcap: softcap(in(0), float(passes::scalar_attr(op)), out, rows * lo.cols, stream_); break;
      case Opcode::slice: {
        const auto sa = passes::slice_attrs(op);
        slice(in(0), low_.cols[lo.in[0].value], sa.start, out, rows, lo.cols, stream_);
        break;
      }
      case Opcode::rope: {
        const auto ra = passes::rope_attrs(op);
        const float* ff = lo.in.size() > 2 && lo.in[2].weight ? reinterpret_cast<const float*>(weight(lo.in[2], op).data) : nullptr;
        rope(in(0), d_pos, out, rows, lo.cols, ra.head_dim, ra.n_rot, float(ra.base), float(ra.freq_scale), ff, ra.neox,
             stream_);
        break;
      }
      case Opcode::attention: {
        if (rows != T) loom::fail("%{}: attention after rows were dropped", op.result);
        const auto aa = passes::attention_attrs(op);
        const KvView& view = kv->layer(aa.layer);
        kv_store(view, tables, in(1), in(2), rows, stream_);
        const AttentionShape shape{int(aa.n_head), int(aa.n_kv_head), int(aa.head_dim), int(aa.value_dim), int(aa.window),
                                   float(aa.scale), float(aa.softcap)};
        attention(shape, view, tables, in(0), out, rows, stream_, attn_scratch_.get<float>(),
                  attn_scratch_.bytes() / sizeof(float));
        break;
      }
    }
    if (low_.has_mixing() && i == low_.last_mixing) drop_rows();
  }
  if (rows != kept) loom::fail("logits have {} rows, {} wanted", rows, kept);
}

class CudaBackend final : public Backend {
 public:
  std::string name() const override { return "cuda"; }
  bool supports(const ir::Op& op) const override { return passes::opcode_of(op.opcode).has_value(); }
  const std::vector<ScheduleKey>& schedule_keys() const override {
    // `threads` is accepted so programs ported for any backend run here; it sets host threads,
    // of which this plan uses one.
    static const std::vector<ScheduleKey> keys = {
        {"", "threads", ScheduleKey::Type::integer, 0, 1024, {}, int64_t(0), "host threads (the CUDA plan uses one)"},
        {"", "graph_rows", ScheduleKey::Type::integer, 0, 4096, {}, int64_t(32),
         "steps of at most this many rows run as one CUDA graph replay (0: launch op by op)"},
        {"", "gemm_rows", ScheduleKey::Type::integer, 0, 1 << 20, {}, int64_t(32),
         "matmuls of more rows than this dequantize to f16 and run a cuBLAS GEMM; fewer use the decode kernels"}};
    return keys;
  }
  std::unique_ptr<Plan> compile(const ir::Module& m, const WeightSource& ws, const CompileOptions&) const override {
    check_schedule(m, schedule_keys(), name());
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
      loom::fail("--backend cuda: no CUDA device is visible on this machine");
    const ScheduleReader sr(m, schedule_keys());
    return std::make_unique<CudaPlan>(m, ws, sr.integer("graph_rows"), sr.integer("gemm_rows"));
  }
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace loom::backend::cuda
