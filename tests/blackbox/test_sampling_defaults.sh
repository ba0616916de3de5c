#!/bin/bash
# ninfer - sampling defaults from generation_config.json and the options, alike in ninferd and ninferctl run (node/sampling_defaults.js).
exec "$(dirname "$0")/daemon_env.sh" sampling_defaults
