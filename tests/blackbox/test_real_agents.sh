#!/bin/bash
# ninfer - the real coding agents (Claude Code, Codex) run non-interactively against ninferd, offline
# (node/real_agents.js). They are large npm packages, installed apart from the oracles:
#   scripts/install-deps.sh (puts them in /opt/ninfer-agents), or by hand:
#   npm install --prefix /opt/ninfer-agents @anthropic-ai/claude-code@2.1.332 @openai/codex@0.171.0
# $NINFER_AGENTS_BIN overrides where the claude and codex commands are looked for. Without either,
# the test prints why and exits 77, which ctest reports as skipped.
set -euo pipefail
export NINFER_AGENTS_BIN=${NINFER_AGENTS_BIN:-/opt/ninfer-agents/node_modules/.bin}
if [ ! -x "$NINFER_AGENTS_BIN/claude" ] && [ ! -x "$NINFER_AGENTS_BIN/codex" ]; then
    echo "SKIP test_real_agents: neither claude nor codex is installed in $NINFER_AGENTS_BIN" \
         "(scripts/install-deps.sh installs both; or set NINFER_AGENTS_BIN)"
    exit 77
fi
exec "$(dirname "$0")/daemon_env.sh" real_agents
