// ninfer::core - the streaming output parser: generated text in, SSE-ready events out.
//
// Contract:
// - feed(text, events) consumes the next piece of generated text (any split, even inside
//   markup) and appends events; finish(cause, events) flushes what was held back and appends one
//   Finish event. Pieces may split anywhere; the events' concatenated texts do not depend on how.
// - Reasoning: with starts_in_reasoning (the prompt opened <think>), text up to </think> is
//   ReasoningDelta; otherwise a leading <think> opens reasoning. The newlines around </think>
//   (and after <think>) are markup. Content after it is ContentDelta.
// - Stop strings apply to the content channel (after </think>), before tool-call recognition:
//   a match ends the stream (stopped() true; later input is ignored); the stop string is markup.
// - Tool calls (only when options.tools is not empty): Qwen XML
//   <tool_call>\n<function=NAME>\n<parameter=K>\nV\n</parameter>\n</function>\n</tool_call>.
//   ToolCallStart {tool_index, tool_call_id, text=NAME} is emitted as soon as the name is read
//   and known to be a declared tool; then ToolCallArgumentsDelta pieces whose concatenation is
//   one JSON object (string-typed values stream as they arrive; other values are typed by the
//   tool's JSON schema: integer, number, boolean, null, object, array, falling back to a JSON
//   string when the text does not fit); ToolCallEnd closes it. One newline after <parameter=K>
//   and one before </parameter> belong to the markup.
// - Malformed calls never throw: before the name is accepted (bad structure, undeclared tool)
//   the text degrades to content; after it, the call is closed with the arguments read so far
//   (still valid JSON) and the remaining text is parsed as content.
// - Markup events carry the raw bytes of recognised markup (clients ignore them): in event order,
//   ReasoningDelta + ContentDelta + Markup texts concatenate to the input (up to and including a
//   matched stop string). Adjacent events of one kind are merged within one call.
// - Finish.text is the finish reason: "stop" (end of sequence or stop string; stop_string set),
//   "length", or "tool_calls" (end of sequence after at least one tool call).
// Thread safety: one parser per generation.
#pragma once

#include "core/frontend/stop_strings.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ninfer::core {

// JSON schema types of one tool parameter, as a bit set (0 = unknown, treated as string).
enum ParamTypeBits : uint8_t {
    kParamString = 1, kParamInteger = 2, kParamNumber = 4, kParamBoolean = 8,
    kParamObject = 16, kParamArray = 32, kParamNull = 64,
};

struct ToolParam {
    std::string name;
    uint8_t types = 0;
};

struct ToolSignature {
    std::string name;
    std::vector<ToolParam> params;
    uint8_t param_types(std::string_view param) const; // 0 if undeclared
};

// Reads OpenAI ({"type":"function","function":{name, parameters}}), flat ({name, parameters}) or
// Anthropic ({name, input_schema}) tool objects; throws ninfer::Error on invalid JSON or a tool
// without a name.
std::vector<ToolSignature> tool_signatures_from_json(const std::vector<std::string>& tools_json);

// A parameter's text converted to JSON by its schema types (what ToolCallArgumentsDelta carries).
std::string typed_param_json(std::string_view text, uint8_t types);

struct OutputEvent {
    enum class Kind { ReasoningDelta, ContentDelta, ToolCallStart, ToolCallArgumentsDelta, ToolCallEnd, Markup, Finish };
    Kind kind = Kind::ContentDelta;
    std::string text;          // delta, markup bytes, tool name (ToolCallStart), finish reason
    int tool_index = -1;       // ToolCall* events
    std::string tool_call_id;  // ToolCallStart
    std::string stop_string;   // Finish, when a stop string ended the stream
};

struct OutputParserOptions {
    bool starts_in_reasoning = true;
    std::vector<ToolSignature> tools;       // empty: tool calls are plain content
    std::vector<std::string> stop_strings;  // content channel
    std::string call_id_prefix = "call_";   // ids are prefix + index; make it unique per response
};

enum class GenerationEnd { EndOfSequence, Length };

class OutputParser {
  public:
    explicit OutputParser(OutputParserOptions options);
    ~OutputParser();
    OutputParser(const OutputParser&) = delete;
    OutputParser& operator=(const OutputParser&) = delete;

    void feed(std::string_view text, std::vector<OutputEvent>& events);
    void finish(GenerationEnd end, std::vector<OutputEvent>& events);

    bool stopped() const;    // a stop string matched: end generation, then call finish
    int tool_calls() const;  // calls started so far

    struct Impl;

  private:
    std::unique_ptr<Impl> impl_;
};

} // namespace ninfer::core
