#!/bin/bash
# ninfer - ninferd load test: /health and streaming requests/s, no errors, bounded RSS (node/load.js).
exec "$(dirname "$0")/daemon_env.sh" load
