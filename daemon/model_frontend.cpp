// ninfer::daemon - model frontend: artifact tokenizer, prompt rendering, parser options.
#include "daemon/model_frontend.h"

#include "core/frontend/chat_template.h"
#include "core/media/placeholders.h"
#include "core/util/error.h"
#include "daemon/api_error.h"

#include <algorithm>
#include <random>

namespace ninfer::daemon {
namespace {

std::string random_hex(size_t n) {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (size_t i = 0; i < n; ++i) out += digits[rng() & 15];
    return out;
}

std::string tool_name_of(const std::string& tool_json) {
    auto sigs = core::tool_signatures_from_json({tool_json});
    return sigs.empty() ? "" : sigs[0].name;
}

} // namespace

std::shared_ptr<ModelFrontend> ModelFrontend::from_artifact(const core::Artifact& artifact) {
    const core::ArtifactResource* tok = artifact.resource("text", "tokenizer.json");
    if (!tok) throw Error("frontend: the artifact has no text tokenizer.json resource");
    const core::ArtifactResource* cfg = artifact.resource("text", "tokenizer_config.json");
    auto frontend = std::make_shared<ModelFrontend>(core::Tokenizer::from_json(tok->text(), cfg ? cfg->text() : ""));
    if (const core::ArtifactResource* gen = artifact.resource("text", "generation_config.json"))
        frontend->sampling_defaults_ = core::parse_generation_config(gen->text()).sampling;
    return frontend;
}

ModelFrontend::ModelFrontend(std::unique_ptr<core::Tokenizer> tokenizer) : tokenizer_(std::move(tokenizer)) {
    for (const char* text : {"<|im_end|>", "<|endoftext|>"})
        if (auto id = tokenizer_->find_token(text)) stop_token_ids_.push_back(*id);
    if (stop_token_ids_.empty()) throw Error("frontend: the tokenizer has no <|im_end|> or <|endoftext|> token");
}

std::vector<core::MediaSpan> ModelFrontend::media_spans(const std::vector<int32_t>& tokens,
                                                        const std::vector<core::VisionInput>& media) const {
    const auto image_pad = tokenizer_->find_token("<|image_pad|>");
    const auto video_pad = tokenizer_->find_token("<|video_pad|>");
    auto is_pad = [&](int32_t t) { return (image_pad && t == int32_t(*image_pad)) || (video_pad && t == int32_t(*video_pad)); };
    size_t n_pads = 0, want = 0;
    for (int32_t t : tokens) n_pads += is_pad(t);
    for (const core::VisionInput& item : media) want += item.merged_tokens();
    if (n_pads != want)
        throw bad_request("the prompt holds " + std::to_string(n_pads) + " image/video pad tokens where its media take " +
                              std::to_string(want) + " (pad tokens written into the text are refused)",
                          "messages", "invalid_media");
    std::vector<core::MediaSpan> spans;
    size_t at = 0;
    for (const core::VisionInput& item : media) {
        while (!is_pad(tokens[at])) ++at; // the counts agree: every item's pads are there
        core::MediaSpan span;
        span.position = uint32_t(at);
        for (size_t counted = 0; counted < item.merged_tokens(); ++at) counted += is_pad(tokens[at]);
        span.n_tokens = uint32_t(at - span.position);
        span.digest = item.digest;
        spans.push_back(span);
    }
    return spans;
}

std::vector<int32_t> ModelFrontend::assistant_marker() const {
    std::vector<int32_t> ids;
    for (auto id : tokenizer_->encode(core::assistant_turn_opener())) ids.push_back(int32_t(id));
    return ids;
}

std::shared_ptr<const core::grammar::TokenIndex> ModelFrontend::token_index() const {
    std::call_once(token_index_once_,
                   [this] { token_index_ = core::grammar::TokenIndex::from_tokenizer(*tokenizer_, stop_token_ids_); });
    return token_index_;
}

PreparedPrompt ModelFrontend::prepare(const ChatRequest& request, bool default_thinking) const {
    core::ChatConversation conversation = request.conversation;
    if (request.tool_choice == ToolChoice::None) {
        conversation.tools_json.clear();
    } else if (request.tool_choice == ToolChoice::Named) {
        std::vector<std::string> kept;
        for (const std::string& t : conversation.tools_json)
            if (tool_name_of(t) == request.tool_choice_name) kept.push_back(t);
        if (kept.empty())
            throw bad_request("tool_choice names '" + request.tool_choice_name + "', which is not in 'tools'",
                              "tool_choice");
        conversation.tools_json = std::move(kept);
    }
    core::ChatRenderOptions options;
    options.enable_thinking = request.enable_thinking.value_or(default_thinking);
    options.preserve_thinking = request.preserve_thinking;
    PreparedPrompt out;
    if (has_media(conversation)) {
        if (!media_ || !media_->takes_media())
            throw bad_request("this model takes no images or video (its artifact has no vision tower)", "messages",
                              "modality_not_supported");
        out.media = media_->decode(conversation);
    }
    std::string text;
    try {
        text = core::render_chat_prompt(conversation, options);
        out.parser_options.tools = core::tool_signatures_from_json(conversation.tools_json);
        if (!out.media.empty()) text = core::expand_vision_placeholders(text, out.media);
    } catch (const Error& e) {
        throw api_error_of(error_info(e), "messages");
    }
    out.tokens = tokenizer_->encode(text);
    out.media_spans = media_spans(out.tokens, out.media);
    out.parser_options.starts_in_reasoning = options.enable_thinking;
    out.parser_options.stop_strings = request.stop;
    out.parser_options.call_id_prefix = "call_" + random_hex(12);
    if (options.enable_thinking && request.thinking_budget) {
        out.reasoning_budget = std::max<uint32_t>(1, *request.thinking_budget);
        out.reasoning_close_tokens = tokenizer_->encode("\n</think>\n\n");
    }
    return out;
}

} // namespace ninfer::daemon
