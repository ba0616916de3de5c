#!/bin/bash
# ninfer - build, make the embedded demo model (random weights, tiny shape) and run ninferd on it
# in the foreground on 127.0.0.1:8080. Try it from another terminal:
#   curl -s localhost:8080/v1/chat/completions -H 'content-type: application/json' \
#        -d '{"messages":[{"role":"user","content":"Hello"}],"max_tokens":16}'
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${NINFER_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNINFER_TESTS=OFF >/dev/null
cmake --build "$BUILD" -j "$(nproc)"
DEMO=$BUILD/demo.ninfer
[ -f "$DEMO" ] || "$BUILD/ctl/ninferctl" convert --synthetic tiny "$DEMO" --seed 1
"$BUILD/ctl/ninferctl" run "$DEMO" --prompt "Hello" --max-new 16 --greedy || true
exec "$BUILD/daemon/ninferd" --artifact "$DEMO" --device cpu --host 127.0.0.1 --port 8080 \
    --control-socket "$BUILD/control.sock" --state-dir "$BUILD/state" "$@"
