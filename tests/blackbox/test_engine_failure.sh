#!/bin/bash
# ninfer - a backend that fails mid-request: the client gets 503 engine_unavailable saying the engine
# failed (not "shutting down"), then the daemon exits with status 3 for systemd to restart it
# (node/engine_failure.js).
exec "$(dirname "$0")/daemon_env.sh" engine_failure
