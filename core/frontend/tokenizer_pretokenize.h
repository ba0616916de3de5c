// ninfer::core - the pre-tokenizer of a Hugging Face tokenizer.json (internal to the tokenizer).
//
// Contract:
// - translate_hf_regex(p) rewrites a Hugging Face (Oniguruma dialect) pattern for PCRE2: `\s`
//   becomes the Unicode White_Space class (PCRE2's own \s also accepts U+180E); everything else,
//   `(?i:...)`, `\p{L}`, lookahead, is PCRE2 syntax already.
// - PreTokenizer::run(text, sink) splits valid UTF-8 text into pieces as the configured steps do
//   (Split Isolated/Removed, ByteLevel prefix space and GPT-2 regex) and calls sink once per
//   non-empty piece, in order. The byte-level character mapping itself is left to the BPE model,
//   which works on raw bytes. Const and thread-safe (PCRE2 match data is per thread).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer::core {

std::string translate_hf_regex(std::string_view hf_pattern);

class Pcre2Regex {
  public:
    explicit Pcre2Regex(const std::string& pcre2_pattern); // throws ninfer::Error on syntax
    ~Pcre2Regex();
    Pcre2Regex(const Pcre2Regex&) = delete;
    Pcre2Regex& operator=(const Pcre2Regex&) = delete;
    // Next non-empty match at or after start in valid UTF-8 subject; false if none.
    bool find(std::string_view subject, size_t start, size_t& begin, size_t& end) const;

  private:
    void* code_ = nullptr; // pcre2_code*
};

enum class SplitBehavior { Isolated, Removed };

class PreTokenizer {
  public:
    using Sink = std::function<void(std::string_view)>;
    void add_split(std::string_view pattern, bool is_regex, SplitBehavior behavior);
    void add_byte_level(bool add_prefix_space, bool use_regex);
    void run(std::string_view text, const Sink& sink) const;
    std::vector<std::string> split_patterns() const;

  private:
    struct Step {
        std::string source_pattern;
        std::unique_ptr<Pcre2Regex> regex; // null: no splitting in this step
        SplitBehavior behavior = SplitBehavior::Isolated;
        bool add_prefix_space = false;
    };
    void run_step(size_t index, std::string_view text, const Sink& sink) const;
    std::vector<Step> steps_;
};

} // namespace ninfer::core
