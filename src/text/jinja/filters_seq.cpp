// Filters over sequences and mappings: items, map, select/reject(attr), join, first/last,
// sort, unique, min/max, sum, batch, slice, dictsort, list, reverse.
#include <fmt/format.h>

#include <algorithm>

#include "text/jinja/evaluator.h"
#include "text/jinja/unicode.h"

namespace loom::text::jinja {
namespace {

// jinja2 compares strings case-insensitively in sort/unique/min/max unless told otherwise.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(str_lower(v.s));
  return v;
}

Value f_items(Renderer&, const Value& v, CallArgs& a) {
  if (v.is_undefined()) return Value::list_of({});
  if (!v.is_dict()) throw_at(a.pos, "items filter: can only get item pairs from a mapping, not " + v.type_name());
  List out;
  for (auto& [k, x] : v.dict->items) out.push_back(Value::list_of({k, x}, true));
  return Value::list_of(std::move(out));
}

Value f_list(Renderer& r, const Value& v, CallArgs& a) { return Value::list_of(r.iterate(v, a.pos)); }

Value f_first(Renderer& r, const Value& v, CallArgs& a) {
  List items = r.iterate(v, a.pos);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value f_last(Renderer& r, const Value& v, CallArgs& a) {
  List items = r.iterate(v, a.pos);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value f_reverse(Renderer& r, const Value& v, CallArgs& a) {
  if (v.is_string()) {
    auto cps = utf8_decode(v.s);
    std::reverse(cps.begin(), cps.end());
    return Value::string(utf8_encode(cps, 0, cps.size()));
  }
  List items = r.iterate(v, a.pos);
  std::reverse(items.begin(), items.end());
  return Value::list_of(std::move(items));
}

Value item_of(Renderer& r, const Value& x, const Value* attribute, Pos pos) {
  if (!attribute || attribute->is_none()) return x;
  if (attribute->type == Type::Int) return r.get_item(x, *attribute, pos);
  return r.attribute_path(x, attribute->str(), pos);
}

Value f_join(Renderer& r, const Value& v, CallArgs& a) {
  a.check("join", 2, {"d", "attribute"});
  std::string sep = a.get_or(0, "d", Value::string("")).str();
  const Value* attribute = a.get(1, "attribute");
  std::string out;
  List items = r.iterate(v, a.pos);
  for (size_t k = 0; k < items.size(); ++k) {
    if (k) out += sep;
    out += item_of(r, items[k], attribute, a.pos).str();
  }
  return Value::string(std::move(out));
}

// jinja2's map and select family start with `if value:`, so a falsy input (None, an
// undefined, "") yields nothing instead of failing to iterate.
Value f_map(Renderer& r, const Value& v, CallArgs& a) {
  if (!v.truthy()) return Value::list_of({});
  List items = r.iterate(v, a.pos);
  List out;
  if (a.args.empty()) {
    const Value* attribute = a.get(99, "attribute");
    if (!attribute) throw_at(a.pos, "map needs a filter name or attribute=");
    const Value* def = a.get(99, "default");
    for (const Value& x : items) {
      Value y = r.attribute_path(x, attribute->str(), a.pos);
      out.push_back(y.is_undefined() && def ? *def : y);
    }
  } else {
    std::string filter = a.args[0].str();
    for (const Value& x : items) {
      CallArgs fa{{a.args.begin() + 1, a.args.end()}, a.kwargs, a.pos};
      out.push_back(r.apply_filter(filter, x, fa, a.pos));
    }
  }
  return Value::list_of(std::move(out));
}

// select/reject/selectattr/rejectattr share one body: an optional attribute, a test name
// (default: truthiness) and the test's arguments.
Value select_impl(Renderer& r, const Value& v, CallArgs& a, bool by_attr, bool keep) {
  if (!v.truthy()) return Value::list_of({});
  List items = r.iterate(v, a.pos);
  size_t k = 0;
  std::string attr;
  if (by_attr) {
    if (a.args.empty()) throw_at(a.pos, "selectattr/rejectattr need an attribute name");
    attr = a.args[k++].str();
  }
  std::string test;
  if (k < a.args.size()) test = a.args[k++].str();
  List out;
  for (const Value& x : items) {
    Value subject = by_attr ? r.attribute_path(x, attr, a.pos) : x;
    bool ok;
    if (test.empty()) {
      ok = subject.truthy();
    } else {
      CallArgs ta{{a.args.begin() + long(k), a.args.end()}, a.kwargs, a.pos};
      ok = r.apply_test(test, subject, ta, a.pos);
    }
    if (ok == keep) out.push_back(x);
  }
  return Value::list_of(std::move(out));
}
Value f_select(Renderer& r, const Value& v, CallArgs& a) { return select_impl(r, v, a, false, true); }
Value f_reject(Renderer& r, const Value& v, CallArgs& a) { return select_impl(r, v, a, false, false); }
Value f_selectattr(Renderer& r, const Value& v, CallArgs& a) { return select_impl(r, v, a, true, true); }
Value f_rejectattr(Renderer& r, const Value& v, CallArgs& a) { return select_impl(r, v, a, true, false); }

Value f_sort(Renderer& r, const Value& v, CallArgs& a) {
  a.check("sort", 3, {"reverse", "case_sensitive", "attribute"});
  bool reverse = a.get_or(0, "reverse", Value::boolean(false)).truthy();
  bool cs = a.get_or(1, "case_sensitive", Value::boolean(false)).truthy();
  const Value* attribute = a.get(2, "attribute");
  List items = r.iterate(v, a.pos);
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& x : items) keyed.emplace_back(sort_key(item_of(r, x, attribute, a.pos), cs), x);
  Pos pos = a.pos;
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& p, const auto& q) {
    return reverse ? less_than(q.first, p.first, pos) : less_than(p.first, q.first, pos);
  });
  List out;
  for (auto& p : keyed) out.push_back(p.second);
  return Value::list_of(std::move(out));
}

