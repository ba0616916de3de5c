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
int cmd_bench(int argc, char** argv);
int cmd_status(int argc, char** argv);
int cmd_metrics(int argc, char** argv);
int cmd_slot(int argc, char** argv);
int cmd_cache(int argc, char** argv);
int cmd_drain(int argc, char** argv);
int cmd_resume(int argc, char** argv);
int cmd_log_level(int argc, char** argv);
int cmd_reload(int argc, char** argv);
int cmd_artifact(int argc, char** argv);

inline constexpr Command kCommands[] = {
    {"version", cmd_version, "print the version"},
    {"inspect", cmd_inspect, "validate a .ninfer artifact and list what it holds (--json)"},
    {"tokenize", cmd_tokenize, "text to token ids (tokenizer.json or artifact)"},
    {"detokenize", cmd_detokenize, "token ids to text"},
    {"render", cmd_render, "print the chat prompt for a conversation (JSON messages)"},
    {"convert", cmd_convert, "HF checkpoint (or --synthetic SHAPE) to a .ninfer artifact"},
    {"run", cmd_run, "generate from a prompt on the local CPU backend"},
    {"perplexity", cmd_perplexity, "perplexity of a text file (sliding windows)"},
    {"bench", cmd_bench, "CUDA prefill/decode speed and roofline fraction; an image's or video's TTFT by stage (--media FILE)"},
    {"status", cmd_status, "the daemon's model, device, lanes, queue and memory plan (--settings: its settings)"},
    {"metrics", cmd_metrics, "throughput, TTFT, queue, KV use, cache hits (--watch SECONDS)"},
    {"slot", cmd_slot, "slot list | save ID NAME | restore ID NAME | erase ID"},
    {"cache", cmd_cache, "cache list | evict (--all | KEY | --older-than SECONDS)"},
    {"drain", cmd_drain, "stop admitting requests; running ones finish"},
    {"resume", cmd_resume, "admit requests again after drain"},
    {"log-level", cmd_log_level, "set the daemon's log level (debug|info|warning|error)"},
    {"reload", cmd_reload, "re-read the daemon's config files (as SIGHUP)"},
    {"artifact", cmd_artifact, "artifact upgrade [--offline] SRC [DST]: a v1/v2 container to V3 (by ninferd if reachable)"},
};

} // namespace ninfer::ctl
