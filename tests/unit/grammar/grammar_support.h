// Test helpers for the grammar area: a byte-level vocabulary and whole-string matching.
#pragma once

#include "core/grammar/grammar.h"
#include "core/grammar/matcher.h"
#include "core/grammar/token_index.h"

#include <memory>
#include <string>
#include <vector>

namespace ninfer::test {

// Ids 0..255 are the single bytes, 256 the end token.
inline std::shared_ptr<const core::grammar::TokenIndex> byte_index() {
    static const auto index = [] {
        std::vector<std::string> pieces;
        for (int b = 0; b < 256; ++b) pieces.emplace_back(1, char(b));
        pieces.emplace_back("<end>");
        return core::grammar::TokenIndex::from_pieces(std::move(pieces), {256});
    }();
    return index;
}

// The whole text is a string of the grammar.
inline bool grammar_matches(const std::shared_ptr<const core::grammar::Grammar>& g, std::string_view text) {
    core::grammar::Matcher m(g, byte_index());
    return m.accept_bytes(text) && m.accepting();
}

// The text is a prefix of some string of the grammar.
inline bool grammar_prefix(const std::shared_ptr<const core::grammar::Grammar>& g, std::string_view text) {
    core::grammar::Matcher m(g, byte_index());
    return m.accept_bytes(text);
}

} // namespace ninfer::test

#include "core/util/error.h"

#include <cctype>
#include <cstdio>
#include <fstream>
#include <random>

namespace ninfer::test {

// Ids 0..255 the single bytes, then the tool-call markup pieces (so random walks can close raw
// parameter values), then the end token.
inline std::shared_ptr<const core::grammar::TokenIndex> markup_index() {
    static const auto index = [] {
        std::vector<std::string> pieces;
        for (int b = 0; b < 256; ++b) pieces.emplace_back(1, char(b));
        for (const char* m : {"\n</parameter>\n", "<parameter=", "</function>", "\n</tool_call>", "<tool_call>\n", "<function="})
            pieces.emplace_back(m);
        pieces.emplace_back("<end>");
        const auto end = int32_t(pieces.size() - 1);
        return core::grammar::TokenIndex::from_pieces(std::move(pieces), {end});
    }();
    return index;
}

// A random string of the grammar, walked through fill_mask over `index` (each step a uniformly
// chosen allowed token; the end token, when allowed, with probability p_end). "" (and ok=false)
// when no end was reached within max_bytes. A dead end (no token allowed, not accepting) is a
// grammar bug: it throws.
inline std::string grammar_random_walk(const std::shared_ptr<const core::grammar::Grammar>& g,
                                       const std::shared_ptr<const core::grammar::TokenIndex>& index,
                                       std::mt19937& rng, bool& ok, size_t max_bytes = 600, double p_end = 0.3) {
    core::grammar::Matcher m(g, index);
    std::vector<uint32_t> words(index->n_words());
    std::vector<int32_t> allowed;
    std::string out;
    ok = false;
    while (out.size() < max_bytes) {
        m.fill_mask(words);
        allowed.clear();
        const bool end_allowed = core::grammar::allowed_tokens(words, *index, allowed);
        if (end_allowed && (allowed.empty() || std::uniform_real_distribution<double>(0, 1)(rng) < p_end)) {
            ok = m.accept(index->end_ids()[0]);
            return ok ? out : std::string();
        }
        if (allowed.empty()) throw Error("random walk: dead end after '" + out + "'");
        // Past a quarter of the budget, lean towards one-byte punctuation (quotes, brackets, '@',
        // '.'), which is what closes strings and structures; random letters would go on forever.
        if (out.size() > max_bytes / 4 && std::uniform_real_distribution<double>(0, 1)(rng) < 0.7) {
            std::vector<int32_t> closing;
            for (int32_t t : allowed) {
                const std::string_view b = index->bytes(t);
                if ((b.size() == 1 && !std::isalnum(uint8_t(b[0])) && uint8_t(b[0]) < 0x80) || (b.size() > 1 && b.find('<') != std::string_view::npos))
                    closing.push_back(t);
            }
            if (!closing.empty()) allowed.swap(closing);
        }
        const int32_t t = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
        if (!m.accept(t)) throw Error("random walk: the mask allowed a token accept() refused after '" + out + "'");
        out += index->bytes(t);
    }
    return {};
}

struct OracleGroup {
    std::string schema_json;
    std::string draft = "7";
    std::vector<std::string> instances;
};

// Runs tests/oracle/grammar/ajv_validate.js over the groups; returns {checked, failure texts}.
inline std::pair<size_t, std::vector<std::string>> ajv_validate(const std::vector<OracleGroup>& groups, const std::string& tag) {
    const std::string dir = std::string(NINFER_BINARY_DIR) + "/grammar_oracle";
    std::system(("mkdir -p " + dir).c_str());
    const std::string in = dir + "/" + tag + ".json", out = dir + "/" + tag + ".out";
    {
        std::ofstream f(in);
        f << "[";
        for (size_t i = 0; i < groups.size(); ++i) {
            f << (i ? "," : "") << "{\"schema\":" << groups[i].schema_json << ",\"draft\":\"" << groups[i].draft << "\",\"instances\":[";
            for (size_t k = 0; k < groups[i].instances.size(); ++k) {
                f << (k ? "," : "") << '"';
                for (char c : groups[i].instances[k]) {
                    const auto u = uint8_t(c);
                    if (c == '"' || c == '\\') f << '\\' << c;
                    else if (u < 0x20) { char buf[8]; std::snprintf(buf, sizeof buf, "\\u%04x", u); f << buf; }
                    else f << c;
                }
                f << '"';
            }
            f << "]}";
        }
        f << "]";
    }
    const std::string cmd = "NODE_PATH=/opt/ninfer-npm/node_modules node " + std::string(NINFER_SOURCE_DIR) +
                            "/tests/oracle/grammar/ajv_validate.js " + in + " > " + out;
    if (std::system(cmd.c_str()) != 0) throw Error("ajv oracle did not run: " + cmd);
    std::ifstream f(out);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const size_t at = text.find("\"checked\":");
    const size_t checked = at == std::string::npos ? 0 : std::stoul(text.substr(at + 10));
    std::vector<std::string> failures;
    if (text.find("\"failures\":[]") == std::string::npos) failures.push_back(text.substr(0, 4000));
    return {checked, failures};
}

} // namespace ninfer::test
