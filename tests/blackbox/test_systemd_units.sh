#!/bin/bash
# ninfer - the systemd units verify cleanly and the service's hardening scores <= 4.0 exposure.
# Before packaging, ExecStart points at /usr/sbin/ninferd, which may not be installed: verify a
# copy whose ExecStart points at this build's binary (the .deb stage verifies the installed units).
set -euo pipefail
SRC=${NINFER_SOURCE_DIR:?}
BIN=${NINFER_BIN:?}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
daemon=$BIN/daemon/ninferd
[ -x "$daemon" ] || { echo "test_systemd_units: $daemon not built" >&2; exit 1; }
cp "$SRC"/systemd/ninferd.service "$SRC"/systemd/ninferd-http.socket "$SRC"/systemd/ninferd-control.socket "$T"/
sed -i "s|^ExecStart=/usr/sbin/ninferd|ExecStart=$daemon|" "$T/ninferd.service"
out=$(cd "$T" && systemd-analyze verify --man=no ninferd.service ninferd-http.socket ninferd-control.socket 2>&1 || true)
if [ -n "$out" ]; then echo "systemd-analyze verify printed:"; echo "$out"; exit 1; fi
systemd-analyze security --offline=true --threshold=40 "$SRC/systemd/ninferd.service" | tail -1
# sysusers creates the user and the admin group in a scratch root.
mkdir -p "$T/root/etc"
systemd-sysusers --root="$T/root" "$SRC/systemd/ninfer.sysusers"
grep -q '^ninfer:' "$T/root/etc/passwd"
grep -q '^ninfer-admin:' "$T/root/etc/group"
echo "test_systemd_units: ok"
