// JSON Schema to grammar: what each keyword admits and refuses, integer ranges checked value
// by value on fresh bounds, and hostile schemas refused with a message in bounded time.
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "common/error.h"
#include "match_util.h"

using namespace loom::text::constrain;
using namespace loom::text::constrain::testing;

namespace {
std::shared_ptr<const Grammar> schema(const std::string& s) { return compiled(SourceKind::json_schema, s); }
void expect_refused(const std::string& s, const std::string& needle) {
  try {
    compile(SourceKind::json_schema, s);
    ADD_FAILURE() << "no error for " << s;
  } catch (const loom::Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}
}  // namespace

TEST(JsonSchema, ObjectsRequiredOptionalAndOrder) {
  auto g = schema(R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},
    "ok":{"type":"boolean"}},"required":["age"],"additionalProperties":false})");
  EXPECT_TRUE(matches(g, R"({"age": 3})"));
  EXPECT_TRUE(matches(g, R"({"name":"x","age":-4,"ok":true})"));
  EXPECT_TRUE(matches(g, R"({"age":0,"ok":false})"));
  EXPECT_FALSE(matches(g, R"({"name":"x"})"));           // age is required
  EXPECT_FALSE(matches(g, R"({"age":1,"other":2})"));    // not a property
  EXPECT_FALSE(matches(g, R"({"age":01})"));             // no leading zeros in JSON
  EXPECT_FALSE(matches(g, R"({"age":1,"name":"x"})"));   // written in the schema's order
  auto any = compiled(SourceKind::json_object, "");
  EXPECT_TRUE(matches(any, R"({"a": [1, 2.5e3, {"b": null}], "c": "\u00e9\n"})"));
  EXPECT_FALSE(matches(any, R"([1])"));
}

TEST(JsonSchema, StringsEnumsConstFormats) {
  auto g = schema(R"({"type":"array","prefixItems":[{"type":"string","minLength":2,"maxLength":3},
    {"enum":["red",1,null,{"k":[true]}]},{"const":"x\"y"},{"type":"string","format":"date"},
    {"type":"string","format":"uuid"},{"type":"string","pattern":"^[A-Z]{2}-\\d+$"}],"items":false})");
  EXPECT_TRUE(matches(g, R"(["ab", "red", "x\"y", "2024-02-28", "123e4567-e89b-12d3-a456-426614174000", "AB-12"])"));
  EXPECT_TRUE(matches(g, R"(["a\u00e9c", {"k":[true]}, "x\"y", "1999-12-31", "00000000-0000-0000-0000-000000000000", "ZZ-0"])"));
  EXPECT_FALSE(matches(g, R"(["a", "red", "x\"y", "2024-02-28", "123e4567-e89b-12d3-a456-426614174000", "AB-12"])"));
  EXPECT_FALSE(matches(g, R"(["ab", "blue", "x\"y", "2024-02-28", "123e4567-e89b-12d3-a456-426614174000", "AB-12"])"));
  EXPECT_FALSE(matches(g, R"(["ab", "red", "x\"y", "2024-02-30", "123e4567-e89b-12d3-a456-426614174000", "AB-12"])"));
  EXPECT_FALSE(matches(g, R"(["ab", "red", "x\"y", "2024-02-28", "123e4567-e89b-12d3-a456-426614174000", "Ab-12"])"));
  EXPECT_FALSE(matches(g, R"(["ab", "red", "x\"y", "2024-02-28", "123e4567-e89b-12d3-a456-426614174000", "AB-12", 1])"));
}

TEST(JsonSchema, ArraysWithBounds) {
  auto g = schema(R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":4})");
  EXPECT_FALSE(matches(g, "[1]"));
  EXPECT_TRUE(matches(g, "[1, 2]"));
  EXPECT_TRUE(matches(g, "[1,2,3,4]"));
  EXPECT_FALSE(matches(g, "[1,2,3,4,5]"));
  EXPECT_FALSE(matches(g, "[]"));
  auto e = schema(R"({"type":"array","items":{"type":"null"},"maxItems":1})");
  EXPECT_TRUE(matches(e, "[]"));
  EXPECT_TRUE(matches(e, "[null]"));
  EXPECT_FALSE(matches(e, "[null,null]"));
}

