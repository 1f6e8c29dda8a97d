// The CUDA plan: the shared lowering (passes::lower) mapped onto the kernels of kernels.h.
//
// Compile uploads each matmul weight once, packed for the integer-dot kernels where its type
// has one (else in its stored format, as embed tables are), each 1-D weight as f32, and gives
// every value a buffer slot (slots are re-used once a value is dead, by exact width). A step
// uploads its token, position, sequence, kept-row and block-table arrays in one copy, runs the
// ops on the plan's stream (cuda_step.cpp: fused by decode_fusion.h into 7-9 kernels per llama
// layer where rows take the integer-dot path, launched with programmatic dependent launch on
// sm_90), gathers the wanted rows right after the last attention, and copies the logits back
// — or, for run_top, each row's k largest selected on the device (top_logits.cu) — the only
// synchronisation of a step. Steps of up to `graph_rows`
// rows run as one CUDA graph replay: the op sequence is captured once per step shape (rows,
// kept rows, block-table width, buffers) and replayed, since every per-step value the kernels
// read (tokens, positions, tables) lives in the device buffer the one upload fills. Matmuls of
// more than `gemm_rows` rows (prefill) dequantize the weight to f16 and run a cuBLAS GEMM on
// the tensor cores, where cuBLAS can be loaded.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "backend/cuda/check.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_plan.h"
#include "backend/cuda/value_slots.h"
#include "common/error.h"
#include "quant/quant.h"

