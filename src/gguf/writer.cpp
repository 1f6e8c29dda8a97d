#include "gguf/writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>

#include "common/error.h"

namespace gguf {
namespace {

constexpr uint32_t kVersion = 3;

class Bytes {
 public:
  template <typename T>
  void put(T x) {
    const auto* p = reinterpret_cast<const uint8_t*>(&x);
    b.insert(b.end(), p, p + sizeof(T));
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
  }
  std::vector<uint8_t> b;
};

void put_value(Bytes& out, const Value& v, const std::string& key);

void put_payload(Bytes& out, ValueType t, const Value& v, const std::string& key) {
  if (v.type != t)
    loom::fail("gguf writer: metadata '{}': array of {} holds a {}", key, value_type_name(t), value_type_name(v.type));
  switch (t) {
    case ValueType::U8: out.put<uint8_t>(uint8_t(v.as_uint())); break;
    case ValueType::I8: out.put<int8_t>(int8_t(v.as_int())); break;
    case ValueType::U16: out.put<uint16_t>(uint16_t(v.as_uint())); break;
    case ValueType::I16: out.put<int16_t>(int16_t(v.as_int())); break;
    case ValueType::U32: out.put<uint32_t>(uint32_t(v.as_uint())); break;
    case ValueType::I32: out.put<int32_t>(int32_t(v.as_int())); break;
    case ValueType::U64: out.put<uint64_t>(v.as_uint()); break;
    case ValueType::I64: out.put<int64_t>(v.as_int()); break;
    case ValueType::F32: out.put<float>(float(v.as_double())); break;
    case ValueType::F64: out.put<double>(v.as_double()); break;
    case ValueType::BOOL: out.put<uint8_t>(v.as_bool() ? 1 : 0); break;
    case ValueType::STRING: out.str(v.as_string()); break;
    case ValueType::ARRAY: {
      const Array& a = v.as_array();
      out.put<uint32_t>(uint32_t(a.elem));
      out.put<uint64_t>(a.items.size());
      for (const Value& x : a.items) put_payload(out, a.elem, x, key);
      break;
    }
  }
}

void put_value(Bytes& out, const Value& v, const std::string& key) {
  out.put<uint32_t>(uint32_t(v.type));
  put_payload(out, v.type, v, key);
}

uint64_t pad_to(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

}  // namespace

void Writer::set(std::string key, Value v) {
  for (auto& [k, old] : kv_)
    if (k == key) {
      old = std::move(v);
      return;
    }
  kv_.emplace_back(std::move(key), std::move(v));
}

uint64_t Writer::alignment() const {
  for (const auto& [k, v] : kv_)
    if (k == "general.alignment") {
      if (v.type != ValueType::U32) loom::fail("gguf writer: metadata 'general.alignment' must be u32");
      return v.as_uint();
    }
  return alignment_;
}

void Writer::add(std::string name, std::vector<uint64_t> dims, TensorType type,
                 std::optional<std::vector<uint8_t>> data) {
  if (dims.empty() || dims.size() > 4)
    loom::fail("gguf writer: tensor '{}': {} dims (must be 1 to 4)", name, dims.size());
  for (const auto& t : tensors_)
    if (t.decl.name == name) loom::fail("gguf writer: tensor '{}' added twice", name);
  uint64_t rows = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0) loom::fail("gguf writer: tensor '{}': dims[{}] is zero", name, i);
    if (i > 0) rows *= dims[i];
  }
  auto rb = row_bytes(type, dims[0]);
  if (!rb)
    loom::fail("gguf writer: tensor '{}': dims[0] = {} is not a multiple of the {} block size", name, dims[0],
               type_name(type));
  uint64_t nbytes = *rb * rows;
  if (data && data->size() != nbytes)
    loom::fail("gguf writer: tensor '{}': data is {} bytes, shape and type need {}", name, data->size(), nbytes);
  tensors_.push_back({TensorDecl{std::move(name), std::move(dims), type, nbytes}, std::move(data)});
}

void Writer::add_tensor(std::string name, std::vector<uint64_t> dims, TensorType type, std::vector<uint8_t> data) {
  add(std::move(name), std::move(dims), type, std::move(data));
}

void Writer::declare_tensor(std::string name, std::vector<uint64_t> dims, TensorType type) {
  add(std::move(name), std::move(dims), type, std::nullopt);
}

void Writer::emit(const Sink& sink, const TensorSource* source) const {
  const uint64_t align = alignment();
  if (align == 0 || (align & (align - 1)) != 0)
    loom::fail("gguf writer: alignment {} is not a power of two", align);
  bool has_key = false;
  for (const auto& kv : kv_) has_key |= kv.first == "general.alignment";

  Bytes h;
  h.b.insert(h.b.end(), {'G', 'G', 'U', 'F'});
  h.put<uint32_t>(kVersion);
  h.put<uint64_t>(tensors_.size());
  h.put<uint64_t>(kv_.size() + (has_key || align == 32 ? 0 : 1));
  if (!has_key && align != 32) {
    h.str("general.alignment");
    put_value(h, Value::u32(uint32_t(align)), "general.alignment");
  }
  for (const auto& [k, v] : kv_) {
    h.str(k);
    put_value(h, v, k);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    h.str(t.decl.name);
    h.put<uint32_t>(uint32_t(t.decl.dims.size()));
    for (auto d : t.decl.dims) h.put<uint64_t>(d);
    h.put<uint32_t>(uint32_t(t.decl.type));
    h.put<uint64_t>(offset);
    offset = pad_to(offset + t.decl.nbytes, align);
  }
  h.b.resize(pad_to(h.b.size(), align), 0);
  sink(h.b.data(), h.b.size());

  static const std::vector<uint8_t> zeros(4096, 0);
  std::vector<uint8_t> buf;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    if (t.data) {
      sink(t.data->data(), t.data->size());
    } else {
      if (!source) loom::fail("gguf writer: tensor '{}' was declared without data and no source was given", t.decl.name);
      buf.assign(t.decl.nbytes, 0);
      (*source)(i, t.decl, std::span<uint8_t>(buf));
      sink(buf.data(), buf.size());
    }
    uint64_t pad = pad_to(t.decl.nbytes, align) - t.decl.nbytes;
    while (pad > 0) {
      uint64_t n = std::min<uint64_t>(pad, zeros.size());
      sink(zeros.data(), n);
      pad -= n;
    }
  }
}

std::vector<uint8_t> Writer::to_bytes() const {
  std::vector<uint8_t> out;
  emit([&](const uint8_t* p, size_t n) { out.insert(out.end(), p, p + n); }, nullptr);
  return out;
}

namespace {
void write_file(const std::string& path, const std::function<void(const std::function<void(const uint8_t*, size_t)>&)>& body) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "wb"), std::fclose);
  if (!f) loom::fail("gguf writer: {}: cannot create: {}", path, std::strerror(errno));
  body([&](const uint8_t* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f.get()) != n) loom::fail("gguf writer: {}: write failed: {}", path, std::strerror(errno));
  });
  std::FILE* raw = f.release();
  if (std::fclose(raw) != 0) loom::fail("gguf writer: {}: close failed: {}", path, std::strerror(errno));
}
}  // namespace

void Writer::write(const std::string& path) const {
  write_file(path, [&](const Sink& sink) { emit(sink, nullptr); });
}

void Writer::write(const std::string& path, const TensorSource& source) const {
  write_file(path, [&](const Sink& sink) { emit(sink, &source); });
}

}  // namespace gguf
