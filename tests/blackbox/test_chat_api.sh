#!/bin/bash
# ninfer - ninferd's OpenAI Chat Completions surface through the official openai npm SDK (node/chat_api.js).
exec "$(dirname "$0")/daemon_env.sh" chat_api
