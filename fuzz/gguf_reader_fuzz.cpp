// libFuzzer target for the GGUF reader: any byte string must either parse or throw loom::Error,
// and everything a parsed File exposes must be safe to touch.
#include <cstddef>
#include <cstdint>
#include <span>

#include "common/error.h"
#include "gguf/file.h"

namespace {

uint64_t g_sink;  // external linkage: the compiler cannot drop the reads that feed it

void touch(const gguf::Value& v) {
  (void)v.to_display(4);
  try { g_sink += uint64_t(v.as_int()); } catch (const loom::Error&) {}
  try { g_sink += v.as_uint(); } catch (const loom::Error&) {}
  try { g_sink += uint64_t(v.as_double() != 0); } catch (const loom::Error&) {}
  try { g_sink += v.as_bool(); } catch (const loom::Error&) {}
  try { g_sink += v.as_string().size(); } catch (const loom::Error&) {}
  try {
    for (const auto& x : v.as_array().items) touch(x);
  } catch (const loom::Error&) {}
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    gguf::File f = gguf::File::from_bytes(std::span<const uint8_t>(data, size), "fuzz");
    g_sink += f.version() + f.alignment() + f.data_offset();
    for (const auto& [k, v] : f.metadata()) {
      g_sink += k.size();
      touch(v);
      if (f.find(k) != &v) __builtin_trap();
    }
    try { g_sink += f.architecture().size(); } catch (const loom::Error&) {}
    try { g_sink += uint64_t(f.get_int("general.alignment", 0)); } catch (const loom::Error&) {}
    for (const auto& t : f.tensors()) {
      g_sink += t.elements() + t.rows() + t.row_elems();
      if (t.nbytes) g_sink += t.data[0] + t.data[t.nbytes - 1];
      if (t.data < f.bytes().data() || t.data + t.nbytes > f.bytes().data() + f.size()) __builtin_trap();
      if (&f.tensor(t.name) != &t) __builtin_trap();
    }
    if (size < 4096) g_sink += f.sha256().size();
  } catch (const loom::Error&) {
  }
  return 0;
}
