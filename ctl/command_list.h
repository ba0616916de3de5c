// ninfer::ctl - the list of ninferctl commands. Add one line per command (and its declaration).
#pragma once

#include "ctl/commands.h"

namespace ninfer::ctl {

int cmd_version(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_detokenize(int argc, char** argv);

inline constexpr Command kCommands[] = {
    {"version", cmd_version, "print the version"},
    {"tokenize", cmd_tokenize, "text to token ids (tokenizer.json or artifact)"},
    {"detokenize", cmd_detokenize, "token ids to text"},
};

} // namespace ninfer::ctl
