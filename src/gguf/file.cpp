// GGUF reader. The layout (v2/v3, little-endian):
//   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
//   n_kv × (string key | u32 value type | value)
//   n_tensors × (string name | u32 n_dims | n_dims × u64 dim | u32 type | u64 offset)
//   padding to `general.alignment` | tensor data
// Every read is bounds-checked before it happens; every count is checked against the bytes
// left before anything is allocated for it, so memory use stays proportional to the file size.
#include "gguf/file.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <numeric>
#include <utility>

#include "common/error.h"

namespace gguf {
namespace {

constexpr uint32_t kMaxDims = 4;        // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 16;      // nested arrays: far beyond any real file, bounds recursion
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;           // empty key, type, one-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // empty name, 1 dim, type, offset

// Smallest encoding of one array element of type t; used to reject counts that cannot fit.
uint64_t min_value_bytes(ValueType t) {
  switch (t) {
    case ValueType::U8: case ValueType::I8: case ValueType::BOOL: return 1;
    case ValueType::U16: case ValueType::I16: return 2;
    case ValueType::U32: case ValueType::I32: case ValueType::F32: return 4;
    case ValueType::U64: case ValueType::I64: case ValueType::F64: return 8;
    case ValueType::STRING: return 8;
    case ValueType::ARRAY: return 4 + 8;
  }
  return 1;
}

bool valid_value_type(uint32_t id) { return id <= uint32_t(ValueType::F64); }

// A cursor over the image that throws with the offset and the field being read.
class Reader {
 public:
  Reader(std::span<const uint8_t> b, const std::string& label) : b_(b), label_(label) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return b_.size() - pos_; }

  [[noreturn]] void fail_at(uint64_t at, const std::string& field, const std::string& msg) const {
    loom::fail("gguf: {}: at offset {}: {}: {}", label_, at, field, msg);
  }

  void need(uint64_t n, const std::string& field) const {
    if (n > left())
      fail_at(pos_, field, fmt::format("needs {} bytes but the file ends after {} (size {})", n, left(),
                                       b_.size()));
  }

