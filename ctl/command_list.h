// ninfer::ctl - the list of ninferctl commands. Add one line per command (and its declaration).
#pragma once

#include "ctl/commands.h"

namespace ninfer::ctl {

int cmd_version(int argc, char** argv);

inline constexpr Command kCommands[] = {
    {"version", cmd_version, "print the version"},
};

} // namespace ninfer::ctl
