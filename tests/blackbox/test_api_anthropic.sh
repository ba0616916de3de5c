#!/bin/bash
# ninfer - ninferd's Anthropic Messages surface through the official @anthropic-ai/sdk (node/api_anthropic.js).
exec "$(dirname "$0")/daemon_env.sh" api_anthropic
