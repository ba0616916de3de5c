#!/bin/bash
# ninfer - ninferd scheduling: batched greedy = solo, disconnect frees the lane, 429, 503 (node/concurrency.js).
exec "$(dirname "$0")/daemon_env.sh" concurrency