  template <typename T>
  T scalar(const std::string& field) {
    need(sizeof(T), field);
    T x;
    std::memcpy(&x, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return x;
  }
  uint32_t u32(const std::string& field) { return scalar<uint32_t>(field); }
  uint64_t u64(const std::string& field) { return scalar<uint64_t>(field); }

  std::string string(const std::string& field) {
    uint64_t at = pos_;
    uint64_t n = u64(field + " (string length)");
    if (n > left())
      fail_at(at, field, fmt::format("string length {} exceeds the {} bytes left in the file", n, left()));
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return s;
  }

  // Checks that `count` elements of at least `min_bytes` each can still fit in the file.
  void check_count(uint64_t at, uint64_t count, uint64_t min_bytes, const std::string& field) const {
    if (count > left() / min_bytes)
      fail_at(at, field, fmt::format("count {} cannot fit in the {} bytes left in the file", count, left()));
  }

  Value value(ValueType t, const std::string& field, int depth) {
    switch (t) {
      case ValueType::U8: return {t, uint64_t(scalar<uint8_t>(field))};
      case ValueType::I8: return {t, int64_t(scalar<int8_t>(field))};
      case ValueType::U16: return {t, uint64_t(scalar<uint16_t>(field))};
      case ValueType::I16: return {t, int64_t(scalar<int16_t>(field))};
      case ValueType::U32: return {t, uint64_t(scalar<uint32_t>(field))};
      case ValueType::I32: return {t, int64_t(scalar<int32_t>(field))};
      case ValueType::U64: return {t, scalar<uint64_t>(field)};
      case ValueType::I64: return {t, scalar<int64_t>(field)};
      case ValueType::F32: return {t, double(scalar<float>(field))};
      case ValueType::F64: return {t, scalar<double>(field)};
      case ValueType::BOOL: return {t, scalar<uint8_t>(field) != 0};
      case ValueType::STRING: return {t, string(field)};
      case ValueType::ARRAY: return array(field, depth);
    }
    fail_at(pos_, field, "unreachable value type");
  }

  Value array(const std::string& field, int depth) {
    uint64_t at = pos_;
    if (depth >= kMaxArrayDepth)
      fail_at(at, field, fmt::format("arrays nested deeper than {} levels", kMaxArrayDepth));
    uint32_t elem = u32(field + " (array element type)");
    if (!valid_value_type(elem)) fail_at(at, field, fmt::format("unknown array element type id {}", elem));
    uint64_t count_at = pos_;
    uint64_t count = u64(field + " (array length)");
    ValueType et = ValueType(elem);
    check_count(count_at, count, min_value_bytes(et), field + " (array length)");
    Array a{et, {}};
    a.items.reserve(count);
    for (uint64_t i = 0; i < count; ++i) a.items.push_back(value(et, field, depth + 1));
    return {ValueType::ARRAY, std::move(a)};
  }

 private:
  std::span<const uint8_t> b_;
  const std::string& label_;
  uint64_t pos_ = 0;
};

uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

std::string shape_str(const std::vector<uint64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

}  // namespace

uint64_t TensorInfo::elements() const {
  uint64_t n = 1;
  for (auto d : dims) n *= d;
  return n;
}

File File::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) loom::fail("gguf: {}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    loom::fail("gguf: {}: cannot stat: {}", path, std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    loom::fail("gguf: {}: not a regular file", path);
  }
  if (st.st_size == 0) {
    ::close(fd);
    loom::fail("gguf: {}: at offset 0: magic: the file is empty", path);
  }
  timespec now {};
  clock_gettime(CLOCK_REALTIME, &now);
  FileIdentity id;
  {
    std::error_code ec;
    id.canonical_path = std::filesystem::weakly_canonical(std::filesystem::absolute(path), ec).string();
    if (ec) id.canonical_path = path;
  }
  id.device = uint64_t(st.st_dev);
  id.inode = uint64_t(st.st_ino);
  id.size = uint64_t(st.st_size);
  id.mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  id.ctime_ns = int64_t(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  void* m = mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  int e = errno;
  ::close(fd);
  if (m == MAP_FAILED) loom::fail("gguf: {}: cannot map: {}", path, std::strerror(e));
  File f;
  f.path_ = path;
  f.map_ = m;
  f.map_len_ = size_t(st.st_size);
  f.bytes_ = {static_cast<const uint8_t*>(m), size_t(st.st_size)};
  f.identity_ = std::move(id);
  f.opened_ns_ = int64_t(now.tv_sec) * 1000000000 + now.tv_nsec;
  f.parse();  // on throw, ~File unmaps
  return f;
}

File File::from_bytes(std::span<const uint8_t> bytes, std::string label) {
  File f;
  f.path_ = std::move(label);
  f.bytes_ = bytes;
  f.parse();
  return f;
}

File::File(File&& o) noexcept { *this = std::move(o); }

File& File::operator=(File&& o) noexcept {
  if (this == &o) return *this;
  if (map_) munmap(map_, map_len_);
  path_ = std::move(o.path_);
  map_ = std::exchange(o.map_, nullptr);
  map_len_ = std::exchange(o.map_len_, 0);
  bytes_ = std::exchange(o.bytes_, {});
  version_ = o.version_;
  alignment_ = o.alignment_;
  data_offset_ = o.data_offset_;
  kv_ = std::move(o.kv_);
  kv_index_ = std::move(o.kv_index_);
  tensors_ = std::move(o.tensors_);
  tensor_index_ = std::move(o.tensor_index_);
  sha256_ = std::move(o.sha256_);
  identity_ = std::move(o.identity_);
  opened_ns_ = o.opened_ns_;
  return *this;
}

File::~File() {
  if (map_) munmap(map_, map_len_);
}

void File::parse() {
  Reader r(bytes_, path_);
  const uint64_t size = bytes_.size();

  // Header.
  r.need(4, "magic");
  const uint8_t* m = bytes_.data();
  if (std::memcmp(m, "FUGG", 4) == 0)
    r.fail_at(0, "magic", "byte-swapped magic \"FUGG\": big-endian GGUF files are not supported");
  if (std::memcmp(m, "GGUF", 4) != 0)
    r.fail_at(0, "magic", fmt::format("not a GGUF file (magic bytes {:02x} {:02x} {:02x} {:02x})", m[0],
                                      m[1], m[2], m[3]));
  r.u32("magic");
  version_ = r.u32("version");
  if (version_ != 0 && (version_ & 0xffffu) == 0)
    r.fail_at(4, "version",
              fmt::format("byte-swapped version {:#010x}: big-endian GGUF files are not supported", version_));
  if (version_ == 1) r.fail_at(4, "version", "unsupported GGUF version 1 (only v2 and v3 are read)");
  if (version_ != 2 && version_ != 3)
    r.fail_at(4, "version", fmt::format("unsupported GGUF version {} (only v2 and v3 are read)", version_));
  uint64_t n_tensors = r.u64("tensor count");
  uint64_t n_kv_at = r.pos();
  uint64_t n_kv = r.u64("metadata count");
  r.check_count(n_kv_at, n_kv, kMinKvBytes, "metadata count");

  // Metadata.
  kv_.reserve(n_kv);
  uint64_t alignment_at = 0;
  for (uint64_t i = 0; i < n_kv; ++i) {
    uint64_t at = r.pos();
    std::string key = r.string(fmt::format("metadata key #{}", i));
    if (kv_index_.count(key)) r.fail_at(at, fmt::format("metadata key '{}'", key), "duplicate key");
    std::string field = fmt::format("metadata '{}'", key);
    uint64_t type_at = r.pos();
    uint32_t type = r.u32(field + " (value type)");
    if (!valid_value_type(type)) r.fail_at(type_at, field, fmt::format("unknown value type id {}", type));
    Value v = r.value(ValueType(type), field, 0);
    if (key == "general.alignment") alignment_at = type_at;
    kv_index_.emplace(key, kv_.size());
    kv_.emplace_back(std::move(key), std::move(v));
  }

  if (const Value* a = find("general.alignment")) {
    if (a->type != ValueType::U32)
      r.fail_at(alignment_at, "metadata 'general.alignment'",
                fmt::format("must be u32, is {}", value_type_name(a->type)));
    uint64_t al = a->as_uint();
    if (al == 0 || (al & (al - 1)) != 0)
      r.fail_at(alignment_at, "metadata 'general.alignment'", fmt::format("{} is not a power of two", al));
    alignment_ = al;
  }

  // Tensor infos.
  uint64_t n_tensors_at = 16;
  r.check_count(n_tensors_at, n_tensors, kMinTensorInfoBytes, "tensor count");
  tensors_.reserve(n_tensors);
  std::vector<uint64_t> info_at;
  info_at.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    uint64_t at = r.pos();
    TensorInfo t;
    t.name = r.string(fmt::format("tensor #{} name", i));
    std::string field = fmt::format("tensor '{}'", t.name);
    if (tensor_index_.count(t.name)) r.fail_at(at, field, "duplicate tensor name");
    uint64_t nd_at = r.pos();
    uint32_t n_dims = r.u32(field + " n_dims");
    if (n_dims == 0 || n_dims > kMaxDims)
      r.fail_at(nd_at, field, fmt::format("n_dims {} is outside [1, {}]", n_dims, kMaxDims));
    uint64_t elems = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim_at = r.pos();
      uint64_t dim = r.u64(fmt::format("{} dims[{}]", field, d));
      if (dim == 0) r.fail_at(dim_at, field, fmt::format("dims[{}] is zero", d));
      if (dim > uint64_t(INT64_MAX) / elems)
        r.fail_at(dim_at, field, fmt::format("element count overflows at dims[{}] = {}", d, dim));
      elems *= dim;
      t.dims.push_back(dim);
    }
    uint64_t type_at = r.pos();
    uint32_t type = r.u32(field + " type");
    auto traits = type_traits(type);
    if (!traits) r.fail_at(type_at, field, fmt::format("unknown tensor type id {}", type));
    t.type = TensorType(type);
    if (t.dims[0] / traits->block_elems > uint64_t(INT64_MAX) / traits->block_bytes)
      r.fail_at(type_at, field, fmt::format("byte size overflows for shape {}", shape_str(t.dims)));
    auto rb = row_bytes(t.type, t.dims[0]);
    if (!rb)
      r.fail_at(type_at, field,
                fmt::format("row size dims[0] = {} is not a multiple of the {} block size {}", t.dims[0],
                            traits->name, traits->block_elems));
    uint64_t rows = elems / t.dims[0];
    if (*rb != 0 && rows > uint64_t(INT64_MAX) / *rb)
      r.fail_at(type_at, field, fmt::format("byte size overflows for shape {}", shape_str(t.dims)));
    t.nbytes = *rb * rows;
    uint64_t off_at = r.pos();
    t.offset = r.u64(field + " offset");
    if (t.offset % alignment_ != 0)
      r.fail_at(off_at, field,
                fmt::format("data offset {} is not a multiple of the alignment {}", t.offset, alignment_));
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
    info_at.push_back(off_at);
  }

  // Data section: starts at the next alignment boundary after the tensor infos.
  uint64_t end_of_infos = r.pos();
  data_offset_ = (end_of_infos + alignment_ - 1) / alignment_ * alignment_;
  if (!tensors_.empty() && data_offset_ > size)
    r.fail_at(end_of_infos, "data section",
              fmt::format("aligned start {} is past end of file (size {})", data_offset_, size));
  for (size_t i = 0; i < tensors_.size(); ++i) {
    TensorInfo& t = tensors_[i];
    uint64_t room = size - data_offset_;
    if (t.offset > room || t.nbytes > room - t.offset)
      r.fail_at(info_at[i], fmt::format("tensor '{}'", t.name),
                fmt::format("data [{}, {}) runs past end of file (size {})", sat_add(data_offset_, t.offset),
                            sat_add(sat_add(data_offset_, t.offset), t.nbytes), size));
    t.data = bytes_.data() + data_offset_ + t.offset;
  }

  // No two tensors may share bytes.
  std::vector<size_t> order(tensors_.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const TensorInfo& prev = tensors_[order[k - 1]];
    const TensorInfo& cur = tensors_[order[k]];
    if (prev.offset + prev.nbytes > cur.offset)
      r.fail_at(info_at[order[k]], fmt::format("tensor '{}'", cur.name),
                fmt::format("data [{}, {}) overlaps tensor '{}' at [{}, {})", data_offset_ + cur.offset,
                            data_offset_ + cur.offset + cur.nbytes, prev.name, data_offset_ + prev.offset,
                            data_offset_ + prev.offset + prev.nbytes));
  }
}

