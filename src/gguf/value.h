// GGUF metadata values: the 13 on-disk value types, arrays nested to any depth.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace gguf {

enum class ValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
std::string_view value_type_name(ValueType t);

struct Value;
struct Array {
  ValueType elem = ValueType::U8;
  std::vector<Value> items;
};

struct Value {
  ValueType type = ValueType::U8;
  std::variant<uint64_t, int64_t, double, bool, std::string, Array> v;

  static Value u32(uint32_t x) { return {ValueType::U32, uint64_t(x)}; }
  static Value i32(int32_t x) { return {ValueType::I32, int64_t(x)}; }
  static Value u64(uint64_t x) { return {ValueType::U64, x}; }
  static Value f32(float x) { return {ValueType::F32, double(x)}; }
  static Value boolean(bool x) { return {ValueType::BOOL, x}; }
  static Value str(std::string x) { return {ValueType::STRING, std::move(x)}; }
  static Value array(ValueType elem, std::vector<Value> items) {
    return {ValueType::ARRAY, Array{elem, std::move(items)}};
  }

  bool is_integer() const;  // any of the 8 integer types
  bool is_number() const { return is_integer() || type == ValueType::F32 || type == ValueType::F64; }
  // Checked accessors: throw loom::Error naming the expected type.
  int64_t as_int() const;
  uint64_t as_uint() const;
  double as_double() const;
  bool as_bool() const;
  const std::string& as_string() const;
  const Array& as_array() const;
  std::string to_display(size_t max_items = 8) const;  // short human form for `loom inspect`
};

}  // namespace gguf
