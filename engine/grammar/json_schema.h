// JSON Schema (draft 2020-12, and the drafts agents send: 7 and OpenAI's
// strict subset) to a grammar of the JSON texts it accepts, or a subset of
// them (json_text.h says which choices narrow it).
//
// Honoured: type (one or several), enum and const (the values listed that
// the keywords beside them accept too; none: refused), properties, required
// (a name not in properties: any value), additionalProperties (false, true
// or a schema: extra members after the listed ones), patternProperties
// (members named by a pattern; beside additionalProperties false only),
// minProperties and maxProperties (optional members made required in order,
// or left out from the last), items, prefixItems (and draft 7's items array
// with additionalItems), minItems, maxItems, minLength, maxLength, pattern
// (pattern.h's subset; with lengths, narrowed to them), format (pattern.h:
// date-time, date, time, uuid, email, hostname, ipv4, uri, uri-reference;
// a format JSON Schema does not define is an annotation), minimum, maximum,
// exclusiveMinimum, exclusiveMaximum (whole numbers for `number`; a bound
// beyond the 15-digit numbers written bounds nothing, and one that leaves
// none is refused), multipleOf 1, 0.1, 0.01, ... (that many fraction digits
// at most, no exponent), anyOf, oneOf (as anyOf: a text that matches two
// branches cannot be ruled out by a grammar; oneOfs whose branches differ
// in type or in a required const hold exactly), allOf (merged, when its
// branches are objects or one constrains nothing the others do), $ref to
// anything in the document ("#", "#/$defs/x", any JSON pointer; recursion
// included), boolean schemas. Annotations (title, description, examples,
// default, ...) are ignored, as are keywords JSON Schema does not define.
//
// Members come in the order the schema lists them, each optional one
// present or not. Names of additional members are not checked against the
// listed ones (an additional member may repeat a listed name, its value
// held by additionalProperties only); members named by a pattern are
// written only when no listed name matches it and it is the only pattern.
// Any other validation keyword (not, if/then/else, uniqueItems, contains,
// propertyNames, other multipleOfs, dependencies, dependent*, unevaluated*, remote
// $refs) is refused: InputError "schema at /path: 'keyword' is not
// supported", never ignored.
#pragma once

#include <nlohmann/json.hpp>

#include "engine/grammar/grammar.h"

namespace tps {

// Adds the rules of the JSON texts `schema` accepts to g; returns the rule
// (whitespace not included around it). Ordered, so that members come in the
// order the schema lists them (a plain nlohmann::json sorts keys).
int add_json_schema(Grammar& g, const nlohmann::ordered_json& schema);

// Any JSON object (OpenAI's json_object response format).
int add_json_object(Grammar& g);

}  // namespace tps