namespace loom::backend::cuda {

using passes::Opcode;

CudaPlan::CudaPlan(const ir::Module& m, const WeightSource& ws, const CudaSchedule& sched)
    : low_(passes::lower(m)), graph_rows_(sched.graph_rows), gemm_rows_(sched.gemm_rows), mma_rows_(sched.mma_rows),
      mma_split_warps_(sched.mma_wide_split ? 8 : 4), mma_tiles_(sched.mma_tiles),
      gemv_warps_(sched.gemv_resident ? 0 : kWarpPerRow),
      attention_mma_(sched.attention_mma), merge_in_kernel_(sched.decode_merge_in_kernel),
      attention_mma_shared_(sched.attention_mma_shared), persistent_(sched.decode_persistent && sched.decode_fusion &&
                                                                      sched.decode_rope_fold),
      times_(sched.step_times) {
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
      DeviceWeight dw{t->type, nullptr, 0, nullptr, 0, nullptr, int64_t(t->rows()), int64_t(t->row_elems())};
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
  // Decode fusion (decode_fusion.h): which ops run as one kernel; buffers live by step.
  FusionRules rules;
  rules.enabled = sched.decode_fusion;
  rules.fold_ropes = sched.decode_rope_fold;
  auto weight_of = [&](const passes::LoweredOp& lo) -> const DeviceWeight* {
    if (lo.in.size() < 2 || !lo.in[1].weight) return nullptr;
    const auto it = weights_.find(lo.in[1].weight);
    return it == weights_.end() ? nullptr : &it->second;
  };
  rules.packed = [&](const passes::LoweredOp& lo) { return weight_of(lo) && weight_of(lo)->packed != nullptr; };
  rules.whole_row_norm = [&](const passes::LoweredOp& lo) { return weight_of(lo) && weight_of(lo)->cols == lo.cols; };
  fusion_ = fuse_decode(low_, rules);
  int device = 0, major = 0;
  LOOM_CUDA_CHECK(cudaGetDevice(&device));
  LOOM_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  programmatic_ = sched.programmatic_launch && major >= 9;
  // Slots by step (value_slots.h): a fused kernel never writes a buffer it reads.
  const ValueSlots slots = plan_value_slots(low_, fusion_);
  slot_offset_ = slots.offset;
  arena_row_bytes_ = slots.row_bytes;
  drop_step_ = slots.drop_step;
  live_at_drop_ = slots.live_at_drop;
  gemm_ = Gemm::open(stream_, no_gemm_);
  if (gemm_ && sched.gemm_f16_weights) {
    // Each matmul weight dequantized once, by the kernel a GEMM step would run: the same f16
    // values, so the same logits, for 2 bytes of device memory a weight.
    for (auto& [w, dw] : weights_) {
      if (!as_matmul_embed.at(w).first) continue;
      weight_memory_.emplace_back(size_t(dw.rows * dw.cols) * 2);
      __half* h = weight_memory_.back().get<__half>();
      if (dw.packed) weights_to_f16(dw.type, true, dw.packed, dw.packed_row_bytes, dw.rows, dw.cols, h, stream_);
      else weights_to_f16(dw.type, false, dw.data, dw.row_bytes, dw.rows, dw.cols, h, stream_);
      dw.f16 = h;
    }
    LOOM_CUDA_CHECK(cudaStreamSynchronize(stream_));
    f16_weights_ = true;
  }
  explain_.push_back(gemm_ ? fmt::format("matmuls of more than {} rows: {}, cuBLAS GEMM (f16 operands, f32 "
                                         "accumulation)", gemm_rows_, f16_weights_ ? "f16 copies of the weights made at "
                                         "compile (gemm_f16_weights)" : "weights dequantized to f16 each step")
                           : fmt::format("no prefill GEMM ({}): every matmul on the decode kernels", no_gemm_));
  explain_.push_back(fmt::format("steps of at most {} rows: one CUDA graph replay", graph_rows_));
  explain_.push_back(mma_rows_ > 0 && mma_device()
                         ? fmt::format("decode-kernel matmuls of {} or more rows: int8 tensor-core tiles (16 weight rows "
                                       "x up to 64 activation rows a warp; K split over blocks of {} warps){}",
                                       mma_rows_, mma_split_warps_,
                                       mma_tiles_ ? "; where measured faster (wide weights, rows past 8,192): f16 "
                                                    "weights and activations, blocks of 128 rows staged in shared "
                                                    "memory"
                                                  : "")
                         : std::string("no tensor-core matmuls (mma_rows = 0, or a device before sm_80)"));
  explain_.push_back(std::string("attention: steps of at most 8 rows, and batches of decodes (one row a sequence), by "
                                 "KV group; ") +
                     (attention_mma_ && mma_device()
                          ? std::string("other steps (prompts, and decodes beside them) on f16 tensor cores, a tile of "
                                        "up to 16 rows of one sequence and one head a warp (attention_mma)") +
                                (attention_mma_shared_ ? ", keys and values staged in shared memory (attention_mma_shared)"
                                                       : "")
                          : "other steps a block a row and head, f32 (attention_mma off, or a device before sm_80)") +
                     (merge_in_kernel_ ? "; a decode split into chunks merged by its last block (decode_merge_in_kernel)"
                                       : "; a decode split into chunks merged by a second kernel"));
  explain_.push_back(programmatic_ ? "kernels launched with programmatic dependent launch (each starts while the one "
                                     "before drains; weights prefetched to L2 before the wait)"
                                   : "kernels launched plainly (programmatic_launch off, or a device before sm_90)");
  if (sched.step_times)
    explain_.push_back("one-row steps timed (step_times): medians printed to stderr when the plan ends");
  explain_.push_back(fmt::format("decode fusion {}: {} ops in {} steps", sched.decode_fusion ? "on" : "off",
                                 low_.ops.size(), fusion_.steps.size()));
  for (const auto& lo : low_.ops) {
    std::string line = fmt::format("%{} = {}", lo.op->result, passes::opcode_name(lo.code));
    if (lo.code == Opcode::matmul) {
      const DeviceWeight& w = weights_.at(lo.in[1].weight);
      const bool tc = w.packed && mma_rows_ > 0 && has_mma_kernel(w.type) && mma_device();
      line += fmt::format(" @{} {}: {}{}", lo.weight_name(), gguf::type_name(w.type),
                          w.packed ? "packed weights, q8_1 activations, int8-dot warp-per-row matmul, 8 rows per pass"
                                   : "dequantizing warp-per-row matmul, 8 rows per pass",
                          tc ? fmt::format("; {} or more rows on int8 tensor cores", mma_rows_) : std::string());
    }
    if (lo.code == Opcode::attention) line += ": paged f16 attention, one block per (row, head), online softmax";
    const size_t i = size_t(&lo - low_.ops.data());
    const FusedStep& st = fusion_.steps[size_t(fusion_.step_of_op[i])];
    if (st.ops.size() > 1)
      line += fmt::format(" [fused in decode: {} of {} ops{}]",
                          st.kind == FusedStep::Kind::matmuls ? "one integer-dot launch" : "rope + KV store, attention",
                          st.ops.size(), st.epilogue_op >= 0 ? ", with its epilogue" : "");
    if (st.kind == FusedStep::Kind::matmuls && st.ops[0] == int(i) && st.rope_attention >= 0)
      line += fmt::format(" [one row: rope + KV store of %{} in the epilogue]", low_.ops[size_t(st.rope_attention)].op->result);
    if (fusion_.norm_q8[i]) line += " [fused in decode: writes q8_1 for the matmuls]";
    if (fusion_.attention_q8[i]) line += " [writes q8_1 for the output projection]";
    if (fusion_.gated_q8[i]) line += " [writes q8_1 for the down projection]";
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
    for (auto& b : q8_) {
      b.codes = DeviceBuffer(size_t(capacity_ * q8_max_k_));
      b.scales = DeviceBuffer(size_t(capacity_ * q8_max_k_ / 32) * sizeof(float2));
    }
    // Only steps on the decode kernels (at most gemm_rows rows with a GEMM) reach the MMA path.
    const int64_t mma_cap = gemm_ ? std::min(capacity_, gemm_rows_) : capacity_;
    if (mma_rows_ > 0 && mma_scratch_.bytes() < mma_scratch_bytes(mma_cap, q8_max_k_, mma_tiles_))
      mma_scratch_ = DeviceBuffer(mma_scratch_bytes(mma_cap, q8_max_k_, mma_tiles_));
    if (!gated_counters_.bytes()) {
      gated_counters_ = DeviceBuffer(size_t(q8_max_k_ / 32 + 1) * sizeof(int));
      LOOM_CUDA_CHECK(cudaMemset(gated_counters_.get(), 0, gated_counters_.bytes()));
    }
  }
  if (gemm_ && capacity_ > gemm_rows_) {
    if (!f16_weights_ && gemm_w_.bytes() < size_t(gemm_max_nk_) * 2) gemm_w_ = DeviceBuffer(size_t(gemm_max_nk_) * 2);
    gemm_x_ = DeviceBuffer(size_t(capacity_ * q8_max_k_) * 2);
  }
  drop_graphs();  // they name the old buffers
}

StepTimes::StepTimes(bool on) : on_(on) {
  if (!on_) return;
  LOOM_CUDA_CHECK(cudaEventCreate(&start_));
  LOOM_CUDA_CHECK(cudaEventCreate(&stop_));
}

StepTimes::~StepTimes() {
  if (!on_) return;
  auto median = [](std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  if (!us_[kHost].empty())
    std::fprintf(stderr,
                 "loom cuda step times, medians of %zu one-row steps: host %.1f us (tables + upload %.1f, kernels or "
                 "graph enqueued %.1f), device %.1f us, host waiting %.1f us; between steps (the caller) %.1f us\n",
                 us_[kHost].size(), median(us_[kHost]), median(us_[kUpload]), median(us_[kEnqueue]),
                 median(us_[kDevice]), median(us_[kWait]), median(us_[kOutside]));
  cudaEventDestroy(start_);
  cudaEventDestroy(stop_);
}

void StepTimes::enter(cudaStream_t s) {
  if (!on_) return;
  enter_ = Clock::now();
  LOOM_CUDA_CHECK(cudaEventRecord(start_, s));
}

void StepTimes::mark(int i) {
  if (on_) marks_[i] = Clock::now();
}

void StepTimes::launched(cudaStream_t s) {
  if (!on_) return;
  launched_ = Clock::now();
  LOOM_CUDA_CHECK(cudaEventRecord(stop_, s));
}

void StepTimes::exit(int64_t rows) {
  if (!on_) return;
  const auto now = Clock::now();
  auto us = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); };
  if (rows == 1) {
    float ms = 0;
    LOOM_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    us_[kHost].push_back(us(enter_, launched_));
    us_[kUpload].push_back(us(enter_, marks_[0]));
    us_[kEnqueue].push_back(us(marks_[0], marks_[1]));
    us_[kDevice].push_back(1e3 * double(ms));
    us_[kWait].push_back(us(launched_, now));
    if (have_exit_) us_[kOutside].push_back(us(exit_, enter_));
  }
  exit_ = now, have_exit_ = true;
}

