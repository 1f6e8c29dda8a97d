// The CUDA plan's state, shared by its two halves: cuda_plan.cpp (compile: weights, buffers,
// graphs; run) and cuda_step.cpp (a step's ops and fused steps on the stream).
#pragma once
#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/decode_fusion.h"
#include "backend/cuda/decode_persistent.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/kernels.h"
#include "common/error.h"
#include "passes/lowering.h"

namespace loom::backend::cuda {

// Activations in q8_1 for the integer-dot matmuls, and the value whose q8_1 form they hold in
// the current step (-1: none).
struct Q8Buffer {
  DeviceBuffer codes, scales;
  int value = -1;
  int8_t* q() const { return codes.get<int8_t>(); }
  float2* ds() const { return scales.get<float2>(); }
};

// The cuda backend's schedule keys as a program sets them, read by CudaBackend::compile from
// the keys CudaBackend::schedule_keys declares (their defaults live there, not here).
struct CudaSchedule {
  int64_t graph_rows = 0, gemm_rows = 0, mma_rows = 0;
  bool decode_fusion = false, decode_rope_fold = false, programmatic_launch = false, gemm_f16_weights = false;
  bool mma_wide_split = false, mma_tiles = false, gemv_resident = false, step_times = false, attention_mma = false;
  bool decode_merge_in_kernel = false, attention_mma_shared = false, decode_persistent = false;
};

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
  const void* f16 = nullptr;        // rows x cols f16, made once, for the GEMM (gemm_f16_weights)
  int64_t rows = 0, cols = 0;
};

// The schedule key step_times: where the time of the plan's one-row steps (decode of one
// sequence) goes, printed to stderr when the plan is destroyed as medians over the steps: the
// host's part of the step (tables and upload, then the kernels or graph enqueued, then the
// rest), the device's (events on the stream from the step's call to its last kernel), the host
// blocked waiting for it, and the time outside the plan between one step's return and the next
// step's call (the caller's sampling and loop). A diagnostic: off, it records nothing.
class StepTimes {
 public:
  using Clock = std::chrono::steady_clock;
  explicit StepTimes(bool on);
  ~StepTimes();
  void enter(cudaStream_t s);    // the step's call begins
  void mark(int i);              // its tables are uploaded (0), its kernels or graph enqueued (1)
  void launched(cudaStream_t s); // its work is enqueued (before the copy back)
  void exit(int64_t rows);       // the step returns (after the sync)

 private:
  bool on_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  Clock::time_point enter_, marks_[2], launched_, exit_;
  bool have_exit_ = false;
  enum { kHost, kUpload, kEnqueue, kDevice, kWait, kOutside, kParts };
  std::array<std::vector<double>, kParts> us_;  // per one-row step (kOutside: per gap between two)
};

// What a captured step depends on beyond the device buffers' contents.
struct GraphKey {
  int64_t rows, kept, max_blocks;
  // Which attention kernels the step's rows take (attention.cu): 1 all of one sequence, 2 one
  // row for each sequence, 0 otherwise.
  int rows_of_seqs;
  uint64_t kv;  // the storage's serial: a new pool at a freed one's address is another key
  const void *arena, *ints;
  auto operator<=>(const GraphKey&) const = default;
};

class CudaPlan final : public Plan {
 public:
  CudaPlan(const ir::Module& m, const WeightSource& ws, const CudaSchedule& sched);
  ~CudaPlan() override {
    drop_graphs();
    if (stream_) cudaStreamDestroy(stream_);
  }
  std::unique_ptr<KvStorage> allocate_kv(int32_t n_blocks, int32_t block_size, KvElem elem) const override {
    return std::make_unique<CudaKvStorage>(layers_, n_blocks, block_size, elem);
  }
  void run(const StepBatch& batch, KvStorage& kv, float* logits_out) override;
  void run_top(const StepBatch& batch, KvStorage& kv, int32_t k, TopLogit* out) override;
  int64_t vocab_size() const override { return vocab_; }
  const std::vector<KvLayerShape>& kv_layers() const override { return layers_; }
  int threads() const override { return 1; }
  std::vector<std::string> explain() const override { return explain_; }

