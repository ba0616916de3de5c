// ninfer::core - the Python behaviours the Qwen chat template depends on, reproduced exactly:
// str.strip() whitespace, repr(float), str() of JSON scalars and transformers' tojson filter.
// Internal to the chat template renderer (and its tests).
//
// Contract:
// - python_strip: removes leading/trailing code points for which Python's str.isspace() is true
//   (ASCII \t\n\v\f\r, \x1c-\x1f and space, U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029,
//   U+202F, U+205F, U+3000). Bytes that are not valid UTF-8 count as non-space.
// - python_float_repr(d): repr() of a Python float ("1.0", "1e-07", "1e+16", "-0.0", "inf").
// - python_tojson_element: json.dumps(x, ensure_ascii=False) with separators ", " and ": ",
//   key order kept, floats as repr (infinity as "Infinity"), strings escaped like json.dumps.
// - python_str_element: what Jinja's `|string` prints for a JSON value: strings raw, True/False/
//   None, integers exactly, floats as repr; objects and arrays as tojson (the template never
//   asks |string of them).
#pragma once

#include <simdjson.h>

#include <string>
#include <string_view>

namespace ninfer::core {

std::string_view python_strip(std::string_view text);
std::string python_float_repr(double value);
void python_tojson_element(std::string& out, simdjson::dom::element value);
void python_str_element(std::string& out, simdjson::dom::element value);

} // namespace ninfer::core
