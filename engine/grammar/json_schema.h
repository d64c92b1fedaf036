// JSON Schema (draft 2020-12, and the drafts agents send: 7 and OpenAI's
// strict subset) to a grammar of the JSON texts it accepts, or a subset of
// them (json_text.h says which choices narrow it).
//
// Honoured: type (one or several), enum and const (the values listed that
// the keywords beside them accept too; none: refused), properties, required,
// additionalProperties (false, true or a schema: extra members after the
// listed ones), items, prefixItems (and draft 7's items array), minItems,
// maxItems, minLength, maxLength, pattern (pattern.h's subset), format
// (date-time, date, time, uuid, email), minimum, maximum, exclusiveMinimum,
// exclusiveMaximum (whole numbers for `number`; for `integer`, a bound past
// the 15-digit integers written that leaves none is refused), anyOf, oneOf (when its
// branches cannot both match: distinct types, or objects told apart by a
// required property's const or enum), allOf (merged, when its branches are
// objects or one constrains nothing the others do), $ref to anything in the
// document ("#", "#/$defs/x", any JSON pointer; recursion included),
// boolean schemas. Annotations (title, description, examples, default, ...)
// are ignored, as are keywords JSON Schema does not define.
//
// Members come in the order the schema lists them, each optional one
// present or not; keys of additional members are not checked for
// uniqueness. Any other validation keyword (not, if/then/else, uniqueItems,
// contains, patternProperties, propertyNames, min/maxProperties,
// multipleOf, dependent*, unevaluated*, remote $refs) is refused:
// InputError "schema at /path: 'keyword' is not supported", never ignored.
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
