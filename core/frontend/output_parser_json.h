// ninfer::core - JSON string escaping for streamed tool-call arguments. Internal to the output
// parser. Unlike JsonWriter it never throws: bytes that are not valid UTF-8 pass through
// unchanged (a stream may be cut anywhere; garbage in must not crash the server).
#pragma once

#include <string>
#include <string_view>

namespace ninfer::core {

void append_json_string_body(std::string& out, std::string_view bytes); // no quotes
std::string json_string_of(std::string_view bytes);                      // with quotes

} // namespace ninfer::core