void CudaPlan::run(const StepBatch& batch, KvStorage& kv, float* logits_out) {
  times_.enter(stream_);
  const int64_t kept = submit(batch, kv);
  times_.launched(stream_);
  LOOM_CUDA_CHECK(cudaMemcpyAsync(logits_out, value(low_.result), size_t(kept * vocab_) * sizeof(float),
                                  cudaMemcpyDeviceToHost, stream_));
  LOOM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  times_.exit(int64_t(batch.size()));
}

// The selection runs on the step's stream after its graph; k ids and k values a row come back.
void CudaPlan::run_top(const StepBatch& batch, KvStorage& kv, int32_t k, TopLogit* out) {
  if (k < 1 || k > vocab_) loom::fail("run_top: k = {} outside [1, {}]", k, vocab_);
  times_.enter(stream_);
  const int64_t kept = submit(batch, kv);
  const size_t n = size_t(kept) * size_t(k);
  if (top_buf_.bytes() < n * 8) top_buf_ = DeviceBuffer(n * 8 * 2);
  int32_t* ids = top_buf_.get<int32_t>();
  float* vals = reinterpret_cast<float*>(ids + n);
  top_logits(value(low_.result), kept, vocab_, k, ids, vals, stream_);
  times_.launched(stream_);
  top_host_.resize(2 * n);
  LOOM_CUDA_CHECK(cudaMemcpyAsync(top_host_.data(), ids, n * 8, cudaMemcpyDeviceToHost, stream_));
  LOOM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  times_.exit(int64_t(batch.size()));
  const float* hv = reinterpret_cast<const float*>(top_host_.data() + n);
  for (size_t i = 0; i < n; ++i) out[i] = {top_host_[i], hv[i]};
  for (int64_t r = 0; r < kept; ++r) std::sort(out + r * k, out + (r + 1) * k, ranks_before);
}

