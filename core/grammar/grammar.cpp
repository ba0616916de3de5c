// ninfer::core::grammar - Grammar factories (through GBNF) and the per-tokenizer mask tables.
#include "core/grammar/grammar.h"

#include "core/grammar/grammar_program.h"
#include "core/grammar/token_masks.h"

#include <mutex>

namespace ninfer::core::grammar {

struct Grammar::Impl {
    std::mutex mutex;
    std::vector<std::pair<std::weak_ptr<const TokenIndex>, std::shared_ptr<TokenMaskCache>>> masks;
};

Grammar::Grammar(std::string gbnf, std::unique_ptr<Program> program)
    : gbnf_(std::move(gbnf)), program_(std::move(program)), impl_(std::make_unique<Impl>()) {}

Grammar::~Grammar() = default;

size_t Grammar::memory_bytes() const {
    size_t bytes = program_->memory_bytes() + gbnf_.size();
    std::lock_guard lock(impl_->mutex);
    for (const auto& [index, cache] : impl_->masks) bytes += cache->memory_bytes();
    return bytes;
}

std::shared_ptr<TokenMaskCache> Grammar::masks_for(const std::shared_ptr<const TokenIndex>& index) const {
    std::lock_guard lock(impl_->mutex);
    std::erase_if(impl_->masks, [](const auto& entry) { return entry.first.expired(); });
    for (const auto& [weak, cache] : impl_->masks)
        if (weak.lock() == index) return cache;
    auto cache = std::make_shared<TokenMaskCache>(*program_, index);
    impl_->masks.emplace_back(index, cache);
    return cache;
}

std::shared_ptr<const Grammar> Grammar::from_gbnf(std::string_view text, const GrammarLimits& limits) {
    const CompileClock clock(limits);
    auto program = std::make_unique<Program>(lower(read_gbnf(text, clock), limits, clock));
    return std::shared_ptr<const Grammar>(new Grammar(std::string(text), std::move(program)));
}

std::shared_ptr<const Grammar> Grammar::from_json_schema(std::string_view schema_json, const GrammarLimits& limits) {
    return from_gbnf(json_schema_to_gbnf(schema_json, limits), limits);
}

std::shared_ptr<const Grammar> Grammar::json_object(const GrammarLimits& limits) {
    return from_json_schema(R"({"type":"object"})", limits);
}

std::shared_ptr<const Grammar> Grammar::tool_calls(const std::vector<ToolSpec>& tools, const ToolChoice& choice,
                                                   const GrammarLimits& limits) {
    return from_gbnf(tool_calls_to_gbnf(tools, choice, limits), limits);
}

} // namespace ninfer::core::grammar
