// ninfer::core - byte-level BPE tokenizer read from a Hugging Face `tokenizer.json`.
//
// Contract:
// - Tokenizer::from_json(tokenizer_json, tokenizer_config_json) builds the tokenizer from the
//   files' text. Supported (else ninfer::Error "tokenizer: unsupported ..."): model BPE (no
//   byte fallback, no subword prefix/suffix), normalizer null / NFC / Sequence of those,
//   pre-tokenizer Split (Regex or String, behavior Isolated or Removed) / ByteLevel / Sequence,
//   decoder ByteLevel. The Split regex is taken from the file and compiled with PCRE2 (UTF+UCP);
//   `\s` means Unicode White_Space, as in the Oniguruma engine Hugging Face uses.
//   Entries of tokenizer_config.json `added_tokens_decoder` absent from tokenizer.json
//   `added_tokens` are added (Qwen3.5 ids 248070..248076 exist only there); "" = no config.
// - from_file(path) reads tokenizer.json and, if present, tokenizer_config.json beside it. From an
//   artifact: from_json(resource("text", "tokenizer.json")->text(), the tokenizer_config.json
//   resource's text or ""), as ninferctl tokenize does.
// - encode(text) = Hugging Face `encode(text, add_special_tokens=False)`: added tokens found in
//   the text first (leftmost-longest, lstrip/rstrip/single_word/normalized as HF), the rest NFC
//   normalised, pre-tokenised, byte-level mapped and merged by rank. Nothing is added around the
//   text (no BOS/EOS). Ill-formed UTF-8 bytes are first replaced by U+FFFD (one per maximal
//   subpart), as decoding them with errors="replace" would. With split_special_tokens, text of
//   special added tokens is encoded as ordinary text (HF `split_special_tokens=True`).
// - decode(ids) = HF `decode(ids)` without clean-up: token bytes concatenated, ill-formed UTF-8
//   replaced by U+FFFD. Ids the tokenizer does not know (embedding padding rows, negative ids)
//   contribute nothing, as in HF. decode(encode(x)) == NFC(x) for valid UTF-8 x.
// - Special token ids are looked up by text: token_id("<|im_end|>"); never hard-code ids.
// - Thread safety: after construction all methods are const and may be called from any thread
//   concurrently (the per-word merge cache is internally locked).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer::core {

using TokenId = int32_t;

struct AddedToken {
    std::string content;
    TokenId id = -1;
    bool special = false;
    bool lstrip = false;
    bool rstrip = false;
    bool normalized = false;
    bool single_word = false;
};

struct EncodeOptions {
    bool split_special_tokens = false; // true: "<|im_end|>" in the text is plain text
};

class Tokenizer {
  public:
    static std::unique_ptr<Tokenizer> from_json(std::string_view tokenizer_json,
                                                std::string_view tokenizer_config_json = {});
    static std::unique_ptr<Tokenizer> from_file(const std::string& tokenizer_json_path);
    ~Tokenizer();
    Tokenizer(const Tokenizer&) = delete;
    Tokenizer& operator=(const Tokenizer&) = delete;

    std::vector<TokenId> encode(std::string_view text, const EncodeOptions& options = {}) const;
    std::string decode(std::span<const TokenId> ids, bool skip_special_tokens = false) const;

    // The raw bytes an id decodes to (possibly a partial UTF-8 sequence); "" for unknown ids.
    std::string_view token_bytes(TokenId id) const;
    // The token's string as stored in tokenizer.json (byte-level form for vocab pieces).
    std::string_view token_piece(TokenId id) const;
    // Id of an added token's content, else of a vocab piece; nullopt if neither.
    std::optional<TokenId> find_token(std::string_view content) const;
    TokenId token_id(std::string_view content) const; // throws "tokenizer: no token ..."

    bool is_known(TokenId id) const;
    bool is_special(TokenId id) const; // an added token with special=true
    size_t n_ids() const;              // addressable ids: highest known id + 1
    const std::vector<AddedToken>& added_tokens() const;
    std::vector<std::string> split_patterns() const; // the pre-tokenizer regexes, as in the file

    struct Impl;

  private:
    explicit Tokenizer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

} // namespace ninfer::core
