// ninfer::core - pre-tokenizer: HF regex dialect to PCRE2, Split and ByteLevel steps.
#include "core/frontend/tokenizer_pretokenize.h"

#include "core/util/error.h"

#include <pcre2.h>

#include <cctype>

namespace ninfer::core {

namespace {

// Unicode White_Space, the set Oniguruma's \s matches (PCRE2's adds U+180E).
constexpr std::string_view kWhiteSpaceClassBody =
    "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}"
    "\\x{205F}\\x{3000}";

// GPT-2's pattern, which ByteLevel applies when use_regex is true.
constexpr std::string_view kByteLevelRegex =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

std::string quote_literal(std::string_view text) {
    std::string out;
    for (char c : text) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && static_cast<unsigned char>(c) < 0x80)
            out.push_back('\\');
        out.push_back(c);
    }
    return out;
}

struct MatchScratch {
    pcre2_match_data* data = pcre2_match_data_create(8, nullptr);
    pcre2_match_context* context = pcre2_match_context_create(nullptr);
    pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
    MatchScratch() { pcre2_jit_stack_assign(context, nullptr, stack); }
    ~MatchScratch() {
        pcre2_jit_stack_free(stack);
        pcre2_match_context_free(context);
        pcre2_match_data_free(data);
    }
};

} // namespace

std::string translate_hf_regex(std::string_view p) {
    std::string out;
    out.reserve(p.size() + 64);
    bool in_class = false;
    for (size_t i = 0; i < p.size(); ++i) {
        char c = p[i];
        if (c == '\\' && i + 1 < p.size()) {
            char e = p[i + 1];
            ++i;
            if (e == 's') {
                if (in_class)
                    out.append(kWhiteSpaceClassBody);
                else
                    out.append("[").append(kWhiteSpaceClassBody).append("]");
            } else if (e == 'S' && !in_class) {
                out.append("[^").append(kWhiteSpaceClassBody).append("]");
            } else {
                out.push_back('\\');
                out.push_back(e);
            }
            continue;
        }
        if (!in_class && c == '[') {
            in_class = true;
            out.push_back(c);
            // A ']' right after '[' or '[^' is a literal member, not the end of the class.
            if (i + 1 < p.size() && p[i + 1] == '^') out.push_back(p[++i]);
            if (i + 1 < p.size() && p[i + 1] == ']') out.push_back(p[++i]);
            continue;
        }
        if (in_class && c == ']') in_class = false;
        out.push_back(c);
    }
    return out;
}

Pcre2Regex::Pcre2Regex(const std::string& pattern) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                     PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
    if (!code) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(error, message, sizeof message);
        throw Error("tokenizer: pre-tokenizer regex does not compile at offset " +
                    std::to_string(offset) + ": " + reinterpret_cast<char*>(message));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE); // falls back to the interpreter if JIT is absent
    code_ = code;
}

Pcre2Regex::~Pcre2Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

bool Pcre2Regex::find(std::string_view subject, size_t start, size_t& begin, size_t& end) const {
    thread_local MatchScratch scratch;
    auto* code = static_cast<pcre2_code*>(code_);
    while (start < subject.size()) {
        int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(),
                             start, PCRE2_NO_UTF_CHECK, scratch.data, scratch.context);
        if (rc == PCRE2_ERROR_NOMATCH) return false;
        if (rc < 0) throw Error("tokenizer: pre-tokenizer regex match failed (PCRE2 error " +
                                std::to_string(rc) + ")");
        PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(scratch.data);
        if (ovector[1] > ovector[0]) {
            begin = ovector[0];
            end = ovector[1];
            return true;
        }
        // An empty match splits nothing: retry one character further.
        start = ovector[0] + 1;
        while (start < subject.size() && (static_cast<unsigned char>(subject[start]) & 0xC0) == 0x80)
            ++start;
    }
    return false;
}

void PreTokenizer::add_split(std::string_view pattern, bool is_regex, SplitBehavior behavior) {
    Step step;
    step.source_pattern = std::string(pattern);
    step.regex = std::make_unique<Pcre2Regex>(is_regex ? translate_hf_regex(pattern)
                                                       : quote_literal(pattern));
    step.behavior = behavior;
    steps_.push_back(std::move(step));
}

void PreTokenizer::add_byte_level(bool add_prefix_space, bool use_regex) {
    Step step;
    step.add_prefix_space = add_prefix_space;
    if (use_regex) {
        step.source_pattern = std::string(kByteLevelRegex);
        step.regex = std::make_unique<Pcre2Regex>(translate_hf_regex(kByteLevelRegex));
    }
    steps_.push_back(std::move(step));
}

std::vector<std::string> PreTokenizer::split_patterns() const {
    std::vector<std::string> out;
    for (const Step& s : steps_)
        if (s.regex) out.push_back(s.source_pattern);
    return out;
}

void PreTokenizer::run(std::string_view text, const Sink& sink) const {
    if (!text.empty()) run_step(0, text, sink);
}

void PreTokenizer::run_step(size_t index, std::string_view text, const Sink& sink) const {
    if (index == steps_.size()) {
        sink(text);
        return;
    }
    const Step& step = steps_[index];
    std::string prefixed;
    if (step.add_prefix_space && text.front() != ' ') {
        prefixed = " " + std::string(text);
        text = prefixed;
    }
    if (!step.regex) {
        run_step(index + 1, text, sink);
        return;
    }
    size_t pos = 0, begin = 0, end = 0;
    while (step.regex->find(text, pos, begin, end)) {
        if (begin > pos) run_step(index + 1, text.substr(pos, begin - pos), sink);
        if (step.behavior == SplitBehavior::Isolated)
            run_step(index + 1, text.substr(begin, end - begin), sink);
        pos = end;
    }
    if (pos < text.size()) run_step(index + 1, text.substr(pos), sink);
}

} // namespace ninfer::core
