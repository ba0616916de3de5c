#!/bin/bash
# ninfer - constrained decoding through the openai and Anthropic SDKs, validated with ajv (node/constrained.js).
exec "$(dirname "$0")/daemon_env.sh" constrained
