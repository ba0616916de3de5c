// ninfer - build-time generator: the packaged ninferd.conf and the option parts of the man pages, from ninferd's option table.
//
// Usage (run by packaging/CMakeLists.txt, never installed):
//   ninfer-docgen config ARTIFACT            the default /etc/ninfer/ninferd.conf on stdout
//   ninfer-docgen man TEMPLATE.scd [HELP]    TEMPLATE with its placeholder lines replaced:
//       @NINFERD_OPTIONS@   every CLI option of ninferd (ninferd(8))
//       @CONFIG_KEYS@       every config-file key (ninferd.conf(5))
//       @RELOADABLE_KEYS@   the keys SIGHUP applies, comma-separated
//       @NINFERCTL_COMMANDS@ the command list of `ninferctl --help` (HELP: a file holding that output)
// The scdoc renderings of the table live in daemon/options_doc.cpp (ninferd --help-scdoc prints the same).
#include "daemon/options.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>

using namespace ninfer::daemon;

namespace {

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
        out << "*" << scdoc_escape(name) << "*\n\t" << scdoc_sentence(help) << "\n\n";
    }
    return out.str();
}

int render_man(const std::string& template_path, const std::string& help_file) {
    std::ifstream in(template_path);
    if (!in) throw std::runtime_error("cannot read " + template_path);
    std::string line;
    while (std::getline(in, line)) {
        if (line == "@NINFERD_OPTIONS@") std::cout << render_options_scdoc();
        else if (line == "@CONFIG_KEYS@") std::cout << render_config_keys_scdoc();
        else if (line == "@NINFERCTL_COMMANDS@") std::cout << ninferctl_commands(help_file);
        else if (line.find("@RELOADABLE_KEYS@") != std::string::npos)
            std::cout << line.replace(line.find("@RELOADABLE_KEYS@"), 17, render_reloadable_keys_scdoc()) << "\n";
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
        if (!is_config_key(o)) continue;
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
