// JSON Schema (draft 2020-12 and the OpenAI "strict" subset) translated to GBNF text, whose
// strings are JSON documents valid against the schema. Every keyword is either honoured,
// accepted as an annotation (title, description, default, examples, ...), or refused with an
// error naming it and where it is (the JSON pointer): never silently dropped. The supported
// set is the table in docs/constrained-output.md.
//
// Choices that keep the output valid while the grammar stays small: object properties come in
// the order the schema lists them; optional properties may be left out; properties the schema
// does not name are never generated (unless the object names none: then any keys, with
// additionalProperties' schema); a pattern must match the whole string; number bounds with a
// fractional or negative lower bound allow integers only.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace loom::text::constrain {

// The GBNF grammar (root rule `root`) of the JSON documents valid against `schema`.
// Throws loom::Error naming an unsupported keyword or a schema error.
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);
// Any JSON object (OpenAI's response_format {"type": "json_object"}).
std::string json_object_gbnf();

}  // namespace loom::text::constrain
