#!/bin/bash
# ninfer - a 60 s soak (soak.sh: mixed streams, cancellations, bad requests, control
# operations; no error, RSS growth after 20 s <= 8 MiB, fds back to idle).
NINFER_SOAK_WARMUP_S=${NINFER_SOAK_WARMUP_S:-20} NINFER_SOAK_SAMPLE_S=5 exec "$(dirname "$0")/soak.sh" 60
