#!/bin/bash
# ninfer - build the .deb, lint it, install it on this machine, check what it put where, run the
# installed daemon with the packaged config as user ninfer (socket-activated, like the units do),
# then remove and purge it and check what is left. Installs system-wide: a CI stage (scripts/test.sh),
# never a ctest entry. Run as root on Debian 12; systemd need not be PID 1 (nothing is started).
# Env: NINFER_SOURCE_DIR (default: this checkout), NINFER_DEB_WORKDIR (default: a temp dir),
#      NINFER_DEB_JOBS (default: nproc), NINFER_DEB_PROFILES (default: pkg.ninfer.nocuda, the CPU
#      flavour; empty for the CUDA .deb, which scripts/test.sh builds where nvcc is).
set -euo pipefail
SRC=${NINFER_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
W=${NINFER_DEB_WORKDIR:-$(mktemp -d)}
JOBS=${NINFER_DEB_JOBS:-$(nproc)}
PROFILES=${NINFER_DEB_PROFILES-pkg.ninfer.nocuda}
[ "$(id -u)" = 0 ] || { echo "test_package_deb: run as root (installs the package)" >&2; exit 1; }
version=$(sed -n '1s/^ninfer (\([^)]*\)).*/\1/p' "$SRC/packaging/deb/changelog")
failed=0
fail() { echo "test_package_deb: FAIL: $*"; failed=1; }
step() { echo "--- $* ($(date +%T))"; }

# 1. Build from a copy of the tree (tracked and untracked-but-not-ignored files), so neither
#    debian/ nor the build directory lands in the checkout.
step "build ninfer_${version}_amd64.deb"
tree=$W/ninfer-$version
rm -rf "$tree" && mkdir -p "$tree"
if git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1; then
    (cd "$SRC" && git ls-files -z -co --exclude-standard | tar --null -T - --ignore-failed-read -cf - 2>/dev/null) \
        | tar -xf - -C "$tree"
else
    tar -C "$SRC" --exclude='./build*' --exclude=./.git -cf - . | tar -xf - -C "$tree"
fi
cp -r "$tree/packaging/deb" "$tree/debian"
t0=$(date +%s)
if ! (cd "$tree" && DEB_BUILD_OPTIONS="nocheck parallel=$JOBS" /usr/bin/time -f "cpu: %U s user, %S s sys" \
        -o "$W/build.time" dpkg-buildpackage -us -uc -b ${PROFILES:+-P"$PROFILES"}) > "$W/build.log" 2>&1; then
    tail -40 "$W/build.log"; echo "test_package_deb: FAIL: dpkg-buildpackage (log: $W/build.log)"; exit 1
fi
echo "built in $(( $(date +%s) - t0 )) s ($(cat "$W/build.time"))"
deb=$W/ninfer_${version}_amd64.deb
[ -f "$deb" ] || { echo "test_package_deb: FAIL: no $deb"; exit 1; }
ls -l "$W"/*.deb

step "lintian"
lintian --fail-on error --display-info "$deb" 2>&1 | grep -v 'running with root privileges' | tee "$W/lintian.txt" \
    || true
lintian --fail-on error "$deb" >/dev/null 2>&1 || fail "lintian reports errors"

step "maintainer scripts"
dpkg-deb -e "$deb" "$W/control"
grep -q 'systemd-sysusers' "$W/control/postinst" || fail "postinst does not create the user (dh_installsysusers)"
grep -q 'systemd-tmpfiles' "$W/control/postinst" || fail "postinst does not run tmpfiles"
# The user must exist before tmpfiles chowns to it and before the statoverride names its group.
[ "$(grep -n -m1 systemd-sysusers "$W/control/postinst" | cut -d: -f1)" -lt \
  "$(grep -n -m1 systemd-tmpfiles "$W/control/postinst" | cut -d: -f1)" ] || fail "postinst runs tmpfiles before sysusers"

# 2. Install.
step "install"
dpkg -s ninfer >/dev/null 2>&1 && dpkg --purge ninfer >/dev/null
rm -rf /var/lib/ninfer
apt-get install -y -q --no-install-recommends "$deb" > "$W/install.log" 2>&1 \
    || { cat "$W/install.log"; echo "test_package_deb: FAIL: apt-get install"; exit 1; }
unitdir=$(pkg-config --variable=systemdsystemunitdir systemd)
for f in /usr/sbin/ninferd /usr/bin/ninferctl "$unitdir/ninferd.service" "$unitdir/ninferd-http.socket" \
         "$unitdir/ninferd-control.socket" /usr/lib/sysusers.d/ninfer.conf /usr/lib/tmpfiles.d/ninfer.conf \
         /usr/lib/systemd/catalog/ninfer.catalog /etc/ninfer/ninferd.conf /usr/share/ninfer/demo.ninfer \
         /usr/share/man/man8/ninferd.8.gz /usr/share/man/man8/ninferctl.8.gz /usr/share/man/man5/ninferd.conf.5.gz \
         /usr/share/doc/ninfer/copyright; do
    [ -e "$f" ] || fail "not installed: $f"
done
ls /usr/share/doc/ninfer/README.Debian* >/dev/null 2>&1 || fail "not installed: /usr/share/doc/ninfer/README.Debian"
dpkg -L ninfer | grep -q '^/usr/lib/systemd/system/' && fail "units under /usr/lib/systemd/system (bookworm wants $unitdir)"
demo_size=$(stat -c %s /usr/share/ninfer/demo.ninfer)
[ "$demo_size" -le $((40 * 1024 * 1024)) ] || fail "demo artifact is $demo_size bytes"
getent passwd ninfer | grep -q ':/var/lib/ninfer:/usr/sbin/nologin$' || fail "user ninfer: $(getent passwd ninfer)"
getent group ninfer-admin >/dev/null || fail "no group ninfer-admin"
dpkg-query -W -f='${Conffiles}\n' ninfer | grep -q '^ /etc/ninfer/ninferd.conf ' || fail "ninferd.conf is not a conffile"
[ "$(stat -c '%U:%G %a' /etc/ninfer/ninferd.conf)" = "root:ninfer 640" ] \
    || fail "ninferd.conf is $(stat -c '%U:%G %a' /etc/ninfer/ninferd.conf), want root:ninfer 640"
[ "$(stat -c '%U:%G %a' /run/ninfer/ctl)" = "ninfer:ninfer-admin 750" ] || fail "/run/ninfer/ctl: $(stat -c '%U:%G %a' /run/ninfer/ctl)"
[ "$(stat -c '%U:%G %a' /var/lib/ninfer)" = "ninfer:ninfer 750" ] || fail "/var/lib/ninfer: $(stat -c '%U:%G %a' /var/lib/ninfer)"
for link in multi-user.target.wants/ninferd.service sockets.target.wants/ninferd-http.socket \
            sockets.target.wants/ninferd-control.socket; do
    [ -L "/etc/systemd/system/$link" ] || fail "not enabled: $link"
done

step "installed units"
out=$(systemd-analyze verify "$unitdir/ninferd.service" "$unitdir/ninferd-http.socket" "$unitdir/ninferd-control.socket" 2>&1 || true)
if [ -n "$out" ]; then fail "systemd-analyze verify printed:"; echo "$out"; else echo "systemd-analyze verify: (no output)"; fi
systemd-analyze security --offline=true --threshold=40 "$unitdir/ninferd.service" | tail -1 \
    || fail "security exposure above 4.0"
for page in /usr/share/man/man8/ninferd.8.gz /usr/share/man/man8/ninferctl.8.gz /usr/share/man/man5/ninferd.conf.5.gz; do
    w=$(MANWIDTH=80 man --warnings -l -Tutf8 "$page" 2>&1 >/dev/null); [ -z "$w" ] || fail "man --warnings $page: $w"
done

# 3. Run what was installed, as the service would: user ninfer, packaged config, passed sockets.
step "run the installed daemon"
/usr/sbin/ninferd --version | grep -qx "ninferd $version" || fail "ninferd --version: $(/usr/sbin/ninferd --version)"
/usr/bin/ninferctl --version | grep -qx "ninferctl $version" || fail "ninferctl --version"
as_ninfer=(setpriv --reuid=ninfer --regid=ninfer --init-groups --inh-caps=-all --)
"${as_ninfer[@]}" /usr/sbin/ninferd --config /etc/ninfer/ninferd.conf --check-config > "$W/check.txt" 2>&1 \
    || { cat "$W/check.txt"; fail "ninferd --check-config as ninfer"; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
rm -f /run/ninfer/ctl/control.sock
systemd-socket-activate -l "127.0.0.1:$port" -l /run/ninfer/ctl/control.sock --fdname=http:control \
    "${as_ninfer[@]}" /usr/sbin/ninferd --config /etc/ninfer/ninferd.conf > "$W/daemon.log" 2>&1 &
activator=$!
code=000
for _ in $(seq 300); do
    code=$(curl -s -o "$W/health.txt" -w '%{http_code}' --max-time 5 "http://127.0.0.1:$port/health" || true)
    [ "$code" = 200 ] && break
    sleep 0.2
done
[ "$code" = 200 ] && echo "curl /health: 200 $(cat "$W/health.txt")" || fail "/health of the installed daemon: $code"
reply=$(curl -s --max-time 60 "http://127.0.0.1:$port/v1/chat/completions" -H 'content-type: application/json' \
    -d '{"messages":[{"role":"user","content":"Hello"}],"max_tokens":4}' || true)
echo "$reply" | grep -q '"finish_reason"' || fail "chat completion from the installed daemon: $reply"
# The control socket came from the activator (FileDescriptorName=control), as ninferd-control.socket passes it.
/usr/bin/ninferctl status > "$W/status.txt" 2>&1 || { cat "$W/status.txt"; fail "ninferctl status over the passed control socket"; }
grep -q 'weights are random' "$W/status.txt" || fail "ninferctl status does not say the demo weights are random"
daemon_user=$(ps -o user= -p "$activator" || true)
[ "$daemon_user" = ninfer ] || fail "the daemon runs as '$daemon_user', want ninfer"
kill -TERM "$activator" 2>/dev/null || true
wait "$activator" || fail "installed daemon exit status $? after SIGTERM"
grep -q 'random' "$W/daemon.log" || fail "the daemon's log does not say the demo weights are random"

# 4. Remove, then purge keeping the state directory, reinstall, purge for good.
step "remove and purge"
echo kept > /var/lib/ninfer/snapshot-placeholder
apt-get remove -y -q ninfer > "$W/remove.log" 2>&1 || { cat "$W/remove.log"; fail "apt-get remove"; }
[ -e /usr/sbin/ninferd ] && fail "remove left /usr/sbin/ninferd"
[ -e /etc/ninfer/ninferd.conf ] || fail "remove deleted the conffile (only purge may)"
touch /var/lib/ninfer/keep-on-purge
dpkg --purge ninfer > "$W/purge.log" 2>&1 || { cat "$W/purge.log"; fail "dpkg --purge"; }
[ -f /var/lib/ninfer/snapshot-placeholder ] || fail "purge with keep-on-purge deleted /var/lib/ninfer"
leftovers() { # what of the package is still on the system (the user and group stay by policy)
    find /etc /lib/systemd /usr/lib/systemd /usr/lib/sysusers.d /usr/lib/tmpfiles.d /usr/share /usr/sbin /usr/bin \
         /run /var/lib -name '*ninfer*' -not -path '/var/lib/ninfer*' 2>/dev/null
    dpkg-statoverride --list | grep ninfer || true
}
left=$(leftovers); [ -z "$left" ] || fail "purge left: $left"
dpkg -i "$deb" > "$W/reinstall.log" 2>&1 || { cat "$W/reinstall.log"; fail "reinstall"; }
[ -f /var/lib/ninfer/snapshot-placeholder ] || fail "reinstall lost the kept state"
rm -f /var/lib/ninfer/keep-on-purge
dpkg --purge ninfer > "$W/purge2.log" 2>&1 || { cat "$W/purge2.log"; fail "second purge"; }
[ -e /var/lib/ninfer ] && fail "purge without keep-on-purge left /var/lib/ninfer"
left=$(leftovers); [ -z "$left" ] || fail "purge left: $left"
getent passwd ninfer >/dev/null || fail "purge deleted the user (policy: it stays)"

[ -z "${NINFER_DEB_WORKDIR:-}" ] && [ $failed = 0 ] && rm -rf "$W"
[ $failed = 0 ] && echo "test_package_deb: ok"
exit $failed
