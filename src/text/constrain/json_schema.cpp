#include "text/constrain/json_schema.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "common/error.h"
#include "text/constrain/regex.h"

namespace loom::text::constrain {

using json = nlohmann::ordered_json;

namespace {

constexpr int kMaxDepth = 64;
constexpr size_t kMaxEnum = 4096;
constexpr int64_t kMaxCount = 4096;     // maxItems, maxLength: the grammar repeats that often
constexpr int64_t kMaxMagnitude = 999999999999999;  // 15 digits: exact in a double

// JSON's primitives, always defined (unused rules cost nothing at match time).
const char* kPrimitives = R"(space ::= " "?
char ::= [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-CefEF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}))
string ::= "\"" char* "\"" space
integral ::= "-"? ("0" | [1-9] [0-9]{0,14})
integer ::= integral space
number ::= integral ("." [0-9]{1,15})? ([eE] [-+]? [0-9]{1,2})? space
boolean ::= ("true" | "false") space
null ::= "null" space
value ::= object | array | string | number | boolean | null
object ::= "{" space (string ":" space value ("," space string ":" space value)*)? "}" space
array ::= "[" space (value ("," space value)*)? "]" space
)";

// Formats with a grammar; the dates are real calendar dates (no 31st of a 30-day month; no
// 29th of February, which only leap years have).
const std::map<std::string, std::string> kFormats = {
    {"date", R"(fmt-date ::= [0-9]{4} "-" ((("0" [13578]) | ("1" [02])) "-" (("0" [1-9]) | ([12] [0-9]) | ("3" [01])) | (("0" [469]) | "11") "-" (("0" [1-9]) | ([12] [0-9]) | "30") | "02-" (("0" [1-9]) | ("1" [0-9]) | ("2" [0-8]))))"},
    {"time", R"(fmt-time ::= ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))"},
    {"date-time", R"(fmt-date-time ::= fmt-date "T" fmt-time)"},
    {"uuid", R"(fmt-uuid ::= [0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12})"},
    {"email", R"(fmt-email ::= [a-z0-9] [a-z0-9._+-]{0,30} "@" [a-z0-9] [a-z0-9-]{0,30} ("." [a-z]{2,8}){1,2})"},
    {"ipv4", R"(fmt-ipv4 ::= fmt-octet ("." fmt-octet){3}
fmt-octet ::= [0-9] | [1-9] [0-9] | "1" [0-9] [0-9] | "2" [0-4] [0-9] | "25" [0-5])"},
};

const std::set<std::string> kAnnotations = {"title", "description", "$schema", "$id", "$comment", "examples",
                                            "default", "deprecated", "readOnly", "writeOnly", "$anchor", "strict",
                                            "name", "contentMediaType", "contentEncoding"};

std::string literal(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += char(c);
    else if (c < 0x20) out += fmt::format("\\x{:02X}", c);
    else out += char(c);
  }
  return out + "\"";
}

bool all_of(const std::string& s, size_t from, char c) {
  for (size_t i = from; i < s.size(); ++i)
    if (s[i] != c) return false;
  return true;
}

