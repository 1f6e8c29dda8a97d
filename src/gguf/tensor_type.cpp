#include "gguf/tensor_type.h"

#include <array>
#include <cctype>

namespace gguf {
namespace {

struct Entry {
  uint32_t id;
  TypeTraits traits;
};

// Block geometry from ggml's type table (ggml.c, type_traits).
constexpr std::array kTypes = {
    Entry{0, {"f32", 1, 4}},        Entry{1, {"f16", 1, 2}},
    Entry{2, {"q4_0", 32, 18}},     Entry{3, {"q4_1", 32, 20}},
    Entry{6, {"q5_0", 32, 22}},     Entry{7, {"q5_1", 32, 24}},
    Entry{8, {"q8_0", 32, 34}},     Entry{9, {"q8_1", 32, 36}},
    Entry{10, {"q2_K", 256, 84}},   Entry{11, {"q3_K", 256, 110}},
    Entry{12, {"q4_K", 256, 144}},  Entry{13, {"q5_K", 256, 176}},
    Entry{14, {"q6_K", 256, 210}},  Entry{15, {"q8_K", 256, 292}},
    Entry{16, {"iq2_xxs", 256, 66}}, Entry{17, {"iq2_xs", 256, 74}},
    Entry{18, {"iq3_xxs", 256, 98}}, Entry{19, {"iq1_s", 256, 50}},
    Entry{20, {"iq4_nl", 32, 18}},  Entry{21, {"iq3_s", 256, 110}},
    Entry{22, {"iq2_s", 256, 82}},  Entry{23, {"iq4_xs", 256, 136}},
    Entry{24, {"i8", 1, 1}},        Entry{25, {"i16", 1, 2}},
    Entry{26, {"i32", 1, 4}},       Entry{27, {"i64", 1, 8}},
    Entry{28, {"f64", 1, 8}},       Entry{29, {"iq1_m", 256, 56}},
    Entry{30, {"bf16", 1, 2}},      Entry{34, {"tq1_0", 256, 54}},
    Entry{35, {"tq2_0", 256, 66}},  Entry{39, {"mxfp4", 32, 17}},
};

bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

}  // namespace

std::optional<TypeTraits> type_traits(uint32_t id) {
  for (const auto& e : kTypes)
    if (e.id == id) return e.traits;
  return std::nullopt;
}

std::string_view type_name(TensorType t) {
  auto tr = type_traits(t);
  return tr ? tr->name : std::string_view("unknown");
}

std::optional<TensorType> type_from_name(std::string_view name) {
  for (const auto& e : kTypes)
    if (iequal(e.traits.name, name)) return TensorType(e.id);
  return std::nullopt;
}

std::optional<uint64_t> row_bytes(TensorType t, uint64_t n) {
  auto tr = type_traits(t);
  if (!tr || n % tr->block_elems != 0) return std::nullopt;
  return n / tr->block_elems * tr->block_bytes;
}

}  // namespace gguf
