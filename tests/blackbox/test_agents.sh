#!/bin/bash
# ninfer - coding agents' request shapes (Claude Code, Codex) replayed against ninferd (node/agents.js).
exec "$(dirname "$0")/daemon_env.sh" agents
