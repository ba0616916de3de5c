#!/bin/bash
# ninfer - FIFOs where ninferd's I/O thread and ninferctl open files by name: a FIFO slot file,
# upgrade source or persisted lane is refused at once (the I/O thread keeps serving saves and
# restores, SIGTERM still exits), ninferctl refuses a FIFO artifact, and its own inputs may be
# pipes (file_fifos.py).
set -euo pipefail
SRC=${NINFER_SOURCE_DIR:?}
BIN=${NINFER_BIN:?}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
"$BIN/ctl/ninferctl" convert --synthetic tiny "$T/tiny.ninfer" > "$T/convert.log" 2>&1 || { cat "$T/convert.log" >&2; exit 1; }
exec python3 "$SRC/tests/blackbox/file_fifos.py" "$BIN" "$T"
