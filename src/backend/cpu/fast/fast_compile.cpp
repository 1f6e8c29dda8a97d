// Compiling a module for the fast backend: ops become steps over value ids, matmuls reading
// the same activation in the same format are grouped, every value and quantized activation
// gets an arena slot by liveness, and the row drop point (after the last attention op, as in
// the reference) is recorded with the values that live across it.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "backend/cpu/fast/fast_plan.h"
#include "common/error.h"
#include "quant/quant.h"
#include "quant/simd/kernels.h"
#include "quant/simd/packed.h"

namespace loom::backend::cpu::fast {

namespace {

constexpr int kTok = 0, kPos = 1;        // value ids of the @step parameters
constexpr int kGroupLookback = 6;        // steps back a matmul may join a group reading its input
constexpr size_t kMaxGroupParts = 8;

StepKind kind_of(const std::string& opcode, int line) {
  static const std::pair<const char*, StepKind> table[] = {
      {"embed", StepKind::embed},     {"rms_norm", StepKind::rms_norm}, {"add", StepKind::add},
      {"mul", StepKind::mul},         {"scale", StepKind::scale},       {"softcap", StepKind::softcap},
      {"swiglu", StepKind::swiglu},   {"geglu", StepKind::geglu},       {"slice", StepKind::slice},
      {"rope", StepKind::rope},       {"attention", StepKind::attention}, {"matmul", StepKind::matmul},
  };
  for (const auto& [name, k] : table)
    if (opcode == name) return k;
  loom::fail("line {}: op {} is not supported by the fast CPU backend", line, opcode);
}

int64_t round64(int64_t x) { return (x + 63) / 64 * 64; }

// Matmul weights of the types with an x8 layout are repacked into it when the AVX-512 kernels
// run (quant/simd/packed.h; decode GEMV 1.3-2x faster per thread). LOOM_FAST_PACK=0 keeps the
// stored rows.
bool pack_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("LOOM_FAST_PACK");
    return !(e && std::string(e) == "0");
  }();
  return on && loom::quant::simd::isa() == loom::quant::simd::Isa::avx512;
}

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

