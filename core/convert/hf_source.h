// ninfer::core - the non-weight half of a Hugging Face checkpoint directory: config.json,
// generation_config.json, tokenizer files and chat template, and the tokenizer checks.
//
// Contract:
// - read_hf_source(dir, tokenizer_file) accepts the architectures Qwen3_5ForConditionalGeneration,
//   Qwen3_5MoeForConditionalGeneration (text settings in text_config, vision in vision_config),
//   Qwen3_5ForCausalLM and Qwen3_5MoeForCausalLM; anything else is refused naming the supported
//   ones. Shapes are parsed by ModelConfig::from_json (nothing model-specific is hard-coded).
// - tokenizer.json comes from `tokenizer_file` when given, else dir/tokenizer.json; neither is a
//   clear error. The chat template is dir/chat_template.jinja, else tokenizer_config.json's
//   chat_template. A missing generation_config.json is synthesised from the tokenizer's
//   eos_token (found by its text).
// - check_token_ids refuses any id the artifact would carry that is not below vocab_size: every
//   token of tokenizer.json (vocab and added tokens), added_tokens_decoder of
//   tokenizer_config.json, its bos/eos/pad/unk tokens (looked up by text), and the ids of
//   generation_config.json (eos_token_id an int or a list).
// Errors: ninfer::Error("convert: ...").
#pragma once

#include "core/convert/emit.h"
#include "core/convert/plan.h"
#include "core/model/config.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ninfer::core {

struct HfSource {
    std::string architecture;
    bool multimodal = false;
    ModelConfig config;
    uint32_t mtp_num_hidden_layers = 0;
    bool has_vision_config = false;
    VisionConfig vision;
    TextResources resources;
    std::vector<std::pair<std::string, std::string>> vision_resources; // role -> bytes
};

HfSource read_hf_source(const std::string& dir, const std::string& tokenizer_file);

struct TokenText {
    std::string text;
    uint64_t id = 0;
};
// Added tokens of tokenizer.json plus tokenizer_config.json's added_tokens_decoder.
std::vector<TokenText> special_tokens(std::string_view tokenizer_json, std::string_view tokenizer_config_json);
std::optional<uint64_t> find_token_id(const std::vector<TokenText>& tokens, std::string_view text);

void check_token_ids(uint64_t vocab_size, const TextResources& resources);

// generation_config.json text stopping on the given ids.
std::string generation_config_for(const std::vector<uint64_t>& eos_ids, std::optional<uint64_t> pad_id);
// The chat_template string of a tokenizer_config.json ("" if absent).
std::string chat_template_of(std::string_view tokenizer_config_json);

std::string read_file_text(const std::string& path); // throws "convert: cannot read PATH: ..."

} // namespace ninfer::core
