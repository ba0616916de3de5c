#!/bin/bash
# ninfer - ninferd SIGTERM drain: in-flight requests finish, new ones 503, exit 0 (node/drain.js).
exec "$(dirname "$0")/daemon_env.sh" drain
