#!/bin/bash
# ninfer - ninferd's completions, tokenize/detokenize, props, slots and CORS (node/api_misc.js).
exec "$(dirname "$0")/daemon_env.sh" api_misc
