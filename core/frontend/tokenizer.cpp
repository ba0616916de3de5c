// ninfer::core - Tokenizer: loading tokenizer.json, encode (added tokens, NFC, pre-tokenize, BPE), decode.
#include "core/frontend/tokenizer.h"

#include "core/frontend/tokenizer_added.h"
#include "core/frontend/tokenizer_bpe.h"
#include "core/frontend/tokenizer_pretokenize.h"
#include "core/frontend/unicode_nfc.h"
#include "core/frontend/unicode_utf8.h"
#include "core/util/error.h"
#include "core/util/mapped_file.h"

#include <simdjson.h>

#include <unistd.h>

#include <mutex>
#include <unordered_map>

namespace ninfer::core {

namespace {

namespace dom = simdjson::dom;

struct TransparentHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, TransparentHash, std::equal_to<>>;

constexpr size_t kWordCacheMaxEntries = 1 << 18;
constexpr size_t kWordCacheMinBytes = 4;
constexpr size_t kWordCacheMaxBytes = 256;

// GPT-2's bytes_to_unicode: printable bytes stand for themselves, the rest map to 256 + n.
std::array<char32_t, 256> byte_level_chars() {
    std::array<char32_t, 256> map{};
    char32_t next = 256;
    for (unsigned b = 0; b < 256; ++b) {
        bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
        map[b] = printable ? b : next++;
    }
    return map;
}

// HF ByteLevel decoder on one token: every char maps back to a byte, or the token is kept as is.
std::string byte_level_decode(std::string_view piece, const std::unordered_map<char32_t, uint8_t>& inverse) {
    std::string out;
    size_t pos = 0;
    while (pos < piece.size()) {
        auto it = inverse.find(utf8_next(piece, pos));
        if (it == inverse.end()) return std::string(piece);
        out.push_back(static_cast<char>(it->second));
    }
    return out;
}

std::string_view type_of(dom::element e) {
    std::string_view type;
    if (e.is_object() && e["type"].get(type) == simdjson::SUCCESS) return type;
    return "";
}

// A typed member, or "tokenizer: malformed tokenizer.json: KEY".
template <typename T, typename Result>
T required(Result&& result, const char* key) {
    T value{};
    if (std::forward<Result>(result).get(value) != simdjson::SUCCESS)
        throw Error(std::string("tokenizer: malformed tokenizer.json: bad or missing '") + key + "'");
    return value;
}

bool bool_or(dom::object o, const char* key, bool fallback) {
    bool value = fallback;
    if (o[key].get(value) != simdjson::SUCCESS) return fallback;
    return value;
}

// An added token as tokenizer.json `added_tokens` and tokenizer_config.json
// `added_tokens_decoder` write it; normalized defaults to !special, as in HF's AddedToken.
AddedToken parse_added_token(dom::object t, TokenId id) {
    AddedToken token;
    token.id = id;
    token.content = std::string(required<std::string_view>(t["content"], "added token content"));
    token.special = bool_or(t, "special", false);
    token.lstrip = bool_or(t, "lstrip", false);
    token.rstrip = bool_or(t, "rstrip", false);
    token.single_word = bool_or(t, "single_word", false);
    token.normalized = bool_or(t, "normalized", !token.special);
    return token;
}

std::string_view view_of(const MappedFile& file) {
    return {reinterpret_cast<const char*>(file.data()), size_t(file.size())};
}

} // namespace

struct Tokenizer::Impl {
    std::vector<std::string> pieces; // id -> string as in the file ("" if unknown)
    std::vector<std::string> bytes;  // id -> decoded bytes
    std::vector<uint8_t> known;
    std::vector<uint8_t> special;
    StringMap<TokenId> vocab;
    StringMap<TokenId> added_by_content;
    std::vector<AddedToken> added;
    AddedTokenMatcher raw_matcher;        // normalized=false tokens, found before normalising
    AddedTokenMatcher normalized_matcher; // normalized=true tokens, found in normalised text
    bool nfc = false;
    bool ignore_merges = false;
    std::array<char32_t, 256> byte_chars = byte_level_chars();
    PreTokenizer pre_tokenizer;
    BpeMerger merger;
    mutable std::mutex cache_mutex;
    mutable StringMap<std::vector<TokenId>> word_cache;

