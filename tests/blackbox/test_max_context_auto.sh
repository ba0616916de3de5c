#!/bin/bash
# ninfer - --max-context auto on the CPU backend, with and without a memory cgroup limit (node/max_context_auto.js).
exec "$(dirname "$0")/daemon_env.sh" max_context_auto
