// ninfer::ctl - the ninferctl command table. Each command lives in its own cmd_<family>.cpp and
// is listed once in main.cpp's table: {name, handler, one-line help}.
//
// Contract: a handler gets the arguments after the command name and returns the process exit
// code: 0 ok, 1 refused or failed (one-line message on stderr), 2 usage error, 3 cannot connect.
#pragma once

namespace ninfer::ctl {

using CommandHandler = int (*)(int argc, char** argv);

struct Command {
    const char* name;
    CommandHandler handler;
    const char* help;
};

} // namespace ninfer::ctl
