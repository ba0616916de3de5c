#!/bin/bash
# ninfer - ninferd interleaves prefill chunks with decode steps; measures lane gaps (node/interleave.js).
exec "$(dirname "$0")/daemon_env.sh" interleave