 private:
  const DeviceWeight& weight(const passes::OperandRef& o, const ir::Op& op) const;
  float* value(int v) const { return reinterpret_cast<float*>(arena_.get<uint8_t>() + slot_offset_[v] * capacity_); }
  void grow(int64_t rows);
  int64_t submit(const StepBatch& batch, KvStorage& kv);  // run's and run_top's step, left on the device
  // cuda_step.cpp: a step's ops on the stream, fused where the schedule and the rows allow.
  void enqueue(CudaKvStorage& kv, const StepTables& tables, int64_t T, int64_t kept);
  void run_op(int i, CudaKvStorage& kv, const StepTables& tables, int64_t T, int64_t rows);
  bool run_fused(const FusedStep& st, CudaKvStorage& kv, const StepTables& tables, int64_t T, int64_t rows);
  // A matmuls step's launch (run_fused, and a persistent step's phase): its parts and epilogue.
  struct MatmulStep {
    int64_t K = 0;
    int input = -1;                  // the value the matmuls read
    std::vector<MatmulPart> parts;
    MatmulEpilogue e = MatmulEpilogue::store;
    bool gated_q8 = false;           // the gated output also in q8_1 (the decode fusion's gated_q8)
    RopeKvOut rope_kv;               // when roped_attention >= 0
    int roped_attention = -1;        // the attention whose ropes and KV store the epilogue does
  };
  MatmulStep matmul_step(const FusedStep& st, CudaKvStorage& kv, const StepTables& tables, int64_t T, int64_t rows) const;
  bool q8_path(int64_t rows) const { return !(gemm_ && rows > gemm_rows_); }
  const Q8Buffer& quantize_for(int value, int64_t K, int64_t rows);
  RopeSpec rope_spec(const passes::LoweredOp& rope) const;  // a rope op's, for the fused kernels
  AttentionShape attention_shape(const ir::Op& attention) const;
  void replay(const GraphKey& key, CudaKvStorage& kv, const StepTables& tables, int64_t T, int64_t kept);
  // decode_persistent: the step of this key as one kernel (built and uploaded once per key, before
  // any capture), or why not (explain_, once).
  void prepare_persistent(CudaKvStorage& kv, const StepTables& tables);
  std::string build_persistent(CudaKvStorage& kv, const StepTables& tables, PersistentStep& out);
  void drop_graphs() {
    for (auto& [k, g] : graphs_) cudaGraphExecDestroy(g);
    graphs_.clear();
    seen_once_.clear();
    persistent_steps_.clear();
  }

  passes::Lowering low_;
  cudaStream_t stream_ = nullptr;
  std::map<const ir::Weight*, DeviceWeight> weights_;
  std::vector<DeviceBuffer> weight_memory_;
  std::vector<int64_t> slot_offset_;  // per value id: bytes per arena row before its slot
  int64_t arena_row_bytes_ = 0, capacity_ = 0;
  DeviceBuffer arena_, scratch_, step_ints_;
  // q8_1 activations: [0] written by quantize_for, fused norms and attention; a gated matmul
  // launch writes its output's q8_1 form into the one its input is not in.
  Q8Buffer q8_[2];
  int roped_attention_ = -1;          // an attention whose ropes and KV store a q/k/v launch of this step did
  DeviceBuffer gated_counters_;       // matmul_q8_parts' per-group counters (GatedQ8), kept zero
  DeviceBuffer mma_scratch_;          // activations re-laid for the tensor-core matmuls (MmaPath)
  MmaPath mma() const {
    return {mma_scratch_.get(), mma_scratch_.bytes(), mma_rows_, mma_split_warps_,
            mma_tiles_ ? MmaTiles::where_faster : MmaTiles::off};
  }
  int64_t q8_max_k_ = 0;
  int64_t graph_rows_ = 0, gemm_rows_ = 0, mma_rows_ = 0;
  int mma_split_warps_ = 4;           // mma_wide_split: 8
  bool mma_tiles_ = false;
  int64_t gemv_warps_ = 0;            // matmul_q8_parts' max_warps (gemv_resident: 0, else kWarpPerRow)
  bool programmatic_ = false;         // launch.cuh: the schedule asks for it and the device has it
  bool f16_weights_ = false;          // every matmul weight has a resident f16 copy (gemm_f16_weights)
  bool attention_mma_ = false;        // prompts' attention on tensor cores (AttentionShape::tensor_cores)
  bool merge_in_kernel_ = false;      // AttentionShape::merge_in_kernel (decode_merge_in_kernel)
  bool attention_mma_shared_ = false; // AttentionShape::mma_shared_kv (attention_mma_shared)
  bool persistent_ = false;           // decode_persistent (with decode_fusion and decode_rope_fold)
  GraphKey step_key_{};               // the current step's key (submit): its graph's and persistent step's
  std::map<GraphKey, PersistentStep> persistent_steps_;
  int persistent_prefix_ = 0;         // fused steps before the persistent kernel (the embedding)
  DecodeFusion fusion_;
  std::unique_ptr<Gemm> gemm_;
  std::string no_gemm_;               // why gemm_ is null
  int64_t gemm_max_nk_ = 0;           // the largest matmul weight, in elements
  DeviceBuffer gemm_w_, gemm_x_;      // f16 weight tile and activations of a GEMM
  DeviceBuffer top_buf_;              // run_top's ids, then its values
  std::vector<int32_t> top_host_;     // the same, copied back
  DeviceBuffer attn_scratch_;         // partial results of the split decode attention
  DeviceBuffer attn_counters_;        // its merge counters (merge_in_kernel_): zeroed when made
  std::map<GraphKey, cudaGraphExec_t> graphs_;
  std::set<GraphKey> seen_once_;
  std::vector<int> live_at_drop_;     // values gathered to the kept rows after the last attention
  int drop_step_ = -1;                // the step of the last attention (-1: none)
  std::vector<int32_t> host_ints_;
  std::vector<uint8_t> seq_seen_;     // submit(): which sequences the step's rows belong to
  std::vector<KvLayerShape> layers_;
  std::vector<std::string> explain_;
  int64_t vocab_ = 0;
  StepTimes times_;
};


}  // namespace loom::backend::cuda