    void set_token(TokenId id, std::string piece) {
        if (id < 0) throw Error("tokenizer: negative token id for '" + piece + "'");
        if (size_t(id) >= pieces.size()) {
            pieces.resize(id + 1);
            known.resize(id + 1, 0);
            special.resize(id + 1, 0);
        }
        pieces[id] = std::move(piece);
        known[id] = 1;
    }
    TokenId vocab_id(std::string_view piece) const {
        auto it = vocab.find(piece);
        if (it == vocab.end()) throw Error("tokenizer: merge uses '" + std::string(piece) + "', not in the vocabulary");
        return it->second;
    }

    void load_model(dom::element model);
    void load_normalizer(dom::element e);
    void load_pre_tokenizer(dom::element e);
    void add_token(AddedToken token);
    void finish();

    void encode_word(std::string_view word, std::vector<TokenId>& out) const;
    void encode_plain(std::string_view normalized, std::vector<TokenId>& out) const;
    void encode_section(std::string_view raw, std::vector<TokenId>& out, bool split_special) const;
};

void Tokenizer::Impl::load_model(dom::element model) {
    if (type_of(model) != "BPE") throw Error("tokenizer: unsupported model type '" + std::string(type_of(model)) + "'");
    if (bool_or(model, "byte_fallback", false)) throw Error("tokenizer: unsupported BPE byte_fallback");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
        std::string_view affix;
        if (model[key].get(affix) == simdjson::SUCCESS && !affix.empty())
            throw Error(std::string("tokenizer: unsupported BPE ") + key);
    }
    ignore_merges = bool_or(model, "ignore_merges", false);
    auto vocab_object = required<dom::object>(model["vocab"], "model.vocab");
    for (auto [piece, value] : vocab_object) {
        TokenId id = TokenId(required<int64_t>(value, "model.vocab"));
        vocab.emplace(std::string(piece), id);
        set_token(id, std::string(piece));
    }
    for (unsigned b = 0; b < 256; ++b) {
        std::string ch;
        append_utf8(ch, byte_chars[b]);
        if (auto it = vocab.find(ch); it != vocab.end()) merger.set_byte_token(uint8_t(b), it->second);
    }
    auto merges = required<dom::array>(model["merges"], "model.merges");
    for (dom::element merge : merges) {
        std::string_view left, right;
        if (merge.is_string()) {
            auto text = required<std::string_view>(merge, "model.merges");
            size_t space = text.find(' ');
            if (space == std::string_view::npos) throw Error("tokenizer: malformed merge '" + std::string(text) + "'");
            left = text.substr(0, space);
            right = text.substr(space + 1);
        } else {
            auto pair = required<dom::array>(merge, "model.merges");
            left = required<std::string_view>(pair.at(0), "model.merges");
            right = required<std::string_view>(pair.at(1), "model.merges");
        }
        merger.add_merge(vocab_id(left), vocab_id(right), vocab_id(std::string(left) + std::string(right)));
    }
}

void Tokenizer::Impl::load_normalizer(dom::element e) {
    if (e.is_null()) return;
    std::string_view type = type_of(e);
    if (type == "NFC") {
        nfc = true;
    } else if (type == "Sequence") {
        auto inner_list = required<dom::array>(e["normalizers"], "normalizers");
        for (dom::element inner : inner_list)
            load_normalizer(inner);
    } else {
        throw Error("tokenizer: unsupported normalizer '" + std::string(type) + "'");
    }
}

