// JSON in and out of the value model. Out: Python's json.dumps, which HF's tojson filter
// calls (ensure_ascii=False by default, so non-ASCII stays as UTF-8; ", " and ": "
// separators; indent puts one item per line). In: nlohmann's ordered_json, keeping key order
// as json.load does.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "text/jinja/value.h"

namespace loom::text::jinja {

struct JsonStyle {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // nullopt: one line
  std::optional<std::pair<std::string, std::string>> separators;  // item, key
  bool sort_keys = false;
};

std::string to_json(const Value& v, const JsonStyle& style, Pos pos);
Value from_json(const nlohmann::ordered_json& j);

}  // namespace loom::text::jinja
