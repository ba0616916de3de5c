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
// - A load failure exits 1. An engine failure while serving (a backend error: on a GPU a CUDA error,
//   after which the device context is unusable) is logged at error priority as the catalogued
//   engine-failed event naming the error; the requests it ran or queued get their error answers
//   (503 engine_unavailable, or an error event in a stream), the sockets stop accepting (later
//   requests on open connections and /health get 503 with the reason), with --persist-slots the
//   lanes are written from their host checkpoints (Engine::persist_checkpoints, the device is not
//   read), and once the answers are flushed ninferd exits kExitEngineFailed so that the unit's
//   Restart=on-failure starts a fresh process.
#pragma once

#include "daemon/config_load.h"

namespace ninfer::daemon {

inline constexpr int kExitEngineFailed = 3;

int run_daemon(const CommandLine& cli);

} // namespace ninfer::daemon
