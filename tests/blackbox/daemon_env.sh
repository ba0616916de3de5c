#!/bin/bash
# ninfer black-box tests - shared set-up for the ninferd API tests: checks the binaries, makes the
# tiny synthetic artifact once per run (or uses $NINFER_TINY_ARTIFACT), points node at the npm
# oracles, then runs the node test named by $1 (tests/blackbox/node/<name>.js).
set -euo pipefail
SRC=${NINFER_SOURCE_DIR:?}
BIN=${NINFER_BIN:?}
export NINFERD="$BIN/daemon/ninferd"
[ -x "$NINFERD" ] || { echo "$1: $NINFERD not built" >&2; exit 1; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
export NINFER_TEST_DIR="$T"
if [ -z "${NINFER_TINY_ARTIFACT:-}" ]; then
    "$BIN/ctl/ninferctl" convert --synthetic tiny "$T/tiny.ninfer" > "$T/convert.log" 2>&1 ||
        { cat "$T/convert.log" >&2; exit 1; }
    export NINFER_TINY_ARTIFACT="$T/tiny.ninfer"
fi
export NODE_PATH=/opt/ninfer-npm/node_modules
node "$SRC/tests/blackbox/node/$1.js"