void Tokenizer::Impl::load_pre_tokenizer(dom::element e) {
    if (e.is_null()) return;
    std::string_view type = type_of(e);
    if (type == "Sequence") {
        auto inner_list = required<dom::array>(e["pretokenizers"], "pretokenizers");
        for (dom::element inner : inner_list)
            load_pre_tokenizer(inner);
    } else if (type == "ByteLevel") {
        pre_tokenizer.add_byte_level(bool_or(e, "add_prefix_space", false), bool_or(e, "use_regex", true));
    } else if (type == "Split") {
        auto behavior = required<std::string_view>(e["behavior"], "Split.behavior");
        if (bool_or(e, "invert", false)) throw Error("tokenizer: unsupported Split invert=true");
        SplitBehavior how = SplitBehavior::Isolated;
        if (behavior == "Removed") how = SplitBehavior::Removed;
        else if (behavior != "Isolated") throw Error("tokenizer: unsupported Split behavior '" + std::string(behavior) + "'");
        auto pattern = required<dom::object>(e["pattern"], "Split.pattern");
        std::string_view text;
        if (pattern["Regex"].get(text) == simdjson::SUCCESS) pre_tokenizer.add_split(text, true, how);
        else pre_tokenizer.add_split(required<std::string_view>(pattern["String"], "Split.pattern"), false, how);
    } else {
        throw Error("tokenizer: unsupported pre-tokenizer '" + std::string(type) + "'");
    }
}

void Tokenizer::Impl::add_token(AddedToken token) {
    if (added_by_content.count(token.content)) return;
    set_token(token.id, token.content);
    added_by_content.emplace(token.content, token.id);
    added.push_back(std::move(token));
}

void Tokenizer::Impl::finish() {
    for (const AddedToken& t : added) {
        special[t.id] = t.special;
        if (t.normalized) normalized_matcher.add(t, nfc ? nfc_normalize(t.content) : t.content);
        else raw_matcher.add(t, t.content);
    }
    std::unordered_map<char32_t, uint8_t> inverse;
    for (unsigned b = 0; b < 256; ++b)
        inverse[byte_chars[b]] = uint8_t(b);
    bytes.resize(pieces.size());
    for (size_t id = 0; id < pieces.size(); ++id)
        if (known[id]) bytes[id] = byte_level_decode(pieces[id], inverse);
}

void Tokenizer::Impl::encode_word(std::string_view word, std::vector<TokenId>& out) const {
    if (ignore_merges) {
        std::string piece;
        for (unsigned char b : word)
            append_utf8(piece, byte_chars[b]);
        if (auto it = vocab.find(piece); it != vocab.end()) {
            out.push_back(it->second);
            return;
        }
    }
    // Short words merge in a few flat-table probes, cheaper than a cache lookup; long ones are rare.
    if (word.size() <= kWordCacheMinBytes || word.size() > kWordCacheMaxBytes) {
        merger.encode_word(word, out);
        return;
    }
    {
        std::lock_guard<std::mutex> lock(cache_mutex);
        if (auto it = word_cache.find(word); it != word_cache.end()) {
            out.insert(out.end(), it->second.begin(), it->second.end());
            return;
        }
    }
    size_t first = out.size();
    merger.encode_word(word, out);
    std::vector<TokenId> ids(out.begin() + first, out.end());
    std::lock_guard<std::mutex> lock(cache_mutex);
    if (word_cache.size() >= kWordCacheMaxEntries) word_cache.clear();
    word_cache.emplace(std::string(word), std::move(ids));
}

void Tokenizer::Impl::encode_plain(std::string_view normalized, std::vector<TokenId>& out) const {
    pre_tokenizer.run(normalized, [&](std::string_view word) { encode_word(word, out); });
}

