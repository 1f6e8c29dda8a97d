// Jinja interpreter units: each expected string is what jinja2 3.1.6 renders for the same
// source in Hugging Face's configuration (trim_blocks, lstrip_blocks, loopcontrols).
#include <gtest/gtest.h>

#include "text/jinja/template.h"

namespace loom::text::jinja {
namespace {

std::string render(const char* src) { return Template(src).render({}); }

TEST(Jinja, WhitespaceControl) {
  EXPECT_EQ(render("{% if true %}\n  yes\n{% endif %}\nend\n"),
            "  yes\nend");
  EXPECT_EQ(render("a  {%- if true -%}  b  {%- endif -%}  c"),
            "abc");
  EXPECT_EQ(render("x {{- ' y ' -}} z"),
            "x y z");
  EXPECT_EQ(render("  {% for i in [1] %}\n{{ i }}\n  {% endfor %}\n"),
            "1\n");
  EXPECT_EQ(render("{# c #}\n  {#- d -#}  X"),
            "X");
  EXPECT_EQ(render("{% raw %}{{ not }}{% endraw %}"),
            "{{ not }}");
  EXPECT_EQ(render("{% set block %}\n  inner {{ 1 + 1 }}\n{% endset %}[{{ block }}]"),
            "[  inner 2\n]");
  EXPECT_EQ(render("a\r\nb {%+ if true %} c{% endif +%}\n d"),
            "a\nb  c\n d");
}

TEST(Jinja, LoopVariables) {
  EXPECT_EQ(render("{% for x in ['a','b','c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.cycle('o','e') }};{% endfor %}"),
            "103TrueFalse3bo;212FalseFalse3ace;321FalseTrue3bo;");
  EXPECT_EQ(render("{% for x in [1,2,3,4] if x is even %}{{ x }}{% else %}none{% endfor %}|{% for x in [] %}{{ x }}{% else %}empty{% endfor %}"),
            "24|empty");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': [2]}.items() %}{{ k }}={{ v }} {% endfor %}"),
            "a=1 b=[2] ");
  EXPECT_EQ(render("{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}"),
            "02");
  EXPECT_EQ(render("{% set x = 1 %}{% for i in range(2) %}{% set x = 5 %}{% endfor %}{{ x }}{% set ns = namespace(x=1) %}{% for i in range(3) %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}"),
            "14");
}

// markupsafe.Markup from |safe and |escape: adding a plain str escapes it (Functionary v3.1
// builds its tool list this way); `~` and strip keep their jinja2 types.
TEST(Jinja, MarkupStrings) {
  EXPECT_EQ(render("{{ \"<b>'\"|safe + \"<i>&\" + ('\"'|e) }}|{{ ('<x>'|safe).strip() ~ '<y>' }}|{{ 'a<'|safe is escaped }}{{ 'a<' is escaped }}|{{ ('<'|safe) * 2 + '>' }}|{{ ('&'|safe)|trim + '&' }}|{{ '<'|e|e }}{{ '<'|forceescape|forceescape }}"),
            "<b>'&lt;i&gt;&amp;&#34;|<x><y>|TrueFalse|<<&gt;|&&amp;|&lt;&amp;lt;");
}

// map and the select family start with `if value:` in jinja2: a falsy input is an empty list.
TEST(Jinja, SelectOverNothing) {
  EXPECT_EQ(render("{{ none|selectattr('type', 'equalto', 'x')|list }}{{ none|map(attribute='x')|list }}{{ ''|select|list }}{{ undefined_thing|reject|list }}"),
            "[][][][]");
}

TEST(Jinja, FiltersAndValues) {
  EXPECT_EQ(render("{{ {'b': [1, 2.5, none, true], 'a': 'é\"'} | tojson }}|{{ [1, {'k': []}] | tojson(indent=2) }}"),
            "{\"b\": [1, 2.5, null, true], \"a\": \"é\\\"\"}|[\n  1,\n  {\n    \"k\": []\n  }\n]");
  EXPECT_EQ(render("{{ 1e16 }} {{ 1e-5 }} {{ 0.1 + 0.2 }} {{ 7 / 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 3.0 }} {{ true }} {{ none }} {{ [1, 'a', none] }}"),
            "1e+16 1e-05 0.30000000000000004 3.5 -4 2 1024 3.0 True None [1, 'a', None]");
  EXPECT_EQ(render("{{ 'Hello'[1:] }} {{ 'abc'[::-1] }} {{ [1,2,3][-1] }} {{ 'héllo'|length }} {{ '  x  '|trim }}|{{ 'a,b,,c'.split(',') }} {{ 'x'.join(['1','2']) }}"),
            "ello cba 3 5 x|['a', 'b', '', 'c'] 1x2");
  EXPECT_EQ(render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Ann') }} {{ greet('Bob', punct='?') }}"),
            "Hi Ann! Hi Bob?");
  EXPECT_EQ(render("{{ [{'n': 'b', 't': 1}, {'n': 'a'}] | selectattr('t', 'defined') | map(attribute='n') | join(',') }} {{ ['B','a','c'] | sort | join }} {{ [3,1,3] | unique | list }} {{ 'hello world'|title }} {{ 'abc'|upper }}"),
            "b aBc [3, 1] Hello World ABC");
  EXPECT_EQ(render("{{ 'x' if false }}|{{ 'a' ~ 1 ~ none }}|{{ 1 < 2 < 3 }}|{{ 'b' in 'abc' }}|{{ 3 not in [1,2] }}|{{ undefined_thing is defined }}|{{ none is none }}"),
            "|a1None|True|True|True|False|True");
  EXPECT_EQ(render("{{ 'line1\nline2\n\nline4' | indent(2) }}|{{ 'a b  c' | wordcount }}|{{ -3 | abs }}|{{ 2.5 | round }}|{{ '42' | int + 1 }}"),
            "line1\n  line2\n\n  line4|3|3|2.0|43");
  EXPECT_EQ(render("{{ none.attr }}|{{ [1][5] }}|{{ {'a': 1}.get('b', 'dflt') }}|{{ missing | default('d') }}|{{ 'ab' * 2 }}|{{ [1, 2] + [3] }}"),
            "||dflt|d|abab|[1, 2, 3]");
}
// The message names the problem and where it is.
std::string error_of(const char* src, const std::map<std::string, Value>& ctx = {}) {
  try {
    Template(src).render(ctx);
  } catch (const TemplateError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Jinja, ErrorsCarryLineAndColumn) {
  EXPECT_EQ(error_of("line one\n  {{ x | nosuchfilter }}"), "template 2:10: unsupported filter 'nosuchfilter'");
  EXPECT_EQ(error_of("{% for x in y %}"), "template 1:17: unexpected end of template; expected 'else' or 'endfor'");
  EXPECT_EQ(error_of("{{ 'abc' "), "template 1:1: unterminated expression: missing '}}'");
  EXPECT_EQ(error_of("{% include 'x' %}"), "template 1:4: unsupported statement '{% include %}'");
  EXPECT_EQ(error_of("{{ u.attr }}"), "template 1:5: 'u' is undefined");
  EXPECT_EQ(error_of("{{ 1 / 0 }}"), "template 1:6: division by zero");
  EXPECT_EQ(error_of("{{ [].append(1) }}"), "template 1:13: access to attribute 'list.append' is unsafe (the template sandbox forbids mutation)");
}

TEST(Jinja, RaiseExceptionCarriesTheTemplatesMessage) {
  try {
    Template("\n{{ raise_exception('roles must alternate') }}").render({});
    FAIL() << "expected a RaisedError";
  } catch (const RaisedError& e) {
    EXPECT_EQ(e.message, "roles must alternate");
    EXPECT_EQ(e.pos.line, 2);
  }
}

TEST(Jinja, StrftimeNowReadsTheInjectedClock) {
  std::tm tm{};
  tm.tm_year = 2024 - 1900;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  auto globals = standard_globals([tm] { return tm; });
  EXPECT_EQ(Template("{{ strftime_now('%d %b %Y') }}").render({}, globals), "26 Jul 2024");
}

TEST(Jinja, ContextVariablesAndUndefined) {
  std::map<std::string, Value> ctx;
  ctx["messages"] = Value::list_of({Value::string("a"), Value::string("b")});
  EXPECT_EQ(Template("{{ messages | length }}{{ messages[0] }}{{ tools }}|{{ tools is defined }}").render(ctx), "2a|False");
}

}  // namespace
}  // namespace loom::text::jinja