// Uploads the step's tables and enqueues its kernels (a graph replay where it can); returns the
// number of logit rows, left in value(low_.result) on the device.
int64_t CudaPlan::submit(const StepBatch& batch, KvStorage& kv_any) {
  batch.validate();
  auto* kv = dynamic_cast<CudaKvStorage*>(&kv_any);
  if (!kv) loom::fail("the CUDA plan needs KV storage from its own allocate_kv");
  const int64_t T = int64_t(batch.size());
  grow(T);
  // One upload: tokens, positions, sequences, kept rows, attention tiles, then the flattened
  // block tables.
  // The table width is rounded up to a power of two so that a decode step's graph is
  // re-captured only when the context doubles (the padding entries are never read).
  int64_t max_blocks = 4;
  for (const auto& t : batch.block_tables)
    while (max_blocks < int64_t(t.size())) max_blocks *= 2;
  const int64_t n_seqs = std::max<int64_t>(1, int64_t(batch.block_tables.size()));
  host_ints_.assign(size_t(5 * T + n_seqs * max_blocks), 0);
  int32_t* h = host_ints_.data();
  int64_t kept = 0;
  seq_seen_.assign(size_t(n_seqs), 0);
  int32_t row_seqs = 0;  // sequences among the rows
  for (int64_t t = 0; t < T; ++t) {
    const int32_t s = batch.seq(size_t(t));
    if (s >= n_seqs || batch.positions[t] / kv->block_size() >= int64_t(batch.block_tables.at(size_t(s)).size()))
      loom::fail("step row {}: sequence {} position {} is not covered by its block table", t, s, batch.positions[t]);
    if (!seq_seen_[size_t(s)]) seq_seen_[size_t(s)] = 1, ++row_seqs;
    h[t] = batch.tokens[t];
    h[T + t] = batch.positions[t];
    h[2 * T + t] = s;
    if (batch.wants(size_t(t))) h[3 * T + kept++] = int32_t(t);
  }
  // The prompt attention's tiles (runs of one sequence). A step replayed from a graph launches
  // for the bound, T tiles (the rest 0 rows), unless its rows are one sequence's (a fixed count).
  const int64_t n_tiles = attention_tiles(h + 2 * T, T, h + 4 * T);
  const bool bound = T <= graph_rows_ && row_seqs != 1;
  for (int64_t s = 0; s < int64_t(batch.block_tables.size()); ++s)
    for (size_t i = 0; i < batch.block_tables[s].size(); ++i) {
      const int32_t b = batch.block_tables[s][i];
      if (b < 0 || b >= kv->n_blocks()) loom::fail("block table of sequence {}: block {} outside the pool", s, b);
      h[5 * T + s * max_blocks + int64_t(i)] = b;
    }
  if (step_ints_.bytes() < host_ints_.size() * 4) {
    drop_graphs();  // they read the old buffer
    step_ints_ = DeviceBuffer(host_ints_.size() * 4 * 2);
  }
  LOOM_CUDA_CHECK(cudaMemcpyAsync(step_ints_.get(), h, host_ints_.size() * 4, cudaMemcpyHostToDevice, stream_));
  times_.mark(0);
  const int32_t* d = step_ints_.get<int32_t>();
  const StepTables tables{d + 2 * T, d + T, d + 5 * T, int32_t(max_blocks), row_seqs, d + 4 * T,
                          int32_t(bound ? T : n_tiles)};
  // Scratch of the split decode attention, sized here: a captured step cannot allocate.
  size_t attn_floats = 0, attn_words = 0;
  for (const auto& lo : low_.ops)
    if (lo.code == Opcode::attention) {
      const auto aa = passes::attention_attrs(*lo.op);
      attn_floats = std::max(attn_floats, attention_scratch_floats(attention_shape(*lo.op), kv->layer(aa.layer), tables, T));
      attn_words = std::max(attn_words, attention_counter_words(attention_shape(*lo.op), T));
    }
  if (attn_scratch_.bytes() < attn_floats * sizeof(float)) {
    drop_graphs();
    attn_scratch_ = DeviceBuffer(attn_floats * sizeof(float) * 2);
  }
  if (attn_counters_.bytes() < attn_words * sizeof(unsigned)) {
    drop_graphs();
    attn_counters_ = DeviceBuffer(attn_words * sizeof(unsigned) * 2);
    LOOM_CUDA_CHECK(cudaMemsetAsync(attn_counters_.get(), 0, attn_counters_.bytes(), stream_));
  }
  step_key_ = {T, kept, max_blocks, row_seqs == 1 ? 1 : row_seqs == T ? 2 : 0, kv->serial(), arena_.get(),
                     step_ints_.get()};
  if (persistent_ && T == 1 && kept == 1) prepare_persistent(*kv, tables);  // outside any capture
  auto step = [&] {
    if (T <= graph_rows_)
      replay(step_key_, *kv, tables, T, kept);
    else
      enqueue(*kv, tables, T, kept);
  };
  try {
    step();
    times_.mark(1);
  } catch (const loom::Error& e) {
    if (!programmatic_) throw;
    // A driver that refuses programmatic launches, or their capture into a graph: launch
    // plainly from now on and run the step again (it rewrites the same KV rows and values).
    cudaGetLastError();
    programmatic_ = false;
    drop_graphs();
    explain_.push_back(fmt::format("programmatic launch failed here ({}): kernels launched plainly", e.what()));
    step();
  }
  return kept;
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

namespace {

class CudaBackend final : public Backend {
 public:
  std::string name() const override { return "cuda"; }
  bool supports(const ir::Op& op) const override { return passes::opcode_of(op.opcode).has_value(); }
  const std::vector<ScheduleKey>& schedule_keys() const override {
    // `threads` is accepted so programs ported for any backend run here; it sets host threads,
    // of which this plan uses one.
    static const std::vector<ScheduleKey> keys = {
        {"", "threads", ScheduleKey::Type::integer, 0, 1024, {}, int64_t(0), "host threads (the CUDA plan uses one)"},
        // Both on by default since a device run passed gpu-check with them (docs/cuda-kernels.md,
        // run C: kernel tests and memcheck clean, end-to-end KL unchanged, tg128 1.55x on the
        // 135M shape and 1.11x on the 1B shape; the 1B shape alone decodes 2% faster with
        // fusion but no programmatic launch, a choice its program's schedule can make).
        {"", "decode_fusion", ScheduleKey::Type::boolean, 0, 0, {}, true,
         "decode steps run fused kernels: norm + q8_1, q/k/v and gate/up (+ swiglu) as one launch each, rope into "
         "the KV store, residual adds in the matmul epilogue"},
        // On since its first measurement (H100, tg128 with the fold off / on: 135M 1,088 / 1,167,
        // 1B 1,176 / 1,221, 8B 375.9 / 377.7 t/s; docs/cuda-kernels.md, version 8).
        {"", "decode_rope_fold", ScheduleKey::Type::boolean, 0, 0, {}, true,
         "with decode_fusion, at one activation row: the q/k/v launch rotates q and k (llama's rotary pairs) and "
         "stores k and v into the KV cache in its epilogue, so attention runs alone"},
        {"", "programmatic_launch", ScheduleKey::Type::boolean, 0, 0, {}, true,
         "kernels start while the previous one drains (Hopper's programmatic dependent launch; ignored before sm_90)"},
        // 64 since run 20 (H100, 8B shape, version 14d, same call): B = 64 5,807.1 -> 6,011.9 t/s,
        // B = 8 / 32 and the batches' prompts unchanged (a step's kernels one by one left gaps the
        // replay closes). The graphs stay bounded: a shape's first step runs op by op, at most 32 kept.
        {"", "graph_rows", ScheduleKey::Type::integer, 0, 4096, {}, int64_t(64),
         "steps of at most this many rows run as one CUDA graph replay (0: launch op by op)"},
        // 64 since the tensor-core matmuls (mma_rows): at B = 64 on the 8B shape they decode 12%
        // faster than the f16 GEMM (run G, H100: 2,192 against 1,960 t/s aggregate).
        {"", "gemm_rows", ScheduleKey::Type::integer, 0, 1 << 20, {}, int64_t(64),
         "matmuls of more rows than this dequantize to f16 and run a cuBLAS GEMM; fewer use the decode kernels"},
        {"", "gemm_f16_weights", ScheduleKey::Type::boolean, 0, 0, {}, false,
         "the GEMM reads f16 copies of the matmul weights made once at compile instead of dequantizing each weight "
         "every step of more than gemm_rows rows (device memory: 2 bytes a weight more)"},
        {"", "mma_rows", ScheduleKey::Type::integer, 0, 4096, {}, int64_t(4),
         "decode-kernel matmuls of at least this many rows run on tensor cores (int8 MMA, 16 weight rows by up to 64 "
         "activation rows a warp, weights read once per 64 rows); fewer take the warp-per-row kernel (0: never)"},
        {"", "attention_mma_shared", ScheduleKey::Type::boolean, 0, 0, {}, false,
         "with attention_mma, where a block's 4 warps are 4 query heads of one KV head: each pass's keys and values "
         "are staged in shared memory (cp.async, the next pass's in flight) and read as fragments by ldmatrix"},
        {"", "decode_merge_in_kernel", ScheduleKey::Type::boolean, 0, 0, {}, false,
         "a decode step's attention split into chunks is merged by the last block of each row to finish (an atomic "
         "ticket) instead of by a second kernel on the step's chain"},
        {"", "attention_mma", ScheduleKey::Type::boolean, 0, 0, {}, true,
         "the attention of steps of more than 8 rows that are not a batch of decodes (prompts, with any decodes beside "
         "them) runs on f16 tensor cores: up to 16 rows of one sequence a warp, queries and probabilities rounded to "
         "f16, f32 sums and softmax (false: the f32 kernel, a block a row and head)"},
        // On since its first measurement: 8B shape, H200, B = 8 / 32 / 64 +37 / +18 / +8% (docs/cuda-kernels.md, 4c).
        {"", "mma_wide_split", ScheduleKey::Type::boolean, 0, 0, {}, true,
         "tensor-core store launches that split K over a block's warps use blocks of 8 warps (two an SM, 128 "
         "registers) instead of 4: twice the warps in flight on narrow weights"},
        // On since its end-to-end measurement (run 19, H100, 8B shape): B = 64 4,283.8 -> 5,304.6 t/s,
        // B = 8 / 32 unchanged (it took only launches of more than 32 rows then), the logits' KL at
        // steps of 64 4.03e-4; since its call 2, also the down projection and 25-32 rows, and since
        // run 20 (version 14d) 9-24 rows and, at 8 rows or fewer, down and the output head, and since
        // run 21 (version 14e) gate/up at 8 rows or fewer too: where its kernel bench measured it faster
        // (tiled_split.h, docs/cuda-kernels.md, version 14).
        {"", "mma_tiles", ScheduleKey::Type::boolean, 0, 0, {}, true,
         "tensor-core matmuls whose rows are longer than 8,192 (down) or whose weights fill half the SMs with tiles "
         "of 128 rows (gate/up, the output head) run as blocks of 128 weight rows whose weights "
         "and activations pass through shared memory in chunks of 256 elements (cp.async, two chunks ahead), the "
         "weights dequantized to f16 in registers and "
         "multiplied with f16 activations (the q8_1 input's d * code) on f16 tensor cores summing in f32 (false, "
         "and the other launches: int8 MMA on the q8_1 codes, each group's int32 sums scaled in f32)"},
        {"", "gemv_resident", ScheduleKey::Type::boolean, 0, 0, {}, true,
         "the warp-per-row matmuls launch as many warps as the device holds at once, each streaming an even range of "
         "rows with its loads a few steps ahead (false: one tile a warp, a pair of rows or a gate row and its up row)"},
        {"", "decode_persistent", ScheduleKey::Type::boolean, 0, 0, {}, false,
         "with decode_fusion and decode_rope_fold, a one-row step after its embedding runs as one kernel of resident "
         "blocks whose phases (the fused launches) meet at a grid barrier; each block stages a matmul's input row "
         "(through its RMS norm) in shared memory itself, giving the launched step's bits (runs 14-16, H100); slower "
         "than the launched step there (run 16: 135M tg128 653 against 1,191 t/s; 8B 144 against 379 before the last "
         "staging change; a grid barrier 1.4-2 us, one block's staging of a 4096-wide row ~3.5 us); steps it cannot "
         "hold run launched, with a warning"},
        {"", "step_times", ScheduleKey::Type::boolean, 0, 0, {}, false,
         "a diagnostic: time each one-row step (host, device by stream events, waiting, between steps) and print "
         "the medians to stderr when the plan ends"}};
    return keys;
  }
  std::unique_ptr<Plan> compile(const ir::Module& m, const WeightSource& ws, const CompileOptions&) const override {
    check_schedule(m, schedule_keys(), name());
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
      loom::fail("the cuda backend: no CUDA device is visible on this machine");
    const ScheduleReader sr(m, schedule_keys());
    CudaSchedule sched;
    sched.graph_rows = sr.integer("graph_rows");
    sched.gemm_rows = sr.integer("gemm_rows");
    sched.mma_rows = sr.integer("mma_rows");
    sched.decode_fusion = sr.boolean("decode_fusion");
    sched.decode_rope_fold = sr.boolean("decode_rope_fold");
    sched.programmatic_launch = sr.boolean("programmatic_launch");
    sched.gemm_f16_weights = sr.boolean("gemm_f16_weights");
    sched.mma_wide_split = sr.boolean("mma_wide_split");
    sched.mma_tiles = sr.boolean("mma_tiles");
    sched.gemv_resident = sr.boolean("gemv_resident");
    sched.step_times = sr.boolean("step_times");
    sched.attention_mma = sr.boolean("attention_mma");
    sched.decode_merge_in_kernel = sr.boolean("decode_merge_in_kernel");
    sched.attention_mma_shared = sr.boolean("attention_mma_shared");
    sched.decode_persistent = sr.boolean("decode_persistent");
    return std::make_unique<CudaPlan>(m, ws, sched);
  }
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace loom::backend::cuda
