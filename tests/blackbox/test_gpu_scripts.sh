#!/bin/bash
# ninfer - the GPU machine's report scripts, on tables with known answers (they run there on real
# traces; here only their arithmetic): tests/gpu/probe_report.py (the step timeline probe's CSV).
set -euo pipefail
SRC=${NINFER_SOURCE_DIR:?}
python3 "$SRC/tests/gpu/probe_report.py" --selftest
