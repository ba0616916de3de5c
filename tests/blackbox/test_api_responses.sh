#!/bin/bash
# ninfer - ninferd's OpenAI Responses surface through the official openai SDK (node/api_responses.js).
exec "$(dirname "$0")/daemon_env.sh" api_responses
