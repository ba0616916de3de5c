// ninfer::ctl - ninferctl's entry point: dispatch by table to one handler per command.
#include "ctl/commands.h"
#include "ctl/command_list.h"
#include "ctl/control_common.h"

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

using namespace ninfer::ctl;

static void print_usage(FILE* out) {
    std::fprintf(out, "usage: ninferctl [--socket PATH] [--json] [--timeout S] COMMAND [ARGS...]\n\ncommands:\n");
    for (const Command& c : kCommands)
        std::fprintf(out, "  %-14s %s\n", c.name, c.help);
    std::fprintf(out, "\nRun 'ninferctl COMMAND --help' for a command's options.\n");
}

// Global options before the command (--socket PATH, --json, --timeout S) go to global_options();
// control commands also accept them after the command.
static int take_leading_global_options(int& argc, char**& argv) {
    int first = 1;
    while (first < argc && argv[first][0] == '-' && argv[first][1] == '-') {
        std::string a = argv[first];
        std::string name = a.substr(0, a.find('='));
        if (name != "--socket" && name != "--json" && name != "--timeout") break;
        bool takes_value = name != "--json" && name == a;
        if (takes_value && first + 1 >= argc) throw UsageError(name + " needs a value");
        std::vector<std::string> one(argv + first, argv + first + (takes_value ? 2 : 1));
        take_global_options(one, global_options());
        first += takes_value ? 2 : 1;
    }
    argv[first - 1] = argv[0];
    argv += first - 1;
    argc -= first - 1;
    return 0;
}

int main(int argc, char** argv) {
    try {
        take_leading_global_options(argc, argv);
    } catch (const UsageError& e) {
        std::fprintf(stderr, "ninferctl: %s\n", e.what());
        return 2;
    }
    if (argc < 2) {
        print_usage(stderr);
        return 2;
    }
    if (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
        print_usage(stdout);
        return 0;
    }
    if (!std::strcmp(argv[1], "--version")) {
        std::printf("ninferctl %s\n", NINFER_VERSION_STRING);
        return 0;
    }
    for (const Command& c : kCommands) {
        if (!std::strcmp(argv[1], c.name)) {
            try {
                return c.handler(argc - 2, argv + 2);
            } catch (const std::exception& e) {
                std::fprintf(stderr, "ninferctl %s: %s\n", c.name, e.what());
                return 1;
            }
        }
    }
    std::fprintf(stderr, "ninferctl: unknown command '%s'\n", argv[1]);
    print_usage(stderr);
    return 2;
}
