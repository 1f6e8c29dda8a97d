#include "quant/model_quantize.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "common/error.h"
#include "gguf/file.h"
#include "gguf/writer.h"
#include "quant/quant.h"

namespace loom::quant {
namespace {

using T = gguf::TensorType;

int64_t meta_int(const gguf::File& f, const std::string& key, int64_t def) {
  const gguf::Value* v = f.find(key);
  if (!v) return def;
  if (v->type == gguf::ValueType::ARRAY) {  // per-layer counts: the first layer's
    const auto& a = v->as_array();
    return a.items.empty() ? def : a.items[0].as_int();
  }
  return v->as_int();
}

ModelFacts facts_of(const gguf::File& f) {
  ModelFacts m;
  m.arch = f.architecture();
  m.n_layer = int(meta_int(f, m.arch + ".block_count", 0));
  m.n_head = int(meta_int(f, m.arch + ".attention.head_count", 0));
  m.n_head_kv = int(meta_int(f, m.arch + ".attention.head_count_kv", m.n_head));
  m.n_expert = int(meta_int(f, m.arch + ".expert_count", 0));
  return m;
}

std::string shape_of(const std::vector<uint64_t>& dims) {
  std::string s;
  for (size_t i = 0; i < 4; ++i) s += fmt::format("{}{:5}", i ? ", " : "", i < dims.size() ? dims[i] : 1);
  return s;
}

// Runs fn(first_row, n_rows) over chunks of rows on `threads` threads.
template <typename Fn>
void parallel_rows(int64_t rows, int64_t row_elems, int threads, Fn fn) {
  const int64_t chunk = std::max<int64_t>(1, (32 * 512 + row_elems - 1) / row_elems);  // llama's chunk
  std::atomic<int64_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    try {
      for (int64_t r; (r = next.fetch_add(chunk)) < rows;) fn(r, std::min(chunk, rows - r));
    } catch (...) {
      std::lock_guard lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < std::min<int64_t>(threads, (rows + chunk - 1) / chunk); ++i) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace

QuantizeSummary quantize_model(const std::string& in_path, const std::string& out_path,
                               const QuantizeOptions& opts) {
  auto log = [&](const std::string& s) { if (opts.log) opts.log(s); };
  const gguf::File in = gguf::File::open(in_path);
  const ModelFacts facts = facts_of(in);

  std::vector<TensorDesc> descs;
  for (const auto& t : in.tensors()) descs.push_back({t.name, t.dims, t.type});
  for (const auto& d : descs)
    if (!is_supported(d.type))
      loom::fail("quantize: {}: tensor {} has type {}, which Loom cannot read (not supported)", in_path, d.name, gguf::type_name(d.type));
  const std::vector<TypeChoice> choice = choose_types(facts, opts.ftype, descs);
  const std::vector<size_t> order = llama_tensor_order(descs);

  gguf::Writer w(in.alignment());
  for (const auto& [key, value] : in.metadata()) {
    if (key == "split.no" || key == "split.count" || key == "split.tensors.count") continue;
    w.set(key, value);
  }
  w.set("general.quantization_version", gguf::Value::u32(2));  // GGML_QNT_VERSION
  w.set("general.file_type", gguf::Value::u32(opts.ftype.llama_ftype));
  for (size_t i : order) w.declare_tensor(descs[i].name, descs[i].dims, choice[i].type);

  QuantizeSummary sum;
  sum.tensors = int(order.size());
  w.write(out_path, [&](size_t index, const gguf::Writer::TensorDecl& decl, std::span<uint8_t> out) {
    const size_t i = order[index];
    const gguf::TensorInfo& t = in.tensors()[i];
    const T to = choice[i].type;
    std::string line = fmt::format("[{:4}/{:4}] {:>36} - [{}], type = {:>6}, ", index + 1, order.size(),
                                   t.name, shape_of(t.dims), gguf::type_name(t.type));
    if (!choice[i].note.empty()) {
      log(fmt::format("warning: {:<36} - {}", t.name, choice[i].note));
      ++sum.fallbacks;
    }
    if (to == t.type) {
      std::memcpy(out.data(), t.data, t.nbytes);
      line += fmt::format("size = {:8.3f} MiB", t.nbytes / 1048576.0);
    } else {
      if (t.type != T::F32 && t.type != T::F16 && t.type != T::BF16) {
        log(fmt::format("warning: {}: requantizing from {}: dequantizing first, quality suffers", t.name, gguf::type_name(t.type)));
        ++sum.requantized;
      }
      const int64_t row = int64_t(t.row_elems()), rows = int64_t(t.rows());
      const size_t in_row = row_size(t.type, row), out_row = row_size(to, row);
      parallel_rows(rows, row, opts.threads, [&](int64_t r0, int64_t nr) {
        std::vector<float> buf(static_cast<size_t>(row));
        for (int64_t r = r0; r < r0 + nr; ++r) {
          dequantize_row(t.type, t.data + size_t(r) * in_row, buf.data(), row);
          quantize_row(to, buf.data(), out.data() + size_t(r) * out_row, row);
        }
      });
      ++sum.quantized;
      line += fmt::format("converting to {} .. size = {:8.2f} MiB -> {:8.2f} MiB", gguf::type_name(to),
                          t.nbytes / 1048576.0, decl.nbytes / 1048576.0);
    }
    sum.bytes_in += t.nbytes;
    sum.bytes_out += decl.nbytes;
    sum.elements += t.elements();
    log(line);
  });
  log(fmt::format("model size  = {:8.2f} MiB ({:.2f} BPW)", sum.bytes_in / 1048576.0, sum.bytes_in * 8.0 / double(std::max<uint64_t>(1, sum.elements))));
  log(fmt::format("quant size  = {:8.2f} MiB ({:.2f} BPW)", sum.bytes_out / 1048576.0, sum.bytes_out * 8.0 / double(std::max<uint64_t>(1, sum.elements))));
  if (sum.fallbacks) log(fmt::format("warning: {} of {} tensor(s) required fallback quantization", sum.fallbacks, sum.tensors));
  return sum;
}

}  // namespace loom::quant
