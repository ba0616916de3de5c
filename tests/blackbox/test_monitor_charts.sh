#!/bin/bash
# ninfer - /monitor's history charts in headless Chromium after some seconds of load, and
# /monitor/history itself (node/monitor_charts.js); keeps the screenshot at
# $NINFER_BIN/test-artifacts/monitor_charts.png. Needs Debian's `chromium` (scripts/install-deps.sh
# installs it; $NINFER_CHROMIUM names another binary). Without it the test fails, unless
# NINFER_NO_BROWSER=1 says this machine has no browser on purpose: it then exits 77 (ctest: skipped).
set -euo pipefail
export NINFER_CHROMIUM=${NINFER_CHROMIUM:-chromium}
if ! command -v "$NINFER_CHROMIUM" >/dev/null 2>&1; then
    if [ "${NINFER_NO_BROWSER:-0}" = 1 ]; then
        echo "SKIP test_monitor_charts: no $NINFER_CHROMIUM and NINFER_NO_BROWSER=1"
        exit 77
    fi
    echo "test_monitor_charts: $NINFER_CHROMIUM not found (scripts/install-deps.sh installs chromium;" \
         "NINFER_NO_BROWSER=1 skips this test)" >&2
    exit 1
fi
exec "$(dirname "$0")/daemon_env.sh" monitor_charts
