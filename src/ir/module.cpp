#include "ir/module.h"

#include <array>
#include <utility>

#include "common/error.h"

namespace ir {
namespace {

constexpr std::array<std::pair<Elem, const char*>, 15> kElemNames = {{
    {Elem::f32, "f32"},   {Elem::f16, "f16"},   {Elem::bf16, "bf16"}, {Elem::i32, "i32"},
    {Elem::q4_0, "q4_0"}, {Elem::q4_1, "q4_1"}, {Elem::q5_0, "q5_0"}, {Elem::q5_1, "q5_1"},
    {Elem::q8_0, "q8_0"}, {Elem::q2_k, "q2_k"}, {Elem::q3_k, "q3_k"}, {Elem::q4_k, "q4_k"},
    {Elem::q5_k, "q5_k"}, {Elem::q6_k, "q6_k"}, {Elem::q8_k, "q8_k"},
}};

template <typename T>
const T* find_named(const std::vector<T>& xs, std::string_view name) {
  for (const auto& x : xs)
    if (x.name == name) return &x;
  return nullptr;
}

const Attr& require(const Attrs& attrs, std::string_view name) {
  const Attr* a = find_attr(attrs, name);
  if (!a) loom::fail("missing attribute '{}'", name);
  return *a;
}

}  // namespace

const char* elem_name(Elem e) {
  for (auto& [k, n] : kElemNames)
    if (k == e) return n;
  return "?";
}

std::optional<Elem> elem_from_name(std::string_view name) {
  for (auto& [k, n] : kElemNames)
    if (name == n) return k;
  return std::nullopt;
}

const Attr* find_attr(const Attrs& attrs, std::string_view name) {
  for (const auto& a : attrs)
    if (a.name == name) return &a;
  return nullptr;
}

int64_t attr_int(const Attrs& attrs, std::string_view name) {
  const Attr& a = require(attrs, name);
  if (auto* v = std::get_if<int64_t>(&a.value)) return *v;
  loom::fail("attribute '{}' must be an integer", name);
}

int64_t attr_int(const Attrs& attrs, std::string_view name, int64_t def) {
  return find_attr(attrs, name) ? attr_int(attrs, name) : def;
}

double attr_float(const Attrs& attrs, std::string_view name) {
  const Attr& a = require(attrs, name);
  if (auto* v = std::get_if<double>(&a.value)) return *v;
  if (auto* v = std::get_if<int64_t>(&a.value)) return double(*v);
  loom::fail("attribute '{}' must be a number", name);
}

double attr_float(const Attrs& attrs, std::string_view name, double def) {
  return find_attr(attrs, name) ? attr_float(attrs, name) : def;
}

std::string attr_string(const Attrs& attrs, std::string_view name, std::string def) {
  const Attr* a = find_attr(attrs, name);
  if (!a) return def;
  if (auto* v = std::get_if<std::string>(&a->value)) return *v;
  loom::fail("attribute '{}' must be a string", name);
}

bool attr_bool(const Attrs& attrs, std::string_view name, bool def) {
  const Attr* a = find_attr(attrs, name);
  if (!a) return def;
  if (auto* v = std::get_if<bool>(&a->value)) return *v;
  loom::fail("attribute '{}' must be true or false", name);
}

const Weight* Module::find_weight(std::string_view n) const { return find_named(weights, n); }
const Func* Module::find_func(std::string_view n) const { return find_named(funcs, n); }
const SymDim* Module::find_dim(std::string_view n) const { return find_named(dims, n); }

}  // namespace ir
