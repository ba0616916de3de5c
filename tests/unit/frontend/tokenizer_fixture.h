// ninfer tests - a tiny byte-level BPE tokenizer.json built in memory for the tokenizer tests.
//
// Vocabulary: ids 0..255 are the 256 single bytes (GPT-2 byte-to-character map, written out
// independently of core/frontend), then the given merges' results in order, then added tokens.
#pragma once

#include "core/util/json_writer.h"

#include <string>
#include <utility>
#include <vector>

namespace ninfer::test {

inline std::string byte_level_char(unsigned b) {
    // GPT-2 bytes_to_unicode(): printable Latin-1 bytes are themselves, the others 256 + n.
    unsigned next = 256;
    for (unsigned x = 0; x < 256; ++x) {
        bool printable = (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE;
        unsigned cp = printable ? x : next++;
        if (x != b) continue;
        std::string out;
        if (cp < 0x80) out.push_back(char(cp));
        else {
            out.push_back(char(0xC0 | (cp >> 6)));
            out.push_back(char(0x80 | (cp & 0x3F)));
        }
        return out;
    }
    return {};
}

inline std::string byte_level(std::string_view bytes) {
    std::string out;
    for (unsigned char b : bytes)
        out += byte_level_char(b);
    return out;
}

struct TinyAddedToken {
    std::string content;
    bool special = false, lstrip = false, rstrip = false, normalized = false, single_word = false;
};

// merges: pairs of raw-byte strings; each result becomes the next id after 255.
inline std::string tiny_tokenizer_json(const std::vector<std::pair<std::string, std::string>>& merges,
                                       const std::vector<TinyAddedToken>& added,
                                       const std::string& split_regex) {
    core::JsonWriter w;
    w.begin_object();
    w.key("added_tokens").begin_array();
    int id = 256 + int(merges.size());
    for (const auto& t : added) {
        w.begin_object().member("id", id++).member("content", t.content).member("special", t.special);
        w.member("lstrip", t.lstrip).member("rstrip", t.rstrip).member("normalized", t.normalized);
        w.member("single_word", t.single_word).end_object();
    }
    w.end_array();
    w.key("normalizer").begin_object().member("type", "NFC").end_object();
    w.key("pre_tokenizer").begin_object().member("type", "Sequence").key("pretokenizers").begin_array();
    w.begin_object().member("type", "Split").key("pattern").begin_object().member("Regex", split_regex);
    w.end_object().member("behavior", "Isolated").member("invert", false).end_object();
    w.begin_object().member("type", "ByteLevel").member("add_prefix_space", false).member("use_regex", false);
    w.end_object().end_array().end_object();
    w.key("decoder").begin_object().member("type", "ByteLevel").end_object();
    w.key("model").begin_object().member("type", "BPE").key("vocab").begin_object();
    for (unsigned b = 0; b < 256; ++b)
        w.member(byte_level_char(b), int(b));
    for (size_t i = 0; i < merges.size(); ++i)
        w.member(byte_level(merges[i].first + merges[i].second), int(256 + i));
    w.end_object().key("merges").begin_array();
    for (const auto& m : merges)
        w.value(byte_level(m.first) + " " + byte_level(m.second));
    w.end_array().end_object().end_object();
    return w.take();
}

inline const char* kQwen3SplitRegex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

} // namespace ninfer::test
