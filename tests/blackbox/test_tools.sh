#!/bin/bash
# ninfer - streamed tool_calls deltas through the openai SDK, with the scripted backend (node/tools.js).
exec "$(dirname "$0")/daemon_env.sh" tools
