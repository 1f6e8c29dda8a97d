#include "text/jinja/json.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "text/jinja/unicode.h"

namespace loom::text::jinja {
namespace {

void encode_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (uint32_t cp : utf8_decode(s)) {
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (cp < 0x20 || (ensure_ascii && cp > 0x7f)) {
          if (cp >= 0x10000) {
            uint32_t v = cp - 0x10000;
            out += fmt::format("\\u{:04x}\\u{:04x}", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
          } else {
            out += fmt::format("\\u{:04x}", cp);
          }
        } else {
          utf8_append(out, cp);
        }
    }
  }
  out += '"';
}

std::string float_json(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return format_float(d);
}

// json.dumps converts non-string keys: True -> "true", None -> "null", numbers -> their repr.
std::string key_string(const Value& k, Pos pos) {
  switch (k.type) {
    case Type::String: return k.s;
    case Type::Bool: return k.b ? "true" : "false";
    case Type::None: return "null";
    case Type::Int: return std::to_string(k.i);
    case Type::Float: return float_json(k.f);
    default: throw_at(pos, "keys must be str, int, float, bool or None, not " + k.type_name());
  }
}

struct Encoder {
  const JsonStyle& st;
  Pos pos;
  std::string item_sep, key_sep;
  std::string out;

  void newline(int level) {
    out += '\n';
    for (int k = 0; k < level; ++k) out += *st.indent;
  }

  void encode(const Value& v, int level) {
    switch (v.type) {
      case Type::None: out += "null"; return;
      case Type::Bool: out += v.b ? "true" : "false"; return;
      case Type::Int: out += std::to_string(v.i); return;
      case Type::Float: out += float_json(v.f); return;
      case Type::String: encode_string(out, v.s, st.ensure_ascii); return;
      case Type::List: {
        if (v.list->empty()) { out += "[]"; return; }
        out += '[';
        for (size_t k = 0; k < v.list->size(); ++k) {
          if (k) out += item_sep;
          if (st.indent) newline(level + 1);
          encode((*v.list)[k], level + 1);
        }
        if (st.indent) newline(level);
        out += ']';
        return;
      }
      case Type::Dict: {
        if (v.dict->size() == 0) { out += "{}"; return; }
        std::vector<std::pair<std::string, const Value*>> items;
        for (auto& [k, x] : v.dict->items) items.emplace_back(key_string(k, pos), &x);
        if (st.sort_keys)
          std::stable_sort(items.begin(), items.end(), [](auto& a, auto& b) { return a.first < b.first; });
        out += '{';
        for (size_t k = 0; k < items.size(); ++k) {
          if (k) out += item_sep;
          if (st.indent) newline(level + 1);
          encode_string(out, items[k].first, st.ensure_ascii);
          out += key_sep;
          encode(*items[k].second, level + 1);
        }
        if (st.indent) newline(level);
        out += '}';
        return;
      }
      default:
        throw_at(pos, "Object of type " + v.type_name() + " is not JSON serializable");
    }
  }
};

}  // namespace

std::string to_json(const Value& v, const JsonStyle& style, Pos pos) {
  Encoder e{style, pos, ", ", ": ", {}};
  if (style.indent) e.item_sep = ",";
  if (style.separators) { e.item_sep = style.separators->first; e.key_sep = style.separators->second; }
  e.encode(v, 0);
  return e.out;
}

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: return Value::integer(int64_t(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: return Value::number(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      for (auto& x : j) items.push_back(from_json(x));
      return Value::list_of(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (auto& [k, x] : j.items()) d.items.emplace_back(Value::string(k), from_json(x));
      return Value::dict_of(std::move(d));
    }
    default: return Value::none();
  }
}

}  // namespace loom::text::jinja
