// Compiling a module for the fast backend: ops become steps over value ids, matmuls reading
// the same activation in the same format are grouped, every value and quantized activation
// gets an arena slot by liveness, and the row drop point (after the last attention op, as in
// the reference) is recorded with the values that live across it.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "backend/cpu/fast/fast_plan.h"
#include "passes/lowering.h"
#include "common/error.h"
#include "quant/quant.h"
#include "quant/simd/kernels.h"
#include "quant/simd/packed.h"

namespace loom::backend::cpu::fast {

namespace {

int64_t round64(int64_t x) { return (x + 63) / 64 * 64; }

// Once a weight lives on as x8 groups, its stored rows are only read again by the odd embedding
// lookup: MADV_PAGEOUT lets the kernel reclaim them (clean file pages of the model mapping)
// instead of keeping both copies resident. It never discards data: heap-backed weights (files
// built in memory) stay or go to swap, and a later read simply faults the page back in.
void release_pages(const uint8_t* p, size_t bytes) {
#ifdef MADV_PAGEOUT
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  const uintptr_t b = (uintptr_t(p) + page - 1) / page * page, e = (uintptr_t(p) + bytes) / page * page;
  if (e > b) madvise(reinterpret_cast<void*>(b), e - b, MADV_PAGEOUT);
#else
  (void)p, (void)bytes;
#endif
}

}  // namespace

const float* FastPlan::dense_of(const gguf::TensorInfo* t) {
  if (t->dims.size() > 1 && t->rows() > 1) return nullptr;
  auto [it, fresh] = dense_.try_emplace(t);
  if (fresh) {
    it->second.resize(t->elements());
    loom::quant::dequantize_row(t->type, t->data, it->second.data(), int64_t(t->elements()));
  }
  return it->second.data();
}

FastPlan::FastPlan(const ir::Module& m, const WeightSource& ws, const FastOptions& o) : opt_(o), pool_(o.threads) {
  namespace simd = loom::quant::simd;
  simd::force_isa(opt_.isa);  // packing and the kernels below read the level
  packed_arena_.huge_pages = opt_.huge_pages;
  const passes::Lowering low = passes::lower(m);
  const ScheduleReader sched(m, fast_schedule_keys());
  const std::vector<int64_t>& cols = low.cols;
  const int kTok = low.tokens, kPos = low.positions;
  has_mixing_ = low.has_mixing();
  const size_t last_attn = has_mixing_ ? size_t(low.last_mixing) : low.ops.size();
  auto tensor_of = [&](const passes::LoweredOp& lo, size_t i) -> const gguf::TensorInfo* {
    return lo.in[i].weight ? ws.at(lo.in[i].weight->name).tensor : nullptr;
  };
  passes::GroupRules rules{opt_.group_lookback, opt_.group_parts, [&](const passes::LoweredOp& a, const passes::LoweredOp& b) {
    return simd::act_type(tensor_of(a, 1)->type) == simd::act_type(tensor_of(b, 1)->type);
  }};
  const std::vector<int> leader = passes::group_matmuls(low, rules);
  std::vector<int> step_of(low.ops.size(), -1);

  for (size_t oi = 0; oi < low.ops.size(); ++oi) {
    const passes::LoweredOp& lo = low.ops[oi];
    const ir::Op& op = *lo.op;
    const StepKind kind = lo.code;
    Step s;
    s.kind = kind;
    s.op = &op;
    s.cols = lo.cols;
    std::vector<const gguf::TensorInfo*> w(lo.in.size(), nullptr);
    for (size_t i = 0; i < lo.in.size() && i < 4; ++i) {
      if ((w[i] = tensor_of(lo, i))) {
        if (!loom::quant::is_supported(w[i]->type))
          loom::fail("weight @{}: element type {} has no kernel", lo.in[i].weight->name, gguf::type_name(w[i]->type));
        continue;
      }
      s.in[i] = lo.in[i].value;
    }
    auto need_value = [&](int i) {
      if (s.in[i] < 0) loom::fail("line {}: %{}: operand {} must be a value", op.line, op.result, i + 1);
      return cols[s.in[i]];
    };
    auto vector_weight = [&](int i, int64_t n, const char* what) {
      if (!w[i] || !(s.vec = dense_of(w[i])) || int64_t(w[i]->elements()) != n)
        loom::fail("%{}: {} must be a weight vector of {} elements", op.result, what, n);
    };
    if (s.in[0] >= 0) s.in_cols = cols[s.in[0]];
    switch (kind) {
      case StepKind::embed:
        if (!w[0]) loom::fail("%{}: embed needs a weight table as its first operand", op.result);
        if (need_value(1), s.in[1] != kTok) loom::fail("%{}: embed reads the %tok parameter", op.result);
        s.table = w[0];
        if (int64_t(w[0]->row_elems()) != s.cols)
          loom::fail("%{}: table rows have {} elements, result has {}", op.result, w[0]->row_elems(), s.cols);
        break;
      case StepKind::rms_norm: {
        need_value(0);
        if (!w[1]) loom::fail("%{}: rms_norm needs a weight as its second operand", op.result);
        s.group = int64_t(w[1]->elements());
        vector_weight(1, s.group, "the norm weight");
        if (s.group <= 0 || s.in_cols % s.group || s.cols != s.in_cols)
          loom::fail("%{}: norm group {} does not divide row width {}", op.result, s.group, s.in_cols);
        s.f0 = float(passes::norm_eps(op));
        break;
      }
      case StepKind::add: case StepKind::mul: case StepKind::swiglu: case StepKind::geglu:
        need_value(0);
        if (kind == StepKind::swiglu || kind == StepKind::geglu) need_value(1);
        if (s.in[1] >= 0) {
          if (cols[s.in[1]] != s.in_cols)
            loom::fail("%{}: operand widths {} and {} do not match", op.result, s.in_cols, cols[s.in[1]]);
        } else {
          vector_weight(1, s.in_cols, "the second operand");
        }
        if (s.cols != s.in_cols) loom::fail("%{}: result width {} differs from operand {}", op.result, s.cols, s.in_cols);
        break;
      case StepKind::scale: case StepKind::softcap:
        need_value(0);
        s.f0 = float(passes::scalar_attr(op));
        if (kind == StepKind::softcap && !(s.f0 > 0)) loom::fail("%{}: softcap cap must be > 0", op.result);
        break;
      case StepKind::slice: {
        need_value(0);
        const passes::SliceAttrs sa = passes::slice_attrs(op);
        s.start = sa.start;
        if (s.start < 0 || s.cols <= 0 || s.start + s.cols > s.in_cols || sa.size != s.cols)
          loom::fail("%{}: slice [{}, {}) outside row width {}", op.result, s.start, s.start + s.cols, s.in_cols);
        break;
      }
      case StepKind::rope: {
        need_value(0);
        need_value(1);
        if (s.in[1] != kPos) loom::fail("%{}: rope positions must be the %pos parameter", op.result);
        const passes::RopeAttrs ra = passes::rope_attrs(op);
        RopeConfig rc;
        s.group = ra.head_dim;
        rc.n_rot = ra.n_rot;
        rc.base = float(ra.base);
        rc.freq_scale = float(ra.freq_scale);
        s.f0 = ra.neox ? 1.f : 0.f;
        if (s.group <= 0 || s.in_cols % s.group) loom::fail("%{}: head_dim {} does not divide width {}", op.result, s.group, s.in_cols);
        if (rc.n_rot <= 0 || rc.n_rot > s.group || rc.n_rot % 2) loom::fail("%{}: n_rot {} invalid for head_dim {}", op.result, rc.n_rot, s.group);
        if (op.operands.size() > 2) {
          vector_weight(2, rc.n_rot / 2, "rope frequency factors");
          rc.freq_factors = s.vec;
        }
        rc.theta_scale = std::pow(rc.base, -2.0f / float(rc.n_rot));
        s.rope = -1;
        for (size_t r = 0; r < ropes_.size(); ++r)
          if (ropes_[r].n_rot == rc.n_rot && ropes_[r].base == rc.base && ropes_[r].freq_scale == rc.freq_scale &&
              ropes_[r].freq_factors == rc.freq_factors)
            s.rope = int(r);
        if (s.rope < 0) {
          s.rope = int(ropes_.size());
          ropes_.push_back(std::move(rc));
        }
        break;
      }
      case StepKind::attention: {
        for (int i = 0; i < 4; ++i) need_value(i);
        if (s.in[3] != kPos) loom::fail("%{}: attention positions must be the %pos parameter", op.result);
        const passes::AttentionAttrs aa = passes::attention_attrs(op);
        AttentionSpec& a = s.attn;
        a.layer = int(aa.layer);
        a.n_head = aa.n_head;
        a.n_kv = aa.n_kv_head;
        a.head_dim = aa.head_dim;
        a.value_dim = aa.value_dim;
        a.scale = float(aa.scale);
        a.window = aa.window;
        a.softcap = float(aa.softcap);
        a.chunk = int32_t(std::get<int64_t>(sched.for_op("attention", "chunk", "")));
        a.rows = int32_t(std::get<int64_t>(sched.for_op("attention", "rows", "")));
        if (a.n_kv <= 0 || a.n_head % a.n_kv) loom::fail("%{}: n_head {} is not a multiple of n_kv_head {}", op.result, a.n_head, a.n_kv);
        if (cols[s.in[0]] != a.n_head * a.head_dim || cols[s.in[1]] != a.n_kv * a.head_dim ||
            cols[s.in[2]] != a.n_kv * a.value_dim || s.cols != a.n_head * a.value_dim)
          loom::fail("%{}: q/k/v/result widths {}/{}/{}/{} do not match heads {}x{}, {}x{}/{}", op.result, cols[s.in[0]],
                     cols[s.in[1]], cols[s.in[2]], s.cols, a.n_head, a.head_dim, a.n_kv, a.head_dim, a.value_dim);
        explain_.push_back(fmt::format("step {}: attention %{}: layer {}, {} heads ({} kv) x {}, kv chunk {}{}, "
                                       "block rows {}{}",
                                       steps_.size(), op.result, a.layer, a.n_head, a.n_kv, a.head_dim,
                                       a.chunk == 0 ? 256 : a.chunk, a.chunk == 0 ? " (default)" : "",
                                       a.rows == 0 ? 16 : a.rows, a.rows == 0 ? " (default)" : ""));
        break;
      }
      case StepKind::matmul: {
        need_value(0);
        const gguf::TensorInfo* wt = w[1];
        if (!wt) loom::fail("%{}: matmul takes a value and a weight", op.result);
        const std::string& wname = op.operands[1].name;
        const int64_t k = int64_t(wt->row_elems()), n = int64_t(wt->rows());
        if (s.in_cols != k)
          loom::fail("%{}: activation width {} but weight @{} rows have {}", op.result, s.in_cols, wname, k);
        if (s.cols != n) loom::fail("%{}: weight @{} has {} rows but result width is {}", op.result, wname, n, s.cols);
        MatmulPart part{wt->type, wt->data, loom::quant::row_size(wt->type, k), n, lo.out};
        part.prefill_type = part.type;
        part.prefill_data = part.data;
        part.prefill_row_bytes = part.row_bytes;
        const bool want_packed = std::get<std::string>(sched.for_op("matmul", "layout", wname)) == "packed";
        const bool want_repack = std::get<bool>(sched.for_op("matmul", "prefill_repack", wname));
        // The x8 layout where the level has kernels for it (quant/simd/packed.h): AVX-512 decode
        // GEMV 1.3-2x faster per thread; on AVX2 the 32-element types, whose stored-row kernels
        // spend most of a batched step converting per-row block sums to float.
        if (want_packed && simd::has_packed_kernel(wt->type, opt_.isa) && n >= simd::kPackRows) {
          auto pk = packed_.find(wt);
          const int64_t prows = n / simd::kPackRows * simd::kPackRows;
          const size_t gb = simd::packed_group_bytes(wt->type, k);
          if (pk == packed_.end()) {
            uint8_t* buf = packed_arena_.alloc(gb * size_t(prows / simd::kPackRows));
            // In slices of 64 groups across the pool (packing 1B-class models is seconds of work).
            const int64_t ng = prows / simd::kPackRows, slice = 64;
            pool_.for_each((ng + slice - 1) / slice, [&](int64_t i, int) {
              const int64_t g0 = i * slice, g1 = std::min(ng, g0 + slice);
              simd::pack_rows(wt->type, wt->data + size_t(g0) * 8 * part.row_bytes, part.row_bytes, (g1 - g0) * 8, k,
                              buf + size_t(g0) * gb);
            });
            // Right away (keeps the peak low), except for embedding tables (tied output
            // weights), which are read a row per token: the embed op comes first in programs.
            if (prows == n && std::none_of(steps_.begin(), steps_.end(), [&](const Step& st) { return st.table == wt; }))
              release_pages(wt->data, size_t(n) * part.row_bytes);
            pk = packed_.emplace(wt, buf).first;
          }
          part.packed = pk->second;
          part.packed_rows = prows;
          part.packed_group_bytes = gb;
        }
        auto it = repacked_.find(wt);
        // Packed weights serve prefill too (their few tail rows read the stored format).
        if (it == repacked_.end() && part.packed_rows == 0 && want_repack)
          if (RepackedWeight rw; repack_for_gemm_size(*wt, rw)) {
            uint8_t* buf = packed_arena_.alloc(rw.bytes);
            const int64_t nb = repack_blocks(*wt), slice = 4096;
            pool_.for_each((nb + slice - 1) / slice, [&](int64_t i, int) {
              repack_for_gemm(*wt, i * slice, std::min(nb, (i + 1) * slice), buf);
            });
            it = repacked_.emplace(wt, std::make_pair(rw.type, buf)).first;
          }
        if (it != repacked_.end() && part.packed_rows == 0 && want_repack) {
          part.prefill_type = it->second.first;
          part.prefill_data = it->second.second;
          part.prefill_row_bytes = loom::quant::row_size(it->second.first, k);
        }
        const gguf::TensorType act = simd::act_type(part.type);
        const std::string layout =
            part.packed_rows ? fmt::format("packed x8 ({} of {} rows)", part.packed_rows, n)
                             : std::string(want_packed ? "rows (no x8 kernel for this type/ISA)" : "rows");
        const std::string prefill = part.packed_rows ? "packed"
                                    : part.prefill_type != part.type
                                        ? fmt::format("repacked {}", gguf::type_name(part.prefill_type))
                                        : "rows";
        step_of[oi] = leader[oi] == int(oi) ? int(steps_.size()) : step_of[leader[oi]];
        explain_.push_back(fmt::format("step {}: matmul %{} = %{} x @{} ({} {}x{}): layout {}, prefill {}, act {}{}",
                                       step_of[oi], op.result, op.operands[0].name, wname, gguf::type_name(wt->type), n, k,
                                       layout, prefill, gguf::type_name(act),
                                       leader[oi] == int(oi) ? "" : fmt::format(", grouped with %{}", low.ops[leader[oi]].op->result)));
        if (leader[oi] != int(oi)) {
          steps_[step_of[oi]].parts.push_back(part);
          continue;
        }
        s.k = k;
        s.stream_rows = opt_.stream_rows;
        s.act_type = act;
        s.parts.push_back(part);
        s.out = part.out;
        steps_.push_back(std::move(s));
        continue;
      }
    }
    s.out = lo.out;
    step_of[oi] = int(steps_.size());
    steps_.push_back(std::move(s));
    if (oi == last_attn) drop_after_ = int(steps_.size()) - 1;
  }

  result_ = low.result;
  if (result_ == kTok || result_ == kPos) loom::fail("@step must return logits, not a parameter");
  vocab_ = cols[result_];
  layers_ = kv_layers_of(m);

  // Liveness over steps; quantized activations keyed by (value, format, side of the drop).
  const int n_values = int(cols.size());
  const std::vector<int> last_use = passes::last_use(low, step_of);
  std::vector<int> def(n_values, -1);
  std::map<std::tuple<int, int, bool>, int> quant_ids;
  std::vector<int> quant_last_use;
  for (int i = 0; i < int(steps_.size()); ++i) {
    Step& s = steps_[i];
    if (s.kind == StepKind::matmul) {
      for (const auto& p : s.parts) def[p.out] = i;
      if (s.act_type != gguf::TensorType::F32) {
        const auto key = std::make_tuple(s.in[0], int(s.act_type), i > drop_after_);
        auto [it, fresh] = quant_ids.try_emplace(key, int(quant_last_use.size()));
        if (fresh) quant_last_use.push_back(i);
        s.quantize = fresh;
        s.act_slot = it->second;
        quant_last_use[it->second] = i;
      }
    } else {
      def[s.out] = i;
    }
  }
  direct_result_ = last_use[result_] < 0 && def[result_] > drop_after_;
  if (has_mixing_) {
    for (int v = 2; v < n_values; ++v)
      if (def[v] >= 0 && def[v] <= drop_after_ && (last_use[v] > drop_after_ || v == result_)) live_at_drop_.push_back(v);
    explain_.push_back(fmt::format("rows whose logits are not wanted are dropped after step {} (%{}), {} values kept",
                                   drop_after_, low.ops[last_attn].op->result, live_at_drop_.size()));
  } else {
    explain_.push_back("no attention: rows whose logits are not wanted are dropped before step 0");
  }
  slots_.assign(n_values, Slot{});
  for (int v = 0; v < n_values; ++v) slots_[v].row_bytes = cols[v] * int64_t(sizeof(float));
  quant_slots_.assign(quant_last_use.size(), Slot{});
  for (const auto& [key, q] : quant_ids)
    quant_slots_[q].row_bytes = int64_t(loom::quant::row_size(gguf::TensorType(std::get<1>(key)), cols[std::get<0>(key)]));
  allocate_slots(n_values, last_use, quant_last_use);
  rope_tables_.resize(ropes_.size());
  rope_ready_.resize(ropes_.size());
  scratch_.resize(pool_.size());
  explain_.insert(explain_.begin(),
                  fmt::format("backend cpu: threads {}, isa {} (cap {}), huge_pages {}, matmul grouping lookback {} "
                              "parts {}, matmul weight-streaming tiles up to {} rows, {} steps from {} ops, activation "
                              "arena {} bytes/row, dump_dir {}, profile {}",
                              pool_.size(), simd::isa_name(), opt_.isa_cap, opt_.huge_pages, opt_.group_lookback,
                              opt_.group_parts, opt_.stream_rows, steps_.size(), low.ops.size(), arena_row_bytes_,
                              opt_.dump_dir.empty() ? "off" : opt_.dump_dir, opt_.profile));
}

// Best-fit re-use of dead slots: transformer layers repeat their widths, so after the first
// layer almost every value lands in a slot freed by the layer before.
void FastPlan::allocate_slots(int n_values, const std::vector<int>& last_use, const std::vector<int>& quant_last_use) {
  std::vector<std::pair<int64_t, int64_t>> free_blocks;  // (offset, bytes per row)
  auto take = [&](Slot& s) {
    const int64_t need = round64(s.row_bytes);
    size_t best = free_blocks.size();
    for (size_t b = 0; b < free_blocks.size(); ++b)
      if (free_blocks[b].second >= need && (best == free_blocks.size() || free_blocks[b].second < free_blocks[best].second))
        best = b;
    if (best < free_blocks.size() && free_blocks[best].second <= 2 * need) {
      s.offset = free_blocks[best].first;
      s.row_bytes = s.row_bytes;
      free_blocks.erase(free_blocks.begin() + best);
      return need;
    }
    s.offset = arena_row_bytes_;
    arena_row_bytes_ += need;
    return need;
  };
  std::vector<int64_t> held(n_values, 0), qheld(quant_last_use.size(), 0);
  for (int i = 0; i < int(steps_.size()); ++i) {
    const Step& s = steps_[i];
    std::vector<int> outs;
    if (s.kind == StepKind::matmul)
      for (const auto& p : s.parts) outs.push_back(p.out);
    else
      outs.push_back(s.out);
    for (int v : outs)
      if (!(v == result_ && direct_result_)) held[v] = take(slots_[v]);
    if (s.quantize) qheld[s.act_slot] = take(quant_slots_[s.act_slot]);
    for (int v = 2; v < n_values; ++v)
      if (held[v] && v != result_ && (last_use[v] == i || (last_use[v] < 0 && std::count(outs.begin(), outs.end(), v)))) {
        free_blocks.push_back({slots_[v].offset, held[v]});
        held[v] = 0;
      }
    for (size_t q = 0; q < qheld.size(); ++q)
      if (qheld[q] && quant_last_use[q] == i) {
        free_blocks.push_back({quant_slots_[q].offset, qheld[q]});
        qheld[q] = 0;
      }
  }
}

}  // namespace loom::backend::cpu::fast
