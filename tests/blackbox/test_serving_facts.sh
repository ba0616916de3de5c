#!/bin/bash
# ninfer - /metrics names the backend in use, n_tokens_max as observed, long duration buckets (node/serving_facts.js).
exec "$(dirname "$0")/daemon_env.sh" serving_facts