TEST(JsonSchema, IntegerRangesValueByValue) {
  std::mt19937 rng(std::random_device{}());
  for (int t = 0; t < 60; ++t) {
    const int64_t span = t % 3 == 0 ? 100000 : 1000;
    int64_t lo = int64_t(rng() % (2 * span)) - span, hi = lo + int64_t(rng() % span);
    std::string s = fmt::format(R"({{"type":"integer","minimum":{},"maximum":{}}})", lo, hi);
    if (t % 4 == 1) s = fmt::format(R"({{"type":"integer","exclusiveMinimum":{},"exclusiveMaximum":{}}})", lo - 1, hi + 1);
    auto g = schema(s);
    for (int k = 0; k < 300; ++k) {
      const int64_t v = k < 100 ? lo - 50 + k % 100 : k < 200 ? hi - 50 + k % 100 : lo + int64_t(rng() % uint64_t(hi - lo + 1));
      EXPECT_EQ(matches(g, std::to_string(v)), v >= lo && v <= hi) << s << " value " << v;
    }
  }
  auto open = schema(R"({"type":"integer","minimum":-7})");
  EXPECT_TRUE(matches(open, "123456789012345"));
  EXPECT_TRUE(matches(open, "-7"));
  EXPECT_FALSE(matches(open, "-8"));
  EXPECT_FALSE(matches(open, "-10"));
}

TEST(JsonSchema, NumberBounds) {
  auto g = schema(R"({"type":"number","minimum":0,"exclusiveMaximum":10})");
  for (const char* ok : {"0", "9", "9.999", "0.5", "3"}) EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* no : {"10", "-1", "10.5", "-0.5"}) EXPECT_FALSE(matches(g, no)) << no;
  auto x = schema(R"({"type":"number","exclusiveMinimum":2,"maximum":3})");
  for (const char* ok : {"3", "2.5", "2.01"}) EXPECT_TRUE(matches(x, ok)) << ok;
  for (const char* no : {"2", "2.0", "2.00", "3.5", "1"}) EXPECT_FALSE(matches(x, no)) << no;
}

TEST(JsonSchema, AnyOfRefsAndRecursion) {
  auto g = schema(R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
    "kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"]}},
    "anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]})");
  EXPECT_TRUE(matches(g, "null"));
  EXPECT_TRUE(matches(g, R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[{"v":4,"kids":[]}]}]})"));
  EXPECT_FALSE(matches(g, R"({"v":1,"kids":[{"w":2}]})"));
  auto t = schema(R"({"type":["string","null"]})");
  EXPECT_TRUE(matches(t, "null"));
  EXPECT_TRUE(matches(t, "\"s\""));
  EXPECT_FALSE(matches(t, "1"));
}

TEST(JsonSchema, UnsupportedAndHostileRefusedByName) {
  const auto t0 = std::chrono::steady_clock::now();
  expect_refused(R"({"type":"object","patternProperties":{"a":{}}})", "'patternProperties' is not supported");
  expect_refused(R"({"type":"array","uniqueItems":true})", "'uniqueItems'");
  expect_refused(R"({"type":"integer","multipleOf":3})", "'multipleOf'");
  expect_refused(R"({"not":{"type":"string"}})", "'not'");
  expect_refused(R"({"type":"string","format":"hostname"})", "'format' 'hostname'");
  expect_refused(R"({"allOf":[{"type":"string"},{"maxLength":3}]})", "allOf");
  expect_refused(R"({"$ref":"https://example.com/s.json"})", "only references inside");
  expect_refused(R"({"$ref":"#/$defs/missing"})", "points at nothing");
  expect_refused(R"({"type":"string","pattern":"(a)\\1"})", "backreference");
  expect_refused(R"({"type":"string","pattern":"[a"})", "missing ']'");
  expect_refused(R"({"type":"integer","minimum":5,"maximum":4})", "no integer");
  expect_refused(R"({"type":"array","maxItems":100000})", "'maxItems' of 100000");
  // Recursion without a base case: no finite document exists.
  expect_refused(R"({"$defs":{"a":{"type":"object","properties":{"x":{"$ref":"#/$defs/a"}},"required":["x"]}},
    "$ref":"#/$defs/a"})", "no finite string");
  // Deep nesting.
  std::string deep = R"({"type":"string"})";
  for (int i = 0; i < 200; ++i) deep = R"({"type":"array","items":)" + deep + "}";
  expect_refused(deep, "deeper than");
  // A huge enum.
  std::string big = R"({"enum":[)";
  for (int i = 0; i < 100000; ++i) big += (i ? "," : "") + std::to_string(i);
  expect_refused(big + "]}", "more than the supported");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20.0);
}
