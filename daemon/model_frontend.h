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
// - With images or video in the conversation, prepare also decodes them (MediaInput::decode, on
//   this pool thread; 400 "modality_not_supported" when the artifact has no vision tower), expands
//   the template's placeholders to one pad token per merged vision token (core/media/
//   placeholders.h) and records each item's span of pad tokens; pad tokens the client typed
//   into its text are refused (400), since they would take another item's rows.
// - token_index() is the tokenizer's vocabulary as the grammar engine reads it (a byte trie; end
//   ids = stop_token_ids()), built once on first use (~0.1-1 s for a 151k vocabulary: call it off
//   the loop thread) and shared by every constrained request.
// - assistant_marker() is the chat template's assistant-turn opener as token ids (the engine's
//   assistant-boundary checkpoint, core::Engine::set_assistant_marker).
// Thread safety: const methods may run on any thread at once.
#pragma once

#include "core/artifact/artifact.h"
#include "core/frontend/output_parser.h"
#include "core/frontend/tokenizer.h"
#include "core/grammar/token_index.h"
#include "daemon/chat_request.h"
#include "daemon/media_input.h"

#include <memory>
#include <mutex>
#include <vector>

namespace ninfer::daemon {

struct PreparedPrompt {
    std::vector<int32_t> tokens;
    std::vector<core::VisionInput> media;      // the request's images and videos, decoded
    std::vector<core::MediaSpan> media_spans;  // where each one's placeholder tokens sit
    core::OutputParserOptions parser_options;
    uint32_t reasoning_budget = 0;               // 0 = none (thinking_budget with thinking on)
    std::vector<int32_t> reasoning_close_tokens; // "\n</think>\n\n"
};

class ModelFrontend {
  public:
    static std::shared_ptr<ModelFrontend> from_artifact(const core::Artifact& artifact);
    explicit ModelFrontend(std::unique_ptr<core::Tokenizer> tokenizer);
    PreparedPrompt prepare(const ChatRequest& request, bool default_thinking) const;
    // The artifact's media path (daemon/media_input.h); null = none set (tools, tests).
    void set_media(std::shared_ptr<const MediaInput> media) { media_ = std::move(media); }
    const MediaInput* media() const { return media_.get(); }
    const core::Tokenizer& tokenizer() const { return *tokenizer_; }
    const std::vector<int32_t>& stop_token_ids() const { return stop_token_ids_; }
    std::vector<int32_t> assistant_marker() const;
    std::shared_ptr<const core::grammar::TokenIndex> token_index() const;
    // The artifact's generation_config.json sampling values (empty without one).
    const core::SamplingDefaults& sampling_defaults() const { return sampling_defaults_; }

  private:
    std::vector<core::MediaSpan> media_spans(const std::vector<int32_t>& tokens,
                                             const std::vector<core::VisionInput>& media) const;
    std::unique_ptr<core::Tokenizer> tokenizer_;
    std::vector<int32_t> stop_token_ids_;
    core::SamplingDefaults sampling_defaults_;
    std::shared_ptr<const MediaInput> media_;
    mutable std::once_flag token_index_once_;
    mutable std::shared_ptr<const core::grammar::TokenIndex> token_index_;
};

} // namespace ninfer::daemon