FastPlan::FastPlan(const ir::Module& m, const WeightSource& ws, int threads) : pool_(threads) {
  const ir::Func* f = m.find_func("step");
  if (!f) loom::fail("module @{} has no func @step", m.name);
  if (f->params.size() != 2) loom::fail("@step must take (%tok, %pos), has {} parameters", f->params.size());
  if (f->results.size() != 1) loom::fail("@step must return the logits only, returns {} values", f->results.size());
  std::map<std::string, int, std::less<>> ids;
  std::vector<int64_t> cols;
  for (const auto& p : f->params) {
    if (p.type.elem != ir::Elem::i32) loom::fail("@step parameter %{} must be i32", p.name);
    ids[p.name] = int(cols.size());
    cols.push_back(1);
  }
  size_t last_attn = f->body.size();
  for (size_t oi = 0; oi < f->body.size(); ++oi)
    if (f->body[oi].opcode == "attention") last_attn = oi;
  has_mixing_ = last_attn < f->body.size();

  for (size_t oi = 0; oi < f->body.size(); ++oi) {
    const ir::Op& op = f->body[oi];
    const StepKind kind = kind_of(op.opcode, op.line);
    if (op.type.shape.size() != 2 || !op.type.shape[1].is_static())
      loom::fail("line {}: %{} must be [T x N] with a static N", op.line, op.result);
    if (ids.count(op.result)) loom::fail("line {}: %{} defined twice", op.line, op.result);
    Step s;
    s.kind = kind;
    s.op = &op;
    s.cols = op.type.shape[1].value;
    std::vector<const gguf::TensorInfo*> w(op.operands.size(), nullptr);
    for (size_t i = 0; i < op.operands.size() && i < 4; ++i) {
      const auto& o = op.operands[i];
      if (o.kind == ir::Operand::Kind::weight) {
        w[i] = ws.at(o.name).tensor;
        if (!loom::quant::is_supported(w[i]->type))
          loom::fail("weight @{}: element type {} has no kernel", o.name, gguf::type_name(w[i]->type));
        continue;
      }
      auto it = ids.find(o.name);
      if (it == ids.end()) loom::fail("line {}: %{} used before it is defined", op.line, o.name);
      s.in[i] = it->second;
    }
    // Which operand may be a parameter: tokens for embed, positions for rope and attention.
    for (int i = 0; i < 4; ++i) {
      const int v = s.in[i];
      if (v != kTok && v != kPos) continue;
      const bool ok = (kind == StepKind::embed && i == 1 && v == kTok) ||
                      ((kind == StepKind::rope && i == 1) || (kind == StepKind::attention && i == 3));
      if (!ok) loom::fail("line {}: %{} cannot read the i32 parameter as an activation", op.line, op.result);
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
    const auto& at = op.attrs;
    switch (kind) {
      case StepKind::embed:
        if (!w[0]) loom::fail("%{}: embed needs a weight table as its first operand", op.result);
        need_value(1);
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
        s.f0 = float(ir::attr_float(at, "eps"));
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
        s.f0 = float(ir::attr_float(at, kind == StepKind::scale ? "factor" : "cap"));
        if (kind == StepKind::softcap && !(s.f0 > 0)) loom::fail("%{}: softcap cap must be > 0", op.result);
        break;
      case StepKind::slice:
        need_value(0);
        s.start = ir::attr_int(at, "start");
        if (s.start < 0 || s.cols <= 0 || s.start + s.cols > s.in_cols || ir::attr_int(at, "size") != s.cols)
          loom::fail("%{}: slice [{}, {}) outside row width {}", op.result, s.start, s.start + s.cols, s.in_cols);
        break;
      case StepKind::rope: {
        need_value(0);
        need_value(1);
        if (s.in[1] != kPos) loom::fail("%{}: rope positions must be the %pos parameter", op.result);
        RopeConfig rc;
        s.group = ir::attr_int(at, "head_dim");
        rc.n_rot = ir::attr_int(at, "n_rot");
        rc.base = float(ir::attr_float(at, "base"));
        rc.freq_scale = float(ir::attr_float(at, "freq_scale", 1.0));
        const std::string mode = ir::attr_string(at, "mode", "normal");
        if (mode != "normal" && mode != "neox") loom::fail("%{}: rope mode \"{}\" (want normal or neox)", op.result, mode);
        s.f0 = mode == "neox" ? 1.f : 0.f;
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
        AttentionSpec& a = s.attn;
        a.layer = int(ir::attr_int(at, "layer"));
        a.n_head = ir::attr_int(at, "n_head");
        a.n_kv = ir::attr_int(at, "n_kv_head");
        a.head_dim = ir::attr_int(at, "head_dim");
        a.value_dim = ir::attr_int(at, "value_dim");
        a.scale = float(ir::attr_float(at, "scale"));
        a.window = ir::attr_int(at, "window", 0);
        a.softcap = float(ir::attr_float(at, "softcap", 0.0));
        if (a.n_kv <= 0 || a.n_head % a.n_kv) loom::fail("%{}: n_head {} is not a multiple of n_kv_head {}", op.result, a.n_head, a.n_kv);
        if (cols[s.in[0]] != a.n_head * a.head_dim || cols[s.in[1]] != a.n_kv * a.head_dim ||
            cols[s.in[2]] != a.n_kv * a.value_dim || s.cols != a.n_head * a.value_dim)
          loom::fail("%{}: q/k/v/result widths {}/{}/{}/{} do not match heads {}x{}, {}x{}/{}", op.result, cols[s.in[0]],
                     cols[s.in[1]], cols[s.in[2]], s.cols, a.n_head, a.head_dim, a.n_kv, a.head_dim, a.value_dim);
        break;
      }
      case StepKind::matmul: {
        need_value(0);
        const gguf::TensorInfo* wt = w[1];
        if (!wt) loom::fail("%{}: matmul takes a value and a weight", op.result);
        const int64_t k = int64_t(wt->row_elems()), n = int64_t(wt->rows());
        if (s.in_cols != k)
          loom::fail("%{}: activation width {} but weight @{} rows have {}", op.result, s.in_cols, op.operands[1].name, k);
        if (s.cols != n) loom::fail("%{}: weight @{} has {} rows but result width is {}", op.result, op.operands[1].name, n, s.cols);
        MatmulPart part{wt->type, wt->data, loom::quant::row_size(wt->type, k), n, int(cols.size())};
        part.prefill_type = part.type;
        part.prefill_data = part.data;
        part.prefill_row_bytes = part.row_bytes;
        if (pack_enabled() && loom::quant::simd::has_packed_layout(wt->type) && n >= loom::quant::simd::kPackRows) {
          auto pk = packed_.find(wt);
          const int64_t prows = n / loom::quant::simd::kPackRows * loom::quant::simd::kPackRows;
          const size_t gb = loom::quant::simd::packed_group_bytes(wt->type, k);
          if (pk == packed_.end()) {
            uint8_t* buf = packed_arena_.alloc(gb * size_t(prows / loom::quant::simd::kPackRows));
            // In slices of 64 groups across the pool (packing 1B-class models is seconds of work).
            const int64_t ng = prows / loom::quant::simd::kPackRows, slice = 64;
            pool_.for_each((ng + slice - 1) / slice, [&](int64_t i, int) {
              const int64_t g0 = i * slice, g1 = std::min(ng, g0 + slice);
              loom::quant::simd::pack_rows(wt->type, wt->data + size_t(g0) * 8 * part.row_bytes, part.row_bytes,
                                           (g1 - g0) * 8, k, buf + size_t(g0) * gb);
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
        if (it == repacked_.end() && part.packed_rows == 0)
          if (RepackedWeight rw; repack_for_gemm(*wt, rw)) it = repacked_.emplace(wt, std::move(rw)).first;
        if (it != repacked_.end()) {
          part.prefill_type = it->second.type;
          part.prefill_data = it->second.data.data();
          part.prefill_row_bytes = loom::quant::row_size(it->second.type, k);
        }
        const gguf::TensorType act = loom::quant::simd::act_type(part.type);
        // Join an earlier matmul reading the same activation in the same format: running this
        // one earlier is always valid, since its only value operand is already defined then.
        const size_t floor = has_mixing_ && oi > last_attn ? size_t(drop_after_ + 1) : 0;
        Step* join = nullptr;
        for (size_t b = steps_.size(); b > floor && steps_.size() - b < size_t(kGroupLookback); --b) {
          Step& c = steps_[b - 1];
          if (c.kind == StepKind::matmul && c.in[0] == s.in[0] && c.act_type == act && c.parts.size() < kMaxGroupParts) {
            join = &c;
            break;
          }
        }
        ids[op.result] = int(cols.size());
        cols.push_back(s.cols);
        if (join) {
          join->parts.push_back(part);
          continue;
        }
        s.k = k;
        s.act_type = act;
        s.parts.push_back(part);
        s.out = part.out;
        steps_.push_back(std::move(s));
        continue;
      }
    }
    s.out = ids[op.result] = int(cols.size());
    cols.push_back(s.cols);
    steps_.push_back(std::move(s));
    if (oi == last_attn) drop_after_ = int(steps_.size()) - 1;
  }

  auto rit = ids.find(f->results[0]);
  if (rit == ids.end()) loom::fail("@step returns %{} which is not defined", f->results[0]);
  result_ = rit->second;
  if (result_ == kTok || result_ == kPos) loom::fail("@step must return logits, not a parameter");
  vocab_ = cols[result_];
  layers_ = kv_layers_of(m);

  // Liveness over steps; quantized activations keyed by (value, format, side of the drop).
  const int n_values = int(cols.size());
  std::vector<int> def(n_values, -1), last_use(n_values, -1);
  std::map<std::tuple<int, int, bool>, int> quant_ids;
  std::vector<int> quant_last_use;
  bool result_read = false;
  for (int i = 0; i < int(steps_.size()); ++i) {
    Step& s = steps_[i];
    for (int v : s.in)
      if (v >= 0) {
        last_use[v] = i;
        result_read |= v == result_;
      }
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
  direct_result_ = !result_read && def[result_] > drop_after_;
  if (has_mixing_)
    for (int v = 2; v < n_values; ++v)
      if (def[v] >= 0 && def[v] <= drop_after_ && (last_use[v] > drop_after_ || v == result_)) live_at_drop_.push_back(v);
  slots_.assign(n_values, Slot{});
  for (int v = 0; v < n_values; ++v) slots_[v].row_bytes = cols[v] * int64_t(sizeof(float));
  quant_slots_.assign(quant_last_use.size(), Slot{});
  for (const auto& [key, q] : quant_ids)
    quant_slots_[q].row_bytes = int64_t(loom::quant::row_size(gguf::TensorType(std::get<1>(key)), cols[std::get<0>(key)]));
  allocate_slots(n_values, last_use, quant_last_use);
  rope_tables_.resize(ropes_.size());
  rope_ready_.resize(ropes_.size());
  scratch_.resize(pool_.size());
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