Value f_unique(Renderer& r, const Value& v, CallArgs& a) {
  a.check("unique", 2, {"case_sensitive", "attribute"});
  bool cs = a.get_or(0, "case_sensitive", Value::boolean(false)).truthy();
  const Value* attribute = a.get(1, "attribute");
  List out, seen;
  for (const Value& x : r.iterate(v, a.pos)) {
    Value key = sort_key(item_of(r, x, attribute, a.pos), cs);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); })) continue;
    seen.push_back(key);
    out.push_back(x);
  }
  return Value::list_of(std::move(out));
}

Value min_max(Renderer& r, const Value& v, CallArgs& a, bool want_max) {
  a.check(want_max ? "max" : "min", 2, {"case_sensitive", "attribute"});
  bool cs = a.get_or(0, "case_sensitive", Value::boolean(false)).truthy();
  const Value* attribute = a.get(1, "attribute");
  List items = r.iterate(v, a.pos);
  if (items.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
  size_t best = 0;
  for (size_t k = 1; k < items.size(); ++k) {
    Value x = sort_key(item_of(r, items[k], attribute, a.pos), cs);
    Value b = sort_key(item_of(r, items[best], attribute, a.pos), cs);
    if (want_max ? less_than(b, x, a.pos) : less_than(x, b, a.pos)) best = k;
  }
  return items[best];
}
Value f_min(Renderer& r, const Value& v, CallArgs& a) { return min_max(r, v, a, false); }
Value f_max(Renderer& r, const Value& v, CallArgs& a) { return min_max(r, v, a, true); }

Value f_sum(Renderer& r, const Value& v, CallArgs& a) {
  a.check("sum", 2, {"attribute", "start"});
  const Value* attribute = a.get(0, "attribute");
  Value total = a.get_or(1, "start", Value::integer(0));
  for (const Value& x : r.iterate(v, a.pos)) {
    Value y = item_of(r, x, attribute, a.pos);
    if (!y.is_number() || !total.is_number()) throw_at(a.pos, "sum: unsupported operand types " + total.type_name() + " and " + y.type_name());
    if (total.type == Type::Float || y.type == Type::Float) total = Value::number(total.as_double() + y.as_double());
    else total = Value::integer(total.as_int() + y.as_int());
  }
  return total;
}

Value f_batch(Renderer& r, const Value& v, CallArgs& a) {
  a.check("batch", 2, {"linecount", "fill_with"});
  int64_t n = a.get_or(0, "linecount", Value::integer(0)).as_int();
  if (n <= 0) throw_at(a.pos, "batch needs a positive line count");
  const Value* fill = a.get(1, "fill_with");
  List out, cur;
  for (const Value& x : r.iterate(v, a.pos)) {
    cur.push_back(x);
    if (int64_t(cur.size()) == n) out.push_back(Value::list_of(std::move(cur))), cur.clear();
  }
  if (!cur.empty()) {
    if (fill && !fill->is_none())
      while (int64_t(cur.size()) < n) cur.push_back(*fill);
    out.push_back(Value::list_of(std::move(cur)));
  }
  return Value::list_of(std::move(out));
}

Value f_slice(Renderer& r, const Value& v, CallArgs& a) {
  a.check("slice", 2, {"slices", "fill_with"});
  int64_t slices = a.get_or(0, "slices", Value::integer(0)).as_int();
  if (slices <= 0) throw_at(a.pos, "slice needs a positive count");
  const Value* fill = a.get(1, "fill_with");
  List seq = r.iterate(v, a.pos);
  int64_t len = int64_t(seq.size()), per = len / slices, extra = len % slices, offset = 0;
  List out;
  for (int64_t s = 0; s < slices; ++s) {
    int64_t start = offset + s * per;
    if (s < extra) ++offset;
    int64_t end = offset + (s + 1) * per;
    List part(seq.begin() + start, seq.begin() + end);
    if (fill && !fill->is_none() && s >= extra) part.push_back(*fill);
    out.push_back(Value::list_of(std::move(part)));
  }
  return Value::list_of(std::move(out));
}

Value f_dictsort(Renderer&, const Value& v, CallArgs& a) {
  a.check("dictsort", 3, {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) throw_at(a.pos, "dictsort needs a mapping, not " + v.type_name());
  bool cs = a.get_or(0, "case_sensitive", Value::boolean(false)).truthy();
  bool by_value = a.get_or(1, "by", Value::string("key")).str() == "value";
  bool reverse = a.get_or(2, "reverse", Value::boolean(false)).truthy();
  auto items = v.dict->items;
  Pos pos = a.pos;
  std::stable_sort(items.begin(), items.end(), [&](const auto& p, const auto& q) {
    Value x = sort_key(by_value ? p.second : p.first, cs), y = sort_key(by_value ? q.second : q.first, cs);
    return reverse ? less_than(y, x, pos) : less_than(x, y, pos);
  });
  List out;
  for (auto& [k, x] : items) out.push_back(Value::list_of({k, x}, true));
  return Value::list_of(std::move(out));
}

}  // namespace

void register_sequence_filters(std::unordered_map<std::string, FilterFn>& t) {
  t.insert({{"items", f_items}, {"list", f_list}, {"first", f_first}, {"last", f_last},
            {"reverse", f_reverse}, {"join", f_join}, {"map", f_map}, {"select", f_select},
            {"reject", f_reject}, {"selectattr", f_selectattr}, {"rejectattr", f_rejectattr},
            {"sort", f_sort}, {"unique", f_unique}, {"min", f_min}, {"max", f_max}, {"sum", f_sum},
            {"batch", f_batch}, {"slice", f_slice}, {"dictsort", f_dictsort}});
}

}  // namespace loom::text::jinja
