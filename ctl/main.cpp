// ninfer::ctl - ninferctl's entry point: dispatch by table to one handler per command.
#include "ctl/commands.h"
#include "ctl/command_list.h"

#include <cstdio>
#include <cstring>
#include <exception>

using namespace ninfer::ctl;

static void print_usage(FILE* out) {
    std::fprintf(out, "usage: ninferctl COMMAND [ARGS...]\n\ncommands:\n");
    for (const Command& c : kCommands)
        std::fprintf(out, "  %-14s %s\n", c.name, c.help);
    std::fprintf(out, "\nRun 'ninferctl COMMAND --help' for a command's options.\n");
}

int main(int argc, char** argv) {
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