void Tokenizer::Impl::encode_section(std::string_view raw, std::vector<TokenId>& out, bool split_special) const {
    std::string normalized = nfc ? nfc_normalize(raw) : std::string(raw);
    if (normalized_matcher.empty()) {
        encode_plain(normalized, out);
        return;
    }
    std::vector<AddedTokenMatcher::Piece> pieces;
    normalized_matcher.split(normalized, split_special, pieces);
    for (const auto& p : pieces) {
        if (p.id >= 0) out.push_back(p.id);
        else encode_plain(std::string_view(normalized).substr(p.begin, p.end - p.begin), out);
    }
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_json(std::string_view tokenizer_json, std::string_view config_json) {
    auto impl = std::make_unique<Impl>();
    try {
        dom::parser parser;
        simdjson::padded_string padded(tokenizer_json);
        auto root = required<dom::element>(parser.parse(padded), "(document)");
        impl->load_model(required<dom::element>(root["model"], "model"));
        impl->load_normalizer(required<dom::element>(root["normalizer"], "normalizer"));
        impl->load_pre_tokenizer(required<dom::element>(root["pre_tokenizer"], "pre_tokenizer"));
        if (type_of(required<dom::element>(root["decoder"], "decoder")) != "ByteLevel")
            throw Error("tokenizer: unsupported decoder (ByteLevel expected)");
        auto added_list = required<dom::array>(root["added_tokens"], "added_tokens");
        for (dom::element entry : added_list) {
            auto t = required<dom::object>(entry, "added_tokens");
            impl->add_token(parse_added_token(t, TokenId(required<int64_t>(t["id"], "added token id"))));
        }
        if (!config_json.empty()) {
            dom::parser config_parser;
            simdjson::padded_string padded_config(config_json);
            auto config = required<dom::element>(config_parser.parse(padded_config), "(tokenizer_config.json)");
            dom::object decoder;
            if (config["added_tokens_decoder"].get(decoder) == simdjson::SUCCESS) {
                for (auto [key, value] : decoder) {
                    impl->add_token(parse_added_token(required<dom::object>(value, "added_tokens_decoder"), TokenId(std::stol(std::string(key)))));
                }
            }
        }
        impl->finish();
    } catch (const simdjson::simdjson_error& e) {
        throw Error(std::string("tokenizer: malformed tokenizer.json: ") + e.what());
    } catch (const std::invalid_argument&) {
        throw Error("tokenizer: malformed added_tokens_decoder id in tokenizer_config.json");
    }
    return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

std::unique_ptr<Tokenizer> Tokenizer::from_file(const std::string& path) {
    MappedFile json = MappedFile::open(path, "tokenizer");
    size_t slash = path.find_last_of('/');
    std::string config_path = (slash == std::string::npos ? "" : path.substr(0, slash + 1)) + "tokenizer_config.json";
    MappedFile config;
    if (access(config_path.c_str(), R_OK) == 0) config = MappedFile::open(config_path, "tokenizer");
    return from_json(view_of(json), view_of(config));
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
    std::string cleaned;
    if (!is_valid_utf8(text)) {
        cleaned = utf8_lossy(text);
        text = cleaned;
    }
    std::vector<TokenId> out;
    out.reserve(text.size() / 3 + 4);
    std::vector<AddedTokenMatcher::Piece> pieces;
    impl_->raw_matcher.split(text, options.split_special_tokens, pieces);
    for (const auto& p : pieces) {
        if (p.id >= 0) out.push_back(p.id);
        else impl_->encode_section(text.substr(p.begin, p.end - p.begin), out, options.split_special_tokens);
    }
    return out;
}

std::string Tokenizer::decode(std::span<const TokenId> ids, bool skip_special_tokens) const {
    std::string raw;
    for (TokenId id : ids) {
        if (skip_special_tokens && is_special(id)) continue;
        raw.append(token_bytes(id));
    }
    return utf8_lossy(raw);
}

bool Tokenizer::is_known(TokenId id) const {
    return id >= 0 && size_t(id) < impl_->known.size() && impl_->known[id];
}

bool Tokenizer::is_special(TokenId id) const { return is_known(id) && impl_->special[id]; }

std::string_view Tokenizer::token_bytes(TokenId id) const {
    return is_known(id) ? std::string_view(impl_->bytes[id]) : std::string_view();
}

std::string_view Tokenizer::token_piece(TokenId id) const {
    return is_known(id) ? std::string_view(impl_->pieces[id]) : std::string_view();
}

std::optional<TokenId> Tokenizer::find_token(std::string_view content) const {
    if (auto it = impl_->added_by_content.find(content); it != impl_->added_by_content.end()) return it->second;
    if (auto it = impl_->vocab.find(content); it != impl_->vocab.end()) return it->second;
    return std::nullopt;
}

TokenId Tokenizer::token_id(std::string_view content) const {
    if (auto id = find_token(content)) return *id;
    throw Error("tokenizer: no token '" + std::string(content) + "'");
}

size_t Tokenizer::n_ids() const { return impl_->pieces.size(); }
const std::vector<AddedToken>& Tokenizer::added_tokens() const { return impl_->added; }
std::vector<std::string> Tokenizer::split_patterns() const { return impl_->pre_tokenizer.split_patterns(); }

} // namespace ninfer::core
