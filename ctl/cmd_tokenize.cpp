// ninfer::ctl - `ninferctl tokenize` and `ninferctl detokenize`: the tokenizer from the command line.
#include "ctl/command_list.h"

#include "core/artifact/artifact.h"
#include "core/frontend/tokenizer.h"
#include "core/util/error.h"
#include "core/util/regular_file.h"
#include "core/util/json_writer.h"

#include <simdjson.h>

#include <cstdio>
#include <cstring>
#include <ctime>
#include <sstream>
#include <string>
#include <vector>

namespace ninfer::ctl {

namespace {

using core::TokenId;
using core::Tokenizer;

constexpr const char* kTokenizeUsage =
    "usage: ninferctl tokenize (ARTIFACT.ninfer | TOKENIZER.json) (--text TEXT | --file PATH|-)\n"
    "                          [--pieces] [--jsonl] [--bench SECONDS]\n"
    "  prints the ids, space separated, on one line; no special tokens are added.\n"
    "  --pieces  one line per token: ID, a tab, its tokenizer.json string (byte-level) in JSON\n"
    "  --jsonl   the input holds one JSON string per line; prints one line of ids for each\n"
    "  --bench   encode the input repeatedly for about SECONDS of CPU time; print MB/s\n";
constexpr const char* kDetokenizeUsage =
    "usage: ninferctl detokenize (ARTIFACT.ninfer | TOKENIZER.json) (--ids 1,2,3 | --id-lines PATH|-)\n"
    "  --ids       prints the text of the ids (and a newline)\n"
    "  --id-lines  one line of space-separated ids per text; prints each text as a JSON string\n";

// A `.ninfer` artifact carries tokenizer.json (and tokenizer_config.json) as resources of its
// "text" component; any other path is a tokenizer.json file.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
    if (!(path.size() > 7 && path.compare(path.size() - 7, 7, ".ninfer") == 0)) return Tokenizer::from_file(path);
    auto artifact = core::Artifact::open(path);
    const core::ArtifactResource* json = artifact->resource("text", "tokenizer.json");
    if (!json) throw Error("tokenize: " + path + " carries no tokenizer.json resource");
    const core::ArtifactResource* config = artifact->resource("text", "tokenizer_config.json");
    return Tokenizer::from_json(json->text(), config ? config->text() : std::string_view());
}

std::string read_input(const std::string& path) { return core::read_input_file(path, "tokenize"); }

std::vector<std::string> split_lines(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) lines.push_back(line);
    return lines;
}

std::vector<TokenId> parse_ids(std::string_view text) {
    std::vector<TokenId> ids;
    std::string token;
    auto flush = [&] {
        if (token.empty()) return;
        size_t used = 0;
        long long v = std::stoll(token, &used);
        if (used != token.size()) throw Error("detokenize: not an id: '" + token + "'");
        ids.push_back(TokenId(v));
        token.clear();
    };
    for (char c : text) {
        if (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r') flush();
        else token.push_back(c);
    }
    flush();
    return ids;
}

void print_ids(const std::vector<TokenId>& ids) {
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) {
        if (i) line.push_back(' ');
        line += std::to_string(ids[i]);
    }
    line.push_back('\n');
    std::fwrite(line.data(), 1, line.size(), stdout);
}

void print_pieces(const Tokenizer& tok, const std::vector<TokenId>& ids) {
    for (TokenId id : ids)
        std::printf("%d\t%s\n", id, core::json_quote(tok.token_piece(id)).c_str());
}

// Seconds of CPU time this thread has used: on a shared machine, wall time measures the neighbours.
double thread_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

void run_bench(const Tokenizer& tok, const std::string& text, double seconds) {
    // The first pass fills the per-word merge cache; later passes are what a long-running server sees.
    double start = thread_cpu_seconds();
    size_t n_tokens = tok.encode(text).size();
    double cold_s = thread_cpu_seconds() - start;
    size_t n_rounds = 0;
    double warm_s = 0;
    start = thread_cpu_seconds();
    while (warm_s < seconds || n_rounds == 0) {
        n_tokens = tok.encode(text).size();
        ++n_rounds;
        warm_s = thread_cpu_seconds() - start;
    }
    double mb = double(text.size()) / 1e6;
    std::printf("encode %zu bytes -> %zu tokens, one thread, per CPU second: first pass %.2f MB/s, "
                "then %zu passes at %.2f MB/s\n",
                text.size(), n_tokens, mb / cold_s, n_rounds, mb * double(n_rounds) / warm_s);
}

} // namespace

int cmd_tokenize(int argc, char** argv) {
    std::string path, text;
    bool have_text = false, pieces = false, jsonl = false;
    double bench_seconds = 0;
    for (int i = 0; i < argc; ++i) {
        std::string_view a = argv[i];
        if (a == "--help" || a == "-h") { std::fputs(kTokenizeUsage, stdout); return 0; }
        if (a == "--pieces") pieces = true;
        else if (a == "--jsonl") jsonl = true;
        else if ((a == "--text" || a == "--file" || a == "--bench") && i + 1 < argc) {
            std::string v = argv[++i];
            if (a == "--bench") bench_seconds = std::stod(v);
            else { text = a == "--text" ? v : read_input(v); have_text = true; }
        } else if (path.empty() && !a.starts_with("--")) path = std::string(a);
        else { std::fputs(kTokenizeUsage, stderr); return 2; }
    }
    if (path.empty() || !have_text) { std::fputs(kTokenizeUsage, stderr); return 2; }
    auto tok = load_tokenizer(path);
    if (bench_seconds > 0) { run_bench(*tok, text, bench_seconds); return 0; }
    if (!jsonl) {
        auto ids = tok->encode(text);
        pieces ? print_pieces(*tok, ids) : print_ids(ids);
        return 0;
    }
    simdjson::dom::parser parser;
    for (const std::string& line : split_lines(text)) {
        std::string_view decoded;
        if (parser.parse(line).get(decoded) != simdjson::SUCCESS)
            throw Error("tokenize: --jsonl line is not a JSON string: " + line.substr(0, 60));
        auto ids = tok->encode(decoded);
        pieces ? print_pieces(*tok, ids) : print_ids(ids);
    }
    return 0;
}

int cmd_detokenize(int argc, char** argv) {
    std::string path, ids_text, id_lines_path;
    for (int i = 0; i < argc; ++i) {
        std::string_view a = argv[i];
        if (a == "--help" || a == "-h") { std::fputs(kDetokenizeUsage, stdout); return 0; }
        if (a == "--ids" && i + 1 < argc) ids_text = argv[++i];
        else if (a == "--id-lines" && i + 1 < argc) id_lines_path = argv[++i];
        else if (path.empty() && !a.starts_with("--")) path = std::string(a);
        else { std::fputs(kDetokenizeUsage, stderr); return 2; }
    }
    if (path.empty() || ids_text.empty() == id_lines_path.empty()) { std::fputs(kDetokenizeUsage, stderr); return 2; }
    auto tok = load_tokenizer(path);
    if (!ids_text.empty()) {
        std::string out = tok->decode(parse_ids(ids_text)) + "\n";
        std::fwrite(out.data(), 1, out.size(), stdout);
        return 0;
    }
    std::istringstream in(read_input(id_lines_path));
    for (std::string line; std::getline(in, line);)
        std::printf("%s\n", core::json_quote(tok->decode(parse_ids(line))).c_str());
    return 0;
}

} // namespace ninfer::ctl
