#!/bin/bash
# ninfer - malformed JSON bodies on every API route answer 4xx in the API's own shape (node/request_shapes.js).
exec "$(dirname "$0")/daemon_env.sh" request_shapes
