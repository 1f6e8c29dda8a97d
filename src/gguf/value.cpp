#include "gguf/value.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "common/error.h"

namespace gguf {

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::U8: return "u8";
    case ValueType::I8: return "i8";
    case ValueType::U16: return "u16";
    case ValueType::I16: return "i16";
    case ValueType::U32: return "u32";
    case ValueType::I32: return "i32";
    case ValueType::F32: return "f32";
    case ValueType::BOOL: return "bool";
    case ValueType::STRING: return "string";
    case ValueType::ARRAY: return "array";
    case ValueType::U64: return "u64";
    case ValueType::I64: return "i64";
    case ValueType::F64: return "f64";
  }
  return "unknown";
}

bool Value::is_integer() const {
  switch (type) {
    case ValueType::U8: case ValueType::I8: case ValueType::U16: case ValueType::I16:
    case ValueType::U32: case ValueType::I32: case ValueType::U64: case ValueType::I64:
      return true;
    default:
      return false;
  }
}

int64_t Value::as_int() const {
  if (const auto* s = std::get_if<int64_t>(&v); s && is_integer()) return *s;
  if (const auto* u = std::get_if<uint64_t>(&v); u && is_integer()) {
    if (*u > uint64_t(std::numeric_limits<int64_t>::max()))
      loom::fail("gguf value: {} {} does not fit in a signed 64-bit integer", value_type_name(type), *u);
    return int64_t(*u);
  }
  loom::fail("gguf value: expected an integer, got {}", value_type_name(type));
}

uint64_t Value::as_uint() const {
  if (const auto* u = std::get_if<uint64_t>(&v); u && is_integer()) return *u;
  if (const auto* s = std::get_if<int64_t>(&v); s && is_integer()) {
    if (*s < 0) loom::fail("gguf value: expected a non-negative integer, got {}", *s);
    return uint64_t(*s);
  }
  loom::fail("gguf value: expected an unsigned integer, got {}", value_type_name(type));
}

double Value::as_double() const {
  if (const auto* d = std::get_if<double>(&v); d && (type == ValueType::F32 || type == ValueType::F64))
    return *d;
  if (is_integer()) {
    if (const auto* u = std::get_if<uint64_t>(&v)) return double(*u);
    return double(std::get<int64_t>(v));
  }
  loom::fail("gguf value: expected a number, got {}", value_type_name(type));
}

bool Value::as_bool() const {
  if (const auto* b = std::get_if<bool>(&v); b && type == ValueType::BOOL) return *b;
  loom::fail("gguf value: expected bool, got {}", value_type_name(type));
}

const std::string& Value::as_string() const {
  if (const auto* s = std::get_if<std::string>(&v); s && type == ValueType::STRING) return *s;
  loom::fail("gguf value: expected string, got {}", value_type_name(type));
}

const Array& Value::as_array() const {
  if (const auto* a = std::get_if<Array>(&v); a && type == ValueType::ARRAY) return *a;
  loom::fail("gguf value: expected array, got {}", value_type_name(type));
}

namespace {

// Quoted, with control characters escaped so a hostile string cannot move the terminal.
std::string quote(const std::string& s, size_t max_chars) {
  std::string out = "\"";
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++i, ++n) {
    if (n == max_chars) {
      out += "…";
      break;
    }
    unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
        else out += char(c);
    }
  }
  return out + "\"";
}

std::string scalar_display(const Value& x, size_t max_chars) {
  switch (x.type) {
    case ValueType::STRING: return quote(std::get<std::string>(x.v), max_chars);
    case ValueType::BOOL: return std::get<bool>(x.v) ? "true" : "false";
    case ValueType::F32: case ValueType::F64: {
      double d = std::get<double>(x.v);
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 1e15) return fmt::format("{:.1f}", d);
      return fmt::format("{:g}", d);
    }
    default:
      if (const auto* u = std::get_if<uint64_t>(&x.v)) return fmt::format("{}", *u);
      if (const auto* s = std::get_if<int64_t>(&x.v)) return fmt::format("{}", *s);
      return "?";
  }
}

std::string display(const Value& x, size_t max_items, size_t max_chars) {
  if (x.type != ValueType::ARRAY) return scalar_display(x, max_chars);
  const Array& a = std::get<Array>(x.v);
  std::string out = fmt::format("[{} × {}]", value_type_name(a.elem), a.items.size());
  size_t shown = std::min(max_items, a.items.size());
  for (size_t i = 0; i < shown; ++i) {
    out += i == 0 ? " " : ", ";
    out += display(a.items[i], max_items, 48);
  }
  if (shown < a.items.size()) out += shown ? ", …" : " …";
  return out;
}

}  // namespace

std::string Value::to_display(size_t max_items) const {
  // Long strings are cut at 120 characters; `max_items == SIZE_MAX` means "show everything".
  size_t max_chars = max_items == std::numeric_limits<size_t>::max() ? max_items : 120;
  return display(*this, max_items, max_chars);
}

}  // namespace gguf
