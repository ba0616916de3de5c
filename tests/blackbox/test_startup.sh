#!/bin/bash
# ninfer - ninferd command line, config errors, memory refusal, SIGHUP reload, CORS (node/startup.js).
exec "$(dirname "$0")/daemon_env.sh" startup
