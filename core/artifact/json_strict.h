// ninfer::core - strict JSON parsing of artifact directories (docs/ARTIFACT_FORMAT.md §1.3, §6 #4).
//
// Contract:
// - parse_json_strict(parser, text, prefix) parses with simdjson's DOM and additionally rejects
//   duplicate member names at any depth. NaN/Infinity literals and invalid UTF-8 are rejected by
//   simdjson itself. Errors throw ninfer::Error(prefix + "invalid JSON directory: ..." or
//   prefix + "duplicate JSON member \"X\"").
// - The element stays valid while `parser` lives and is not reused.
// - json_text(element) is the compact JSON text of a parsed value (doubles exact, shortest;
//   integers stay integers; member order kept).
#pragma once

#include <simdjson.h>

#include <string>
#include <string_view>

namespace ninfer::core::detail {

simdjson::dom::element parse_json_strict(simdjson::dom::parser& parser, std::string_view text,
                                         const std::string& prefix);
std::string json_text(simdjson::dom::element element);

} // namespace ninfer::core::detail