const Value* File::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const Value& File::at(std::string_view key) const {
  if (const Value* v = find(key)) return *v;
  loom::fail("gguf: {}: missing metadata key '{}'", path_, key);
}

namespace {
template <typename F>
auto typed(const std::string& path, std::string_view key, F&& f) {
  try {
    return f();
  } catch (const loom::Error& e) {
    loom::fail("gguf: {}: metadata '{}': {}", path, key, e.what());
  }
}
}  // namespace

std::string File::get_string(std::string_view key, std::string def) const {
  const Value* v = find(key);
  return v ? typed(path_, key, [&] { return v->as_string(); }) : def;
}

int64_t File::get_int(std::string_view key, int64_t def) const {
  const Value* v = find(key);
  return v ? typed(path_, key, [&] { return v->as_int(); }) : def;
}

double File::get_float(std::string_view key, double def) const {
  const Value* v = find(key);
  return v ? typed(path_, key, [&] { return v->as_double(); }) : def;
}

bool File::get_bool(std::string_view key, bool def) const {
  const Value* v = find(key);
  return v ? typed(path_, key, [&] { return v->as_bool(); }) : def;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& File::tensor(std::string_view name) const {
  if (const TensorInfo* t = find_tensor(name)) return *t;
  loom::fail("gguf: {}: no tensor named '{}'", path_, name);
}

const std::string& File::sha256() const {
  if (!sha256_.empty()) return sha256_;
  if (identity_)
    if (auto cached = HashCache::standard().find(*identity_)) return sha256_ = std::move(*cached);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(bytes_.data(), bytes_.size(), md, &len, EVP_sha256(), nullptr) != 1)
    loom::fail("gguf: {}: sha256 failed", path_);
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned i = 0; i < len; ++i) {
    s += hex[md[i] >> 4];
    s += hex[md[i] & 15];
  }
  sha256_ = std::move(s);
  if (identity_ && HashCache::settled(*identity_, opened_ns_)) HashCache::standard().store(*identity_, sha256_);
  return sha256_;
}

}  // namespace gguf