// Decimal strings of the integers in [a, b], a and b of one length.
std::string digits_between(const std::string& a, const std::string& b) {
  const size_t n = a.size();
  if (a == b) return literal(a);
  if (a[0] == b[0]) return literal(a.substr(0, 1)) + " " + digits_between(a.substr(1), b.substr(1));
  const std::string rest = n > 1 ? fmt::format(" [0-9]{{{}}}", n - 1) : "";
  std::vector<std::string> alts;
  char lo = a[0], hi = b[0];
  if (!all_of(a, 1, '0')) {
    alts.push_back(literal(a.substr(0, 1)) + " " + digits_between(a.substr(1), std::string(n - 1, '9')));
    ++lo;
  }
  std::string tail;
  if (!all_of(b, 1, '9')) {
    tail = literal(b.substr(0, 1)) + " " + digits_between(std::string(n - 1, '0'), b.substr(1));
    --hi;
  }
  if (lo <= hi) alts.push_back(fmt::format("[{}-{}]", lo, hi) + rest);
  if (!tail.empty()) alts.push_back(tail);
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

// Non-negative integers in [a, b] (b absent: up to 15 digits), without leading zeros.
std::string naturals(int64_t a, std::optional<int64_t> b) {
  const std::string sa = std::to_string(a);
  const size_t la = sa.size(), lb = b ? std::to_string(*b).size() : 15;
  std::vector<std::string> alts;
  for (size_t d = la; d <= lb; ++d) {
    if (!b && d > la) {  // every longer length at once
      alts.push_back(fmt::format("[1-9] [0-9]{{{},{}}}", la, lb - 1));
      break;
    }
    const std::string lo = d == la ? sa : "1" + std::string(d - 1, '0');
    const std::string hi = b && d == lb ? std::to_string(*b) : std::string(d, '9');
    alts.push_back(digits_between(lo, hi));
  }
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

// Integers in [lo, hi], either side open when absent.
std::string integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<std::string> alts;
  if (!lo || *lo < 0) {  // negative part: -x for x in [max(1, -hi), -lo]
    const int64_t xmin = hi ? std::max<int64_t>(1, -std::min<int64_t>(*hi, -1)) : 1;
    std::optional<int64_t> xmax;
    if (lo) xmax = -*lo;
    if (!xmax || xmin <= *xmax) alts.push_back("\"-\" " + naturals(xmin, xmax));
  }
  if (!hi || *hi >= 0) alts.push_back(naturals(lo ? std::max<int64_t>(0, *lo) : 0, hi));
  if (alts.size() == 1) return alts[0];
  return "(" + alts[0] + " | " + alts[1] + ")";
}

class Converter {
 public:
  explicit Converter(const json& root) : root_(root) {}

  std::string run() {
    const std::string body = visit(root_, "root", "", 0);
    std::string out = "root ::= " + body + "\n";
    out += kPrimitives;
    for (const auto& f : used_formats_) out += kFormats.at(f) + "\n";
    if (used_formats_.count("date-time")) {
      if (!used_formats_.count("date")) out += kFormats.at("date") + "\n";
      if (!used_formats_.count("time")) out += kFormats.at("time") + "\n";
    }
    for (const auto& [name, rule_body] : rules_) out += name + " ::= " + rule_body + "\n";
    return out;
  }

 private:
  [[noreturn]] static void fail_at(const std::string& where, const std::string& what) {
    loom::fail("JSON Schema at '{}': {}", where.empty() ? "#" : "#" + where, what);
  }
  [[noreturn]] static void unsupported(const std::string& where, const std::string& kw) {
    fail_at(where, fmt::format("keyword '{}' is not supported", kw));
  }

  // A named rule for `body` (equal bodies share one rule).
  std::string rule(const std::string& hint, const std::string& body) {
    if (auto it = by_body_.find(body); it != by_body_.end()) return it->second;
    std::string name;
    for (char c : hint) name += std::isalnum(uint8_t(c)) ? c : '-';
    if (name.empty()) name = "r";
    name = "s-" + name;
    const std::string base = name;
    for (int i = 1; taken_.count(name); ++i) name = base + "-" + std::to_string(i);
    taken_.insert(name);
    rules_.push_back({name, body});
    by_body_[body] = name;
    return name;
  }

  static std::optional<int64_t> count(const json& s, const char* kw, const std::string& where) {
    if (!s.contains(kw)) return std::nullopt;
    const json& v = s[kw];
    if (!v.is_number_integer() || v.get<int64_t>() < 0) fail_at(where, fmt::format("'{}' must be a non-negative integer", kw));
    const int64_t x = v.get<int64_t>();
    if (x > kMaxCount) fail_at(where, fmt::format("'{}' of {} is above the supported {}", kw, x, kMaxCount));
    return x;
  }

  const json& resolve(const std::string& ref, const std::string& where) {
    if (ref.rfind("#", 0) != 0) fail_at(where, fmt::format("'$ref' '{}': only references inside the schema (#/...) are supported", ref));
    try {
      const json::json_pointer p(ref.substr(1));
      if (!root_.contains(p)) fail_at(where, fmt::format("'$ref' '{}' points at nothing", ref));
      return root_.at(p);
    } catch (const json::exception& e) {
      fail_at(where, fmt::format("'$ref' '{}' is not a valid JSON pointer: {}", ref, e.what()));
    }
  }

  std::string visit(const json& s, const std::string& hint, const std::string& where, int depth) {
    if (depth > kMaxDepth) fail_at(where, fmt::format("schema nests deeper than {} levels", kMaxDepth));
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail_at(where, "the schema 'false' accepts nothing");
      return "value";
    }
    if (!s.is_object()) fail_at(where, "a schema must be an object or a boolean");
    static const std::set<std::string> known = {
        "type", "properties", "required", "additionalProperties", "enum", "const", "anyOf", "oneOf", "allOf", "$ref",
        "$defs", "definitions", "items", "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "pattern",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "format", "minProperties", "maxProperties",
        "uniqueItems", "unevaluatedProperties", "nullable"};
    for (const auto& [k, v] : s.items())
      if (!known.count(k) && !kAnnotations.count(k)) unsupported(where, k);
    if (s.contains("uniqueItems") && s["uniqueItems"] != false) unsupported(where, "uniqueItems");
    if (s.contains("unevaluatedProperties") && s["unevaluatedProperties"] != false)
      unsupported(where, "unevaluatedProperties");

    if (s.contains("$ref")) {
      for (const auto& [k, v] : s.items())
        if (k != "$ref" && k != "$defs" && k != "definitions" && !kAnnotations.count(k))
          fail_at(where, fmt::format("'{}' beside '$ref' is not supported", k));
      if (!s["$ref"].is_string()) fail_at(where, "'$ref' must be a string");
      const std::string ref = s["$ref"];
      if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
      std::string name;
      for (char c : ref.substr(ref.rfind('/') + 1)) name += std::isalnum(uint8_t(c)) ? c : '-';
      name = "ref-" + name;
      const std::string base = name;
      for (int i = 1; taken_.count(name); ++i) name = base + "-" + std::to_string(i);
      taken_.insert(name);
      refs_[ref] = name;  // before the visit: a recursive reference finds it
      const std::string body = visit(resolve(ref, where), name, ref.substr(1), depth + 1);
      rules_.push_back({name, body});
      return name;
    }
    if (s.contains("nullable") && s["nullable"] == true) {  // OpenAPI's form of ["T", "null"]
      json t = s;
      t.erase("nullable");
      return "(" + visit(t, hint, where, depth + 1) + " | null)";
    }
    if (s.contains("const")) return "(" + literal(s["const"].dump()) + " space)";
    if (s.contains("enum")) {
      const json& e = s["enum"];
      if (!e.is_array() || e.empty()) fail_at(where, "'enum' must be a non-empty array");
      if (e.size() > kMaxEnum) fail_at(where, fmt::format("'enum' has {} values, more than the supported {}", e.size(), kMaxEnum));
      std::string alts;
      for (const auto& v : e) alts += (alts.empty() ? "" : " | ") + literal(v.dump());
      return rule(hint, "(" + alts + ") space");
    }
    for (const char* kw : {"anyOf", "oneOf"})
      if (s.contains(kw)) {
        const json& a = s[kw];
        if (!a.is_array() || a.empty()) fail_at(where, fmt::format("'{}' must be a non-empty array", kw));
        if (s.contains("type") || s.contains("properties")) fail_at(where, fmt::format("'{}' beside 'type' is not supported", kw));
        std::string alts;
        for (size_t i = 0; i < a.size(); ++i)
          alts += (i ? " | " : "") + visit(a[i], hint + "-" + std::to_string(i), fmt::format("{}/{}/{}", where, kw, i), depth + 1);
        return rule(hint, alts);
      }
    if (s.contains("allOf")) {
      const json& a = s["allOf"];
      if (!a.is_array() || a.size() != 1) fail_at(where, "'allOf' with more than one schema is not supported");
      return visit(a[0], hint, where + "/allOf/0", depth + 1);
    }
    if (s.contains("type") && s["type"].is_array()) {
      std::string alts;
      for (size_t i = 0; i < s["type"].size(); ++i) {
        json t = s;
        t["type"] = s["type"][i];
        alts += (i ? " | " : "") + visit(t, hint + "-" + std::to_string(i), where, depth + 1);
      }
      if (alts.empty()) fail_at(where, "'type' must not be an empty array");
      return rule(hint, alts);
    }
    std::string type;
    if (s.contains("type")) {
      if (!s["type"].is_string()) fail_at(where, "'type' must be a string or an array of strings");
      type = s["type"];
    } else if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) {
      type = "object";
    } else if (s.contains("items") || s.contains("prefixItems")) {
      type = "array";
    } else if (s.contains("pattern") || s.contains("format") || s.contains("minLength") || s.contains("maxLength")) {
      type = "string";
    } else {
      return "value";
    }
    if (type == "string") return string_rule(s, hint, where);
    if (type == "integer" || type == "number") return number_rule(s, hint, where, type == "integer");
    if (type == "boolean") return "boolean";
    if (type == "null") return "null";
    if (type == "object") return object_rule(s, hint, where, depth);
    if (type == "array") return array_rule(s, hint, where, depth);
    fail_at(where, fmt::format("unknown type '{}'", type));
  }

  std::string string_rule(const json& s, const std::string& hint, const std::string& where) {
    const auto lo = count(s, "minLength", where), hi = count(s, "maxLength", where);
    if (lo && hi && *lo > *hi) fail_at(where, "'minLength' is above 'maxLength'");
    if (s.contains("pattern")) {
      if (lo || hi || s.contains("format")) fail_at(where, "'pattern' together with 'minLength'/'maxLength'/'format' is not supported");
      if (!s["pattern"].is_string()) fail_at(where, "'pattern' must be a string");
      std::string re;
      try {
        re = regex_to_gbnf(s["pattern"].get<std::string>(), RegexTarget::json_string);
      } catch (const loom::Error& e) {
        fail_at(where, fmt::format("'pattern': {}", e.what()));
      }
      return rule(hint, "\"\\\"\" " + re + " \"\\\"\" space");
    }
    if (s.contains("format")) {
      const std::string f = s["format"].is_string() ? s["format"].get<std::string>() : "";
      if (!kFormats.count(f)) fail_at(where, fmt::format("'format' '{}' is not supported (supported: date, time, date-time, uuid, email, ipv4)", f));
      if (lo || hi) fail_at(where, "'format' together with 'minLength'/'maxLength' is not supported");
      used_formats_.insert(f);
      return rule(hint, "\"\\\"\" fmt-" + f + " \"\\\"\" space");
    }
    if (!lo && !hi) return "string";
    const std::string rep = hi ? fmt::format("{{{},{}}}", lo.value_or(0), *hi) : fmt::format("{{{},}}", *lo);
    return rule(hint, "\"\\\"\" char" + rep + " \"\\\"\" space");
  }

  static std::optional<double> bound(const json& s, const char* kw, const std::string& where) {
    if (!s.contains(kw)) return std::nullopt;
    if (!s[kw].is_number()) fail_at(where, fmt::format("'{}' must be a number", kw));
    const double x = s[kw].get<double>();
    if (!std::isfinite(x) || std::fabs(x) > double(kMaxMagnitude))
      fail_at(where, fmt::format("'{}' of {} is beyond the supported magnitude {}", kw, x, kMaxMagnitude));
    return x;
  }

  std::string number_rule(const json& s, const std::string& hint, const std::string& where, bool integer) {
    const auto mn = bound(s, "minimum", where), mx = bound(s, "maximum", where);
    const auto xmn = bound(s, "exclusiveMinimum", where), xmx = bound(s, "exclusiveMaximum", where);
    if (!mn && !mx && !xmn && !xmx) return integer ? "integer" : "number";
    // The integers inside the bounds.
    std::optional<int64_t> lo, hi;
    if (mn) lo = int64_t(std::ceil(*mn));
    if (xmn) lo = std::max(lo.value_or(INT64_MIN), int64_t(std::floor(*xmn)) + 1);
    if (mx) hi = int64_t(std::floor(*mx));
    if (xmx) hi = std::min(hi.value_or(INT64_MAX), int64_t(std::ceil(*xmx)) - 1);
    const bool no_int = lo && hi && *lo > *hi;
    const char* empty = "the numeric bounds leave no integer (other fractional ranges are not supported)";
    const std::string ints = no_int ? "" : integer_range(lo, hi);
    if (integer) {
      if (no_int) fail_at(where, empty);
      return rule(hint, ints + " space");
    }
    // A number with a non-negative integral lower bound also gets fractions: n.fff for n in
    // [lo', hi - 1], where an exclusive lower bound lo also allows lo.fff with a digit > 0.
    const bool integral_lo = (mn && *mn == std::floor(*mn) && *mn >= 0 && !xmn) || (xmn && *xmn == std::floor(*xmn) && *xmn >= 0 && !mn);
    const bool integral_hi = !mx && !xmx ? true : (mx && !xmx && *mx == std::floor(*mx)) || (xmx && !mx && *xmx == std::floor(*xmx));
    if (!integral_lo || !integral_hi) {
      if (no_int) fail_at(where, empty);
      return rule(hint, ints + " space");
    }
    const int64_t base = mn ? int64_t(*mn) : int64_t(*xmn);
    std::optional<int64_t> frac_hi;
    if (mx) frac_hi = int64_t(*mx) - 1;
    if (xmx) frac_hi = int64_t(*xmx) - 1;
    std::vector<std::string> alts;
    if (!no_int) alts.push_back(ints);
    const int64_t frac_lo = xmn ? base + 1 : base;
    if (!frac_hi || frac_lo <= *frac_hi) alts.push_back(integer_range(frac_lo, frac_hi) + " \".\" [0-9]{1,15}");
    if (xmn && (!frac_hi || base <= *frac_hi)) alts.push_back(literal(std::to_string(base)) + " \".\" [0-9]{0,14} [1-9]");
    if (alts.empty()) fail_at(where, empty);
    std::string body = "(";
    for (size_t i = 0; i < alts.size(); ++i) body += (i ? " | " : "") + alts[i];
    return rule(hint, body + ") space");
  }

  std::string object_rule(const json& s, const std::string& hint, const std::string& where, int depth) {
    std::vector<std::string> names;
    std::vector<std::string> values;
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) fail_at(where, "'required' must be an array");
      for (const auto& r : s["required"]) {
        if (!r.is_string()) fail_at(where, "'required' must list strings");
        required.insert(r.get<std::string>());
      }
    }
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) fail_at(where, "'properties' must be an object");
      for (const auto& [k, v] : s["properties"].items()) {
        names.push_back(k);
        values.push_back(visit(v, hint + "-" + k, where + "/properties/" + k, depth + 1));
      }
    }
    for (const auto& r : required)
      if (std::find(names.begin(), names.end(), r) == names.end()) {
        names.push_back(r);
        values.push_back("value");
      }
    std::string additional = "value";
    if (s.contains("additionalProperties")) {
      const json& a = s["additionalProperties"];
      additional = a.is_boolean() ? (a.get<bool>() ? "value" : "") : visit(a, hint + "-additional", where + "/additionalProperties", depth + 1);
    }
    size_t n_required = 0;
    for (const auto& n : names) n_required += required.count(n);
    if (auto m = count(s, "minProperties", where); m && size_t(*m) > (names.empty() ? 0 : n_required))
      fail_at(where, "'minProperties' above the number of required properties is not supported");
    const auto max_props = count(s, "maxProperties", where);
    if (max_props && size_t(*max_props) < names.size())
      fail_at(where, "'maxProperties' below the number of properties is not supported");
    if (names.empty()) {
      if (additional.empty() || (max_props && *max_props == 0)) return rule(hint, "\"{\" space \"}\" space");
      const std::string kv = "string \":\" space " + additional;
      const std::string more = max_props ? fmt::format("{{0,{}}}", *max_props - 1) : "*";
      return rule(hint, "\"{\" space (" + kv + " (\",\" space " + kv + ")" + more + ")? \"}\" space");
    }
    // first_i: the properties from i on when none was written yet; after_i: when one was.
    const size_t n = names.size();
    std::vector<std::string> kv(n);
    for (size_t i = 0; i < n; ++i) kv[i] = literal(json(names[i]).dump()) + " space \":\" space " + values[i];
    std::string after;  // after_{i+1}, as an expression
    std::string first;
    for (size_t i = n; i-- > 0;) {
      const bool req = required.count(names[i]) != 0;
      const std::string after_i = (req ? "\",\" space " + kv[i] : "(\",\" space " + kv[i] + ")?") + (after.empty() ? "" : " " + after);
      const std::string start = kv[i] + (after.empty() ? "" : " " + after);
      const std::string first_i = req ? start : "(" + start + (first.empty() ? " | \"\")" : " | " + first + ")");
      first = rule(hint + "-from-" + std::to_string(i), first_i);
      after = rule(hint + "-after-" + std::to_string(i), after_i);
    }
    return rule(hint, "\"{\" space " + first + " \"}\" space");
  }

  std::string array_rule(const json& s, const std::string& hint, const std::string& where, int depth) {
    const auto lo = count(s, "minItems", where), hi = count(s, "maxItems", where);
    if (lo && hi && *lo > *hi) fail_at(where, "'minItems' is above 'maxItems'");
    if (s.contains("contains")) unsupported(where, "contains");
    std::vector<std::string> prefix;
    if (s.contains("prefixItems")) {
      if (!s["prefixItems"].is_array()) fail_at(where, "'prefixItems' must be an array");
      for (size_t i = 0; i < s["prefixItems"].size(); ++i)
        prefix.push_back(visit(s["prefixItems"][i], hint + "-" + std::to_string(i), fmt::format("{}/prefixItems/{}", where, i), depth + 1));
    }
    std::string item = "value";
    if (s.contains("items")) {
      const json& it = s["items"];
      if (it.is_array()) fail_at(where, "'items' as an array (draft 4 tuples) is not supported: use 'prefixItems'");
      item = it.is_boolean() ? (it.get<bool>() ? "value" : "") : visit(it, hint + "-item", where + "/items", depth + 1);
    }
    const int64_t k = int64_t(prefix.size());
    if (hi && *hi < k) fail_at(where, "'maxItems' below the number of 'prefixItems' is not supported");
    const int64_t more_lo = std::max<int64_t>(0, lo.value_or(0) - k);
    std::optional<int64_t> more_hi;
    if (hi) more_hi = *hi - k;
    if (item.empty()) {
      if (more_lo > 0) fail_at(where, "'minItems' above the number of 'prefixItems' with 'items': false");
      more_hi = 0;
    }
    std::string body = "\"[\" space";
    for (int64_t i = 0; i < k; ++i) body += (i ? " \",\" space " : " ") + prefix[size_t(i)];
    if (!more_hi || *more_hi > 0) {
      if (k > 0) {  // each further item after a comma
        const std::string rep = more_hi ? fmt::format("{{{},{}}}", more_lo, *more_hi) : fmt::format("{{{},}}", more_lo);
        body += " (\",\" space " + item + ")" + rep;
      } else {
        const int64_t first_lo = std::max<int64_t>(more_lo - 1, 0);
        const std::string rep = more_hi ? fmt::format("{{{},{}}}", first_lo, *more_hi - 1) : fmt::format("{{{},}}", first_lo);
        body += " (" + item + " (\",\" space " + item + ")" + rep + ")" + (more_lo == 0 ? "?" : "");
      }
    }
    return rule(hint, body + " \"]\" space");
  }

  const json& root_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::map<std::string, std::string> by_body_;
  std::map<std::string, std::string> refs_;
  std::set<std::string> taken_{"root", "space", "char", "string", "integral", "integer", "number",
                               "boolean", "null", "value", "object", "array"};
  std::set<std::string> used_formats_;
};

}  // namespace

std::string json_schema_to_gbnf(const json& schema) { return Converter(schema).run(); }

std::string json_object_gbnf() { return std::string("root ::= object\n") + kPrimitives; }

}  // namespace loom::text::constrain
