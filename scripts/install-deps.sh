#!/bin/sh
# ninfer - install every build and test dependency from Debian 12 packages (idempotent, run as root).
# Also installs the npm oracles (tokenizer, OpenAI and Anthropic SDKs, ajv) at a fixed path, /opt/ninfer-npm,
# and the coding agents Claude Code and Codex (pinned, native binaries) at /opt/ninfer-agents for
# tests/blackbox/test_real_agents.sh; NINFER_NO_AGENTS=1 leaves them out (that test then skips).
# chromium: the headless browser of tests/blackbox/test_monitor_charts.sh (/monitor's charts).
set -eu
if [ "$(id -u)" != 0 ]; then echo "install-deps: run as root" >&2; exit 2; fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends \
    build-essential cmake ninja-build pkg-config git ca-certificates time \
    libuv1-dev libsimdjson-dev node-llhttp libsystemd-dev liburing-dev catch2 libpcre2-dev unicode-data \
    json-schema-test-suite \
    chromium \
    libavcodec-dev libavformat-dev libavutil-dev libswscale-dev \
    python3 python3-prometheus-client systemd systemd-container util-linux procps curl \
    debhelper devscripts lintian rpm rpmlint mandoc man-db scdoc fakeroot dpkg-dev \
    clang-16 libclang-rt-16-dev
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    apt-get install -y -q --no-install-recommends nodejs npm
fi
NPM_DIR=/opt/ninfer-npm
mkdir -p "$NPM_DIR"
here=$(cd "$(dirname "$0")" && pwd)
cp "$here/npm/package.json" "$NPM_DIR/package.json"
[ -f "$here/npm/package-lock.json" ] && cp "$here/npm/package-lock.json" "$NPM_DIR/package-lock.json"
(cd "$NPM_DIR" && npm install --no-audit --no-fund --loglevel=error)
if [ "${NINFER_NO_AGENTS:-0}" != 1 ]; then
    AGENTS_DIR=/opt/ninfer-agents
    mkdir -p "$AGENTS_DIR"
    cp "$here/npm-agents/package.json" "$here/npm-agents/package-lock.json" "$AGENTS_DIR/"
    (cd "$AGENTS_DIR" && npm install --no-audit --no-fund --loglevel=error)
fi
echo "install-deps: done"
