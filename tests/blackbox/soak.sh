#!/bin/bash
# ninfer - soak ninferd on the CPU backend under a mixed load (tests/blackbox/node/soak.js says
# what runs and what is checked). Not a ctest entry (too long); test_soak_short.sh runs 60 s of it.
# Usage: tests/blackbox/soak.sh [SECONDS (600)] [BUILD_DIR (build-ci)]; env NINFER_SOAK_* as in soak.js.
here=$(cd "$(dirname "$0")" && pwd)
export NINFER_SOURCE_DIR=${NINFER_SOURCE_DIR:-$(cd "$here/../.." && pwd)}
export NINFER_BIN=${NINFER_BIN:-$NINFER_SOURCE_DIR/${2:-build-ci}}
export NINFER_SOAK_SECONDS=${1:-${NINFER_SOAK_SECONDS:-600}}
exec "$here/daemon_env.sh" soak
