// ninfer::ctl - the list of ninferctl commands. Add one line per command (and its declaration).
#pragma once

#include "ctl/commands.h"

namespace ninfer::ctl {

int cmd_version(int argc, char** argv);
int cmd_inspect(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_detokenize(int argc, char** argv);
int cmd_render(int argc, char** argv);
int cmd_convert(int argc, char** argv);
int cmd_run(int argc, char** argv);
int cmd_perplexity(int argc, char** argv);

inline constexpr Command kCommands[] = {
    {"version", cmd_version, "print the version"},
    {"inspect", cmd_inspect, "validate a .ninfer artifact and list what it holds (--json)"},
    {"tokenize", cmd_tokenize, "text to token ids (tokenizer.json or artifact)"},
    {"detokenize", cmd_detokenize, "token ids to text"},
    {"render", cmd_render, "print the chat prompt for a conversation (JSON messages)"},
    {"convert", cmd_convert, "HF checkpoint (or --synthetic SHAPE) to a .ninfer artifact"},
    {"run", cmd_run, "generate from a prompt on the local CPU backend"},
    {"perplexity", cmd_perplexity, "perplexity of a text file (sliding windows)"},
};

} // namespace ninfer::ctl
