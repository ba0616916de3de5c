// ninfer::daemon - ninferd's life cycle: start-up order, signals, drain, exit.
//
// Contract:
// - run_daemon(cli) loads the settings, then: validate the artifact and plan memory (a plan that
//   does not fit: exit 1 with the deficit in bytes) -> listen (socket-activated "http" fd or
//   host:port; /health 503 "Loading model") -> load on the engine thread -> ready (/health 200,
//   sd_notify READY=1). The loop thread never blocks.
// - The line "ninferd: listening on HOST:PORT" goes to stderr once listening (tests use port 0).
// - SIGTERM/SIGINT drain: STOPPING=1, new requests 503, in-flight requests finish until
//   drain-timeout-s, then they are cancelled; exit 0 once all responses are flushed.
// - SIGHUP (and `ninferctl reload`) re-reads the config files and applies the options the table
//   marks reloadable (apply_reload, config_load.h); a changed restart-only option is logged and
//   keeps its running value. An invalid file changes nothing.
// - A load failure exits 1; an engine failure later keeps serving /health 503 until SIGTERM.
#pragma once

#include "daemon/config_load.h"

namespace ninfer::daemon {

int run_daemon(const CommandLine& cli);

} // namespace ninfer::daemon
