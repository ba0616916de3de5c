#!/bin/bash
# ninfer - images and video through the official openai and @anthropic-ai/sdk clients (node/media_api.js).
exec "$(dirname "$0")/daemon_env.sh" media_api
