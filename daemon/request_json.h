// ninfer::daemon - JSON field readers shared by the request parsers of every generation API
// (OpenAI chat in chat_request.cpp, Responses, Anthropic Messages, completions).
//
// Contract: each reader takes a simdjson element and the parameter's name as the client wrote it
// and returns the typed value, or throws ApiError 400 whose `param` names the field (`fail`).
// A reader given a Field (what `object["key"]` returns) answers 400 "'param' is required" when
// the member is absent: never let simdjson's own "field does not exist" exception escape, which
// the route's catch-all would turn into a 500.
// parse_sampling reads the OpenAI-named sampling members of a body (temperature, top_p, top_k,
// min_p, penalties, seed, logit_bias) into sampling_given and resolves r.sampling over the
// neutral fallback; the session resolves again over the server's defaults.
// parse_stop / parse_tools / parse_tool_choice read the OpenAI-shaped members into a ChatRequest
// (parse_stop names its member: Anthropic calls it stop_sequences).
// Defined in request_json.cpp (used by the other APIs only):
// - parse_json_object(parser, body): the body's root object, or 400 for bad JSON / not an object.
// - positive_count(e, param): an integer in 1..INT32_MAX, else 400.
// - media_part(kind, url, param): an Image/Video content part with its source URL, checked by
//   core::media_url_check (remote http(s) URLs and other schemes: 400 naming param, code
//   "invalid_media_url"); the bytes are read and decoded later, off the loop thread.
// - parse_flat_tools(tools, schema_key, r): tools written flat ({name, description, <schema_key>},
//   as Anthropic and Responses do) rewrapped as OpenAI chat tools and read by parse_tools;
//   a {type:"namespace", tools:[...]} contributes its tools (Codex's MCP groups); a tool for
//   which is_callable(tool) is false (web_search, local_shell, server tools) is dropped and
//   recorded in r.ignored_tools, never a 400. A tool's `strict` is kept.
// Thread safety: pure.
#pragma once

#include "daemon/chat_request.h"

#include <simdjson.h>

#include <functional>
#include <string>
#include <string_view>

namespace ninfer::daemon::request_json {

using Field = simdjson::simdjson_result<simdjson::dom::element>; // object["key"]

[[noreturn]] void fail(const std::string& param, const std::string& message, const std::string& code);
simdjson::dom::element required(Field field, const std::string& param);
double number_in(simdjson::dom::element e, const std::string& param, double lo, double hi);
int64_t integer_of(simdjson::dom::element e, const std::string& param);
bool bool_of(simdjson::dom::element e, const std::string& param);
std::string string_of(simdjson::dom::element e, const std::string& param);
std::string string_of(Field field, const std::string& param);
std::string tool_name_of(Field field, const std::string& param); // 1..64 of [A-Za-z0-9_.-]
void parse_sampling(simdjson::dom::object body, ChatRequest& r);
void parse_stop(simdjson::dom::element stop, const std::string& param, ChatRequest& r);
void parse_tools(simdjson::dom::element tools, ChatRequest& r);
void parse_tool_choice(simdjson::dom::element choice, ChatRequest& r);
// Structured output (output_format.cpp): response_format, llama.cpp's json_schema and grammar
// members; parse_text_format reads the Responses API's text.format object. Two of them at once
// are a 400 naming both; an unknown format type is 400 response_format_not_supported.
void parse_output_format(simdjson::dom::object body, ChatRequest& r);
void parse_text_format(simdjson::dom::element format, ChatRequest& r);

simdjson::dom::object parse_json_object(simdjson::dom::parser& parser, const simdjson::padded_string& body);
uint32_t positive_count(simdjson::dom::element e, const std::string& param);
core::ContentPart media_part(core::ContentPart::Kind kind, std::string url, const std::string& param);
void parse_flat_tools(simdjson::dom::element tools, std::string_view schema_key, ChatRequest& r,
                      const std::function<bool(simdjson::dom::element tool)>& is_callable);

} // namespace ninfer::daemon::request_json
