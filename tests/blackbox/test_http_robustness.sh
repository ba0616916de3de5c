#!/bin/bash
# ninfer - ninferd survives 1000 seeded mutated HTTP requests with well-formed answers (node/http_robustness.js).
exec "$(dirname "$0")/daemon_env.sh" http_robustness
