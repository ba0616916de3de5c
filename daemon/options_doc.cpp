// ninfer::daemon - the option table as scdoc, for the man pages (ninfer-docgen) and --help-scdoc.
// Text taken from the table is escaped for scdoc (`*`, `_` and `\` would otherwise change fonts).
#include "daemon/options.h"

#include <cstdint>
#include <sstream>

namespace ninfer::daemon {

std::string scdoc_escape(std::string_view text) {
    std::string out;
    for (char c : text) {
        if (c == '*' || c == '_' || c == '\\') out += '\\';
        out += c;
    }
    return out;
}

// The table's help is a phrase ("address the HTTP API listens on"); a man page wants a sentence.
std::string scdoc_sentence(std::string_view help) {
    std::string out = scdoc_escape(help);
    if (!out.empty() && out[0] >= 'a' && out[0] <= 'z') out[0] = char(out[0] - 'a' + 'A');
    return out + ".";
}

namespace {

bool takes_value(const OptionSpec& o) { return o.kind != OptionKind::Action && o.kind != OptionKind::Boolean; }

// The sentence after an option's help: default, choices, range, reload behaviour.
std::string details(const OptionSpec& o, bool config_file) {
    std::ostringstream out;
    if (!o.default_value.empty()) out << " Default: *" << scdoc_escape(o.default_value) << "*.";
    if (o.kind == OptionKind::Choice) out << " One of: " << scdoc_escape(choices_in_words(o.choices)) << ".";
    if (o.kind == OptionKind::Boolean) out << " A boolean: true, false, yes, no, on, off, 1 or 0.";
    if (o.kind == OptionKind::Number)
        out << " A number in " << option_number_range(o) << "; unset, the model's generation_config.json decides.";
    if (o.kind == OptionKind::Integer && o.max_value != INT64_MAX)
        out << " Range: " << o.min_value << " to " << o.max_value << ".";
    if (o.kind != OptionKind::Action && !(o.flags & kOptionCliOnly)) {
        if (o.flags & kOptionReloadable) out << " Applied on reload (SIGHUP).";
        else out << " Changing it needs a restart.";
    }
    if (o.flags & kOptionSecret) out << " Never printed by *--check-config*.";
    if (!config_file && (o.flags & kOptionCliOnly)) out << " Command line only.";
    return out.str();
}

} // namespace

bool is_config_key(const OptionSpec& o) {
    return !(o.flags & (kOptionCliOnly | kOptionHidden)) &&
           o.kind != OptionKind::Action;
}

// "auto|[0-9]*|script:*" -> "auto, a positive integer, script:..." (the table's choice syntax, in words).
std::string choices_in_words(std::string_view choices) {
    std::string out;
    size_t start = 0;
    while (start <= choices.size()) {
        size_t bar = choices.find('|', start);
        std::string_view c = choices.substr(start, bar == std::string_view::npos ? bar : bar - start);
        if (!out.empty()) out += ", ";
        if (c == "[0-9]*") out += "a positive integer";
        else if (!c.empty() && c.back() == '*') out += std::string(c.substr(0, c.size() - 1)) + "...";
        else out += c;
        if (bar == std::string_view::npos) break;
        start = bar + 1;
    }
    return out;
}

std::string render_options_scdoc() {
    std::ostringstream out;
    for (const OptionSpec& o : option_table()) {
        if (o.flags & kOptionHidden) continue;
        out << "*--" << o.name << "*";
        if (takes_value(o)) out << " _" << scdoc_escape(o.value_name) << "_";
        if (o.kind == OptionKind::Boolean) out << ", *--no-" << o.name << "*";
        out << "\n\t" << scdoc_sentence(o.help) << details(o, false) << "\n\n";
    }
    return out.str();
}

std::string render_config_keys_scdoc() {
    std::ostringstream out;
    for (const OptionSpec& o : option_table()) {
        if (!is_config_key(o)) continue;
        out << "*" << o.name << "* = _" << scdoc_escape(o.value_name) << "_\n\t" << scdoc_sentence(o.help)
            << details(o, true) << "\n\n";
    }
    return out.str();
}

std::string render_reloadable_keys_scdoc() {
    std::string out;
    for (const OptionSpec& o : option_table()) {
        if (!is_config_key(o) || !(o.flags & kOptionReloadable)) continue;
        out += (out.empty() ? "" : ", ") + std::string("*") + std::string(o.name) + "*";
    }
    return out;
}

} // namespace ninfer::daemon
