// ninfer - build-time generator: the packaged ninferd.conf and the option parts of the man pages, from ninferd's option table.
//
// Usage (run by packaging/CMakeLists.txt, never installed):
//   ninfer-docgen config ARTIFACT            the default /etc/ninfer/ninferd.conf on stdout
//   ninfer-docgen man TEMPLATE.scd [HELP]    TEMPLATE with its placeholder lines replaced:
//       @NINFERD_OPTIONS@   every CLI option of ninferd (ninferd(8))
//       @CONFIG_KEYS@       every config-file key (ninferd.conf(5))
//       @RELOADABLE_KEYS@   the keys SIGHUP applies, comma-separated
//       @NINFERCTL_COMMANDS@ the command list of `ninferctl --help` (HELP: a file holding that output)
// Text taken from the table is escaped for scdoc (`*`, `_` and `\` would otherwise change fonts).
#include "daemon/options.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>

using ninfer::daemon::OptionKind;
using ninfer::daemon::OptionSpec;

namespace {

bool in_config_file(const OptionSpec& o) {
    return !(o.flags & (ninfer::daemon::kOptionCliOnly | ninfer::daemon::kOptionHidden)) &&
           o.kind != OptionKind::Action;
}

std::string scdoc_escape(std::string_view text) {
    std::string out;
    for (char c : text) {
        if (c == '*' || c == '_' || c == '\\') out += '\\';
        out += c;
    }
    return out;
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

// The table's help is a phrase ("address the HTTP API listens on"); a man page wants a sentence.
std::string sentence(std::string_view help) {
    std::string out = scdoc_escape(help);
    if (!out.empty() && out[0] >= 'a' && out[0] <= 'z') out[0] = char(out[0] - 'a' + 'A');
    return out + ".";
}

bool takes_value(const OptionSpec& o) { return o.kind != OptionKind::Action && o.kind != OptionKind::Boolean; }

// The sentence after an option's help: default, choices, range, reload behaviour.
std::string details(const OptionSpec& o, bool config_file) {
    std::ostringstream out;
    if (!o.default_value.empty()) out << " Default: *" << scdoc_escape(o.default_value) << "*.";
    if (o.kind == OptionKind::Choice) out << " One of: " << scdoc_escape(choices_in_words(o.choices)) << ".";
    if (o.kind == OptionKind::Boolean) out << " A boolean: true, false, yes, no, on, off, 1 or 0.";
    if (o.kind == OptionKind::Integer && o.max_value != INT64_MAX)
        out << " Range: " << o.min_value << " to " << o.max_value << ".";
    if (o.kind != OptionKind::Action && !(o.flags & ninfer::daemon::kOptionCliOnly)) {
        if (o.flags & ninfer::daemon::kOptionReloadable) out << " Applied on reload (SIGHUP).";
        else out << " Changing it needs a restart.";
    }
    if (o.flags & ninfer::daemon::kOptionSecret) out << " Never printed by *--check-config*.";
    if (!config_file && (o.flags & ninfer::daemon::kOptionCliOnly)) out << " Command line only.";
    return out.str();
}

std::string ninferd_options() {
    std::ostringstream out;
    for (const OptionSpec& o : ninfer::daemon::option_table()) {
        if (o.flags & ninfer::daemon::kOptionHidden) continue;
        out << "*--" << o.name << "*";
        if (takes_value(o)) out << " _" << scdoc_escape(o.value_name) << "_";
        if (o.kind == OptionKind::Boolean) out << ", *--no-" << o.name << "*";
        out << "\n\t" << sentence(o.help) << details(o, false) << "\n\n";
    }
    return out.str();
}

std::string config_keys() {
    std::ostringstream out;
    for (const OptionSpec& o : ninfer::daemon::option_table()) {
        if (!in_config_file(o)) continue;
        out << "*" << o.name << "* = _" << scdoc_escape(o.value_name) << "_\n\t" << sentence(o.help)
            << details(o, true) << "\n\n";
    }
    return out.str();
}

std::string reloadable_keys() {
    std::string out;
    for (const OptionSpec& o : ninfer::daemon::option_table()) {
        if (!in_config_file(o) || !(o.flags & ninfer::daemon::kOptionReloadable)) continue;
        out += (out.empty() ? "" : ", ") + std::string("*") + std::string(o.name) + "*";
    }
    return out;
}

// "  NAME   HELP" lines after "commands:" in `ninferctl --help` become scdoc list entries.
std::string ninferctl_commands(const std::string& help_file) {
    std::ifstream in(help_file);
    if (!in) throw std::runtime_error("cannot read " + help_file);
    std::ostringstream out;
    std::string line;
    bool in_commands = false;
    while (std::getline(in, line)) {
        if (line == "commands:") { in_commands = true; continue; }
        if (!in_commands || line.size() < 3 || line.compare(0, 2, "  ") != 0) {
            if (in_commands && line.empty()) in_commands = false;
            continue;
        }
        size_t name_end = line.find(' ', 2);
        std::string name = line.substr(2, name_end - 2);
        size_t help_start = line.find_first_not_of(' ', name_end);
        std::string help = help_start == std::string::npos ? "" : line.substr(help_start);
        out << "*" << scdoc_escape(name) << "*\n\t" << sentence(help) << "\n\n";
    }
    return out.str();
}

int render_man(const std::string& template_path, const std::string& help_file) {
    std::ifstream in(template_path);
    if (!in) throw std::runtime_error("cannot read " + template_path);
    std::string line;
    while (std::getline(in, line)) {
        if (line == "@NINFERD_OPTIONS@") std::cout << ninferd_options();
        else if (line == "@CONFIG_KEYS@") std::cout << config_keys();
        else if (line == "@NINFERCTL_COMMANDS@") std::cout << ninferctl_commands(help_file);
        else if (line.find("@RELOADABLE_KEYS@") != std::string::npos)
            std::cout << line.replace(line.find("@RELOADABLE_KEYS@"), 17, reloadable_keys()) << "\n";
        else std::cout << line << "\n";
    }
    return 0;
}

// Wraps text at 96 columns as '# ' comment lines.
void comment_block(std::ostream& out, std::string_view text) {
    std::string line = "#";
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find(' ', start);
        if (end == std::string_view::npos) end = text.size();
        std::string_view word = text.substr(start, end - start);
        if (line.size() + 1 + word.size() > 96) {
            out << line << "\n";
            line = "#";
        }
        line += " ";
        line += word;
        start = end + 1;
    }
    out << line << "\n";
}

int render_config(const std::string& artifact) {
    std::ostream& out = std::cout;
    out << "# /etc/ninfer/ninferd.conf - settings of ninferd(8); the format is described in ninferd.conf(5).\n"
           "#\n"
           "# Every key is a long command-line option of ninferd without its dashes. Files in\n"
           "# /etc/ninfer/ninferd.conf.d/*.conf are read after this one in lexical order (a later file wins),\n"
           "# and the command line wins over all files. A commented line shows the built-in default.\n"
           "# Keys marked (reload) take effect on `systemctl reload ninferd`; the others need a restart.\n"
           "# Check a change with `ninferd --config /etc/ninfer/ninferd.conf --check-config`.\n"
           "# Under systemd the HTTP address comes from ninferd-http.socket (`systemctl edit ninferd-http.socket`)\n"
           "# and the control socket from ninferd-control.socket; host, port and control-socket apply\n"
           "# only when ninferd is started without them.\n";
    for (const OptionSpec& o : ninfer::daemon::option_table()) {
        if (!in_config_file(o)) continue;
        out << "\n";
        std::string help(o.help);
        if (o.kind == OptionKind::Choice) help += " (" + choices_in_words(o.choices) + ")";
        if (o.flags & ninfer::daemon::kOptionReloadable) help += " (reload)";
        comment_block(out, help);
        if (o.name == "artifact") {
            out << "# The demo model below has random weights and a tiny shape: ninferd starts on any machine, GPU or\n"
                   "# not, but its answers are noise. Convert a real checkpoint with `ninferctl convert SRC_DIR\n"
                   "# /var/lib/ninfer/model.ninfer` and point this key at it.\n"
                << o.name << " = " << artifact << "\n";
            continue;
        }
        out << "#" << o.name << " =" << (o.default_value.empty() ? "" : " ") << o.default_value << "\n";
    }
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    try {
        std::string mode = argc > 1 ? argv[1] : "";
        if (mode == "config" && argc == 3) return render_config(argv[2]);
        if (mode == "man" && (argc == 3 || argc == 4)) return render_man(argv[2], argc == 4 ? argv[3] : "");
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ninfer-docgen: %s\n", e.what());
        return 1;
    }
    std::fprintf(stderr, "usage: ninfer-docgen config ARTIFACT | man TEMPLATE.scd [NINFERCTL_HELP]\n");
    return 2;
}
