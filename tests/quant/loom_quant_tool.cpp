// loom-quant-tool: raw-file front end to quant.h for the Python oracle tests
// (tests/python/test_quant.py). Files are headerless little-endian arrays.
//
//   loom-quant-tool dequant TYPE IN.bin OUT.f32     blocks of TYPE -> float32
//   loom-quant-tool quant   TYPE IN.f32 OUT.bin     float32 -> blocks of TYPE
//   loom-quant-tool dot     TYPE W.bin A.bin N      W and A hold R rows of N elements each (A
//                                                   already in vec_dot_type(TYPE)); prints
//                                                   vec_dot of each row pair as hex float bits
//   loom-quant-tool actquant TYPE IN.f32 OUT.bin    float32 -> activation TYPE as llama.cpp's
//                                                   x86 run-time quantizer (quant::ggml)
//   loom-quant-tool gdot    TYPE W.bin A.bin N ROWS as dot, in llama.cpp's x86 order for a
//                                                   matmul of ROWS activation rows (quant::ggml)
// TYPE is a ggml type name (q4_K, f16, ...). Errors go to stderr with exit status 1.
#include <bit>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/error.h"
#include "quant/ggml_order.h"
#include "quant/quant.h"

namespace {

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) loom::fail("cannot open {}", path);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_all(const std::string& path, const void* p, size_t n) {
  std::ofstream f(path, std::ios::binary);
  f.write(static_cast<const char*>(p), std::streamsize(n));
  if (!f) loom::fail("cannot write {}", path);
}

gguf::TensorType parse_type(const std::string& s) {
  auto t = gguf::type_from_name(s);
  if (!t) loom::fail("unknown tensor type '{}'", s);
  return *t;
}

int run(int argc, char** argv) {
  if (argc < 5) loom::fail("usage: loom-quant-tool dequant|quant|actquant|dot|gdot TYPE IN OUT|A [N [ROWS]]");
  const std::string verb = argv[1];
  const gguf::TensorType t = parse_type(argv[2]);
  if (verb == "dequant") {
    const auto in = read_all(argv[3]);
    const int64_t bb = loom::quant::block_bytes(t), be = loom::quant::block_elems(t);
    if (in.size() % bb) loom::fail("{}: {} bytes is not a whole number of blocks", argv[3], in.size());
    const int64_t n = int64_t(in.size()) / bb * be;
    std::vector<float> out(static_cast<size_t>(n));
    loom::quant::dequantize_row(t, in.data(), out.data(), n);
    write_all(argv[4], out.data(), out.size() * sizeof(float));
  } else if (verb == "quant" || verb == "actquant") {
    const auto in = read_all(argv[3]);
    const int64_t n = int64_t(in.size() / sizeof(float));
    std::vector<float> x(static_cast<size_t>(n));
    std::memcpy(x.data(), in.data(), x.size() * sizeof(float));
    std::vector<uint8_t> out(loom::quant::row_size(t, n));
    if (verb == "quant") loom::quant::quantize_row(t, x.data(), out.data(), n);
    else loom::quant::ggml::quantize_activations(t, x.data(), out.data(), n);
    write_all(argv[4], out.data(), out.size());
  } else if (verb == "dot" || verb == "gdot") {
    if (argc < (verb == "dot" ? 6 : 7)) loom::fail("{} needs W A N{}", verb, verb == "dot" ? "" : " ROWS");
    const int64_t batch = verb == "gdot" ? std::stoll(argv[6]) : 0;
    const auto w = read_all(argv[3]);
    const auto a = read_all(argv[4]);
    const int64_t n = std::stoll(argv[5]);
    const size_t wrow = loom::quant::row_size(t, n);
    const size_t arow = loom::quant::row_size(loom::quant::vec_dot_type(t), n);
    const size_t rows = w.size() / wrow;
    if (w.size() != rows * wrow || a.size() != rows * arow)
      loom::fail("dot: {} and {} bytes are not {} row pairs of {} elements", w.size(), a.size(),
                 rows, n);
    for (size_t r = 0; r < rows; ++r) {
      const float v = verb == "dot" ? loom::quant::vec_dot(t, w.data() + r * wrow, a.data() + r * arow, n)
                                    : loom::quant::ggml::dot(t, w.data() + r * wrow, a.data() + r * arow, n, batch);
      std::printf("%08x\n", std::bit_cast<uint32_t>(v));
    }
  } else {
    loom::fail("unknown verb '{}'", verb);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loom-quant-tool: error: %s\n", e.what());
    return 1;
  }
}
