#!/bin/bash
# ninfer - ninferd's /monitor page and /monitor/stats JSON: CSP, fields, auth, CORS, the page's script (node/monitor.js).
exec "$(dirname "$0")/daemon_env.sh" monitor
