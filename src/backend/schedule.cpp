#include "backend/schedule.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/error.h"
#include "ir/ops.h"
#include "ir/verify.h"

namespace loom::backend {

namespace {

std::string value_text(const ir::AttrValue& v) {
  if (auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (auto* s = std::get_if<std::string>(&v)) return "\"" + *s + "\"";
  if (auto* d = std::get_if<double>(&v)) return fmt::format("{}", *d);
  return "[...]";
}

std::string type_text(const ScheduleKey& k) {
  switch (k.type) {
    case ScheduleKey::Type::integer: return fmt::format("an integer in [{}, {}]", k.lo, k.hi);
    case ScheduleKey::Type::boolean: return "true or false";
    case ScheduleKey::Type::text: return "a string";
    case ScheduleKey::Type::choice: {
      std::string s = "one of";
      for (size_t i = 0; i < k.choices.size(); ++i) s += (i ? ", \"" : " \"") + k.choices[i] + "\"";
      return s;
    }
  }
  return "?";
}

// Empty when `v` fits `k`, else what is wrong.
std::string misfit(const ScheduleKey& k, const ir::AttrValue& v) {
  switch (k.type) {
    case ScheduleKey::Type::integer: {
      const auto* i = std::get_if<int64_t>(&v);
      if (i && *i >= k.lo && *i <= k.hi) return {};
      break;
    }
    case ScheduleKey::Type::boolean:
      if (std::holds_alternative<bool>(v)) return {};
      break;
    case ScheduleKey::Type::text:
      if (std::holds_alternative<std::string>(v)) return {};
      break;
    case ScheduleKey::Type::choice: {
      const auto* s = std::get_if<std::string>(&v);
      if (s && std::find(k.choices.begin(), k.choices.end(), *s) != k.choices.end()) return {};
      break;
    }
  }
  return fmt::format("must be {}, found {}", type_text(k), value_text(v));
}

}  // namespace

std::string ScheduleKey::describe() const {
  // A glob selects on weight operands: only ops that take one accept `opcode(@glob)`.
  const ir::OpInfo* op = ir::find_op(opcode);
  const bool glob = op && std::any_of(op->operand_kinds.begin(), op->operand_kinds.end(),
                                      [](ir::OperandKind k) { return k != ir::OperandKind::value; });
  const std::string where = opcode.empty() ? name : fmt::format("{}{} = {{{} = ...}}", opcode, glob ? "(@glob)" : "", name);
  return fmt::format("{}: {} (default {}): {}", where, type_text(*this), value_text(default_value), effect);
}

void check_schedule(const ir::Module& m, const std::vector<ScheduleKey>& keys, const std::string& backend) {
  for (const auto& e : m.schedule)
    for (size_t i = 0; i < e.settings.size(); ++i) {
      const ir::Attr& s = e.settings[i];
      std::string at = m.source.empty() ? "" : m.source + ":";
      if (i < e.setting_pos.size()) at += fmt::format("{}:{}:", e.setting_pos[i].first, e.setting_pos[i].second);
      if (!at.empty()) at += " ";
      const std::string what = e.opcode.empty() ? s.name : e.opcode + " setting " + s.name;
      auto it = std::find_if(keys.begin(), keys.end(), [&](const ScheduleKey& k) {
        return k.opcode == e.opcode && k.name == s.name;
      });
      if (it == keys.end()) {
        std::string known;
        for (const auto& k : keys)
          if (k.opcode == e.opcode) known += (known.empty() ? "" : ", ") + k.name;
        loom::fail("{}schedule: backend {} has no key '{}' (its {} keys: {}; `loom check --backend {} --keys` lists "
                   "them all)",
                   at, backend, what, e.opcode.empty() ? "global" : e.opcode, known.empty() ? "none" : known, backend);
      }
      if (std::string why = misfit(*it, s.value); !why.empty())
        loom::fail("{}schedule: {} {}", at, what, why);
    }
}

const ScheduleKey& ScheduleReader::find(const std::string& opcode, const std::string& key) const {
  for (const auto& k : keys_)
    if (k.opcode == opcode && k.name == key) return k;
  loom::fail("schedule: key '{}' is not declared by this backend", key);
}

ir::AttrValue ScheduleReader::global(const std::string& key) const {
  ir::AttrValue v = find("", key).default_value;
  for (const auto& e : m_.schedule)
    if (e.opcode.empty())
      if (const ir::Attr* a = ir::find_attr(e.settings, key)) v = a->value;
  return v;
}

ir::AttrValue ScheduleReader::for_op(const std::string& opcode, const std::string& key, const std::string& weight) const {
  ir::AttrValue v = find(opcode, key).default_value;
  for (const auto& e : m_.schedule)
    if (e.opcode == opcode && (e.selector.empty() || (!weight.empty() && ir::glob_match(e.selector, weight))))
      if (const ir::Attr* a = ir::find_attr(e.settings, key)) v = a->value;
  return v;
}

}  // namespace loom::backend
