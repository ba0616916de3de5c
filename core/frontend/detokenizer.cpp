// ninfer::core - incremental detokenizer: emit only UTF-8 that later bytes cannot change.
#include "core/frontend/detokenizer.h"

#include "core/frontend/unicode_utf8.h"

namespace ninfer::core {

std::string Detokenizer::push(TokenId id) {
    if (skip_special_tokens_ && tokenizer_->is_special(id)) return {};
    pending_.append(tokenizer_->token_bytes(id));
    size_t stable = utf8_scan_stable(pending_);
    std::string out;
    append_utf8_lossy(out, std::string_view(pending_).substr(0, stable));
    pending_.erase(0, stable);
    return out;
}

std::string Detokenizer::finish() {
    std::string out = utf8_lossy(pending_);
    pending_.clear();
    return out;
}

} // namespace ninfer::core
