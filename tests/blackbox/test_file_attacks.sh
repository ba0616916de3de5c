#!/bin/bash
# ninfer - directories, FIFOs and other non-regular files where ninferd reads a file (node/file_attacks.js).
exec "$(dirname "$0")/daemon_env.sh" file_attacks
