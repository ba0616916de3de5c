// ninfer::daemon - the model's text frontend as the HTTP layer uses it: tokenizer, chat template,
// stop token ids, and the output-parser options of one request.
//
// Contract:
// - from_artifact(artifact) reads the text component's tokenizer.json (+ tokenizer_config.json)
//   and looks up the end-of-turn ids (<|im_end|>, <|endoftext|>) by text, and the sampling
//   defaults of text/generation_config.json when the artifact has one; throws ninfer::Error.
// - prepare(request, default_thinking) renders the chat template and tokenizes (CPU work: run it
//   off the loop thread). Template errors become ApiError 400. The returned parser options say
//   whether the prompt opened <think>, which tools the parser may recognise (none for
//   tool_choice none; only the named one for a named choice) and the stop strings; with thinking
//   on and a thinking_budget, the budget and the ids that close the reasoning.
// - assistant_marker() is the chat template's assistant-turn opener as token ids (the engine's
//   assistant-boundary checkpoint, core::Engine::set_assistant_marker).
// Thread safety: const methods may run on any thread at once.
#pragma once

#include "core/artifact/artifact.h"
#include "core/frontend/output_parser.h"
#include "core/frontend/tokenizer.h"
#include "daemon/chat_request.h"

#include <memory>
#include <vector>

namespace ninfer::daemon {

struct PreparedPrompt {
    std::vector<int32_t> tokens;
    core::OutputParserOptions parser_options;
    uint32_t reasoning_budget = 0;               // 0 = none (thinking_budget with thinking on)
    std::vector<int32_t> reasoning_close_tokens; // "\n</think>\n\n"
};

class ModelFrontend {
  public:
    static std::shared_ptr<ModelFrontend> from_artifact(const core::Artifact& artifact);
    explicit ModelFrontend(std::unique_ptr<core::Tokenizer> tokenizer);
    PreparedPrompt prepare(const ChatRequest& request, bool default_thinking) const;
    const core::Tokenizer& tokenizer() const { return *tokenizer_; }
    const std::vector<int32_t>& stop_token_ids() const { return stop_token_ids_; }
    std::vector<int32_t> assistant_marker() const;
    // The artifact's generation_config.json sampling values (empty without one).
    const core::SamplingDefaults& sampling_defaults() const { return sampling_defaults_; }

  private:
    std::unique_ptr<core::Tokenizer> tokenizer_;
    std::vector<int32_t> stop_token_ids_;
    core::SamplingDefaults sampling_defaults_;
};

} // namespace ninfer::daemon
