#!/bin/bash
# ninfer - build the .rpm on Debian (rpmbuild --nodeps with packaging/rpm/macros.debian-compat
# standing in for systemd-rpm-macros and cmake-rpm-macros), then check: no unexpanded macro in
# any scriptlet, the scriptlets call systemd-sysusers / systemctl, the file list, modes and
# %config(noreplace), and rpmlint reports no errors. Installing the rpm needs a Fedora/RHEL host
# (not tested here). A CI stage (scripts/test.sh), not a ctest entry: it compiles the whole tree.
# Env: NINFER_SOURCE_DIR (default: this checkout), NINFER_RPM_WORKDIR (default: a temp dir),
#      NINFER_RPM_CUDA (default: --without cuda, the CPU flavour in CI; "--with cuda" for the GPU build).
set -euo pipefail
SRC=${NINFER_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
W=${NINFER_RPM_WORKDIR:-$(mktemp -d)}
spec=$SRC/packaging/rpm/ninfer.spec
version=$(sed -n 's/^Version: *//p' "$spec")
failed=0
fail() { echo "test_package_rpm: FAIL: $*"; failed=1; }

mkdir -p "$W/SOURCES"
# Source0: the tree as ninfer-VERSION/ (tracked and untracked-but-not-ignored files).
if git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1; then
    (cd "$SRC" && git ls-files -z -co --exclude-standard | tar --null -T - --ignore-failed-read \
        --transform "s,^,ninfer-$version/," -czf "$W/SOURCES/ninfer-$version.tar.gz" 2>/dev/null)
else
    tar -C "$SRC" --exclude='./build*' --exclude=./.git --transform "s,^\./,ninfer-$version/," \
        -czf "$W/SOURCES/ninfer-$version.tar.gz" .
fi
cp "$SRC/systemd/ninfer.sysusers" "$W/SOURCES/ninfer.sysusers"

t0=$(date +%s)
if ! /usr/bin/time -f "cpu: %U s user, %S s sys" -o "$W/build.time" rpmbuild --nodeps --load "$SRC/packaging/rpm/macros.debian-compat" --define "_topdir $W" ${NINFER_RPM_CUDA:---without cuda} \
        -bb "$spec" > "$W/build.log" 2>&1; then
    tail -40 "$W/build.log"; echo "test_package_rpm: FAIL: rpmbuild (log: $W/build.log)"; exit 1
fi
echo "built in $(( $(date +%s) - t0 )) s ($(cat "$W/build.time"))"
rpm=$(ls "$W"/RPMS/x86_64/ninfer-"$version"-*.x86_64.rpm | grep -v debug | head -1)
ls -l "$W"/RPMS/x86_64/

rpm -qp --scripts "$rpm" > "$W/scripts.txt"
cat "$W/scripts.txt"
grep -n '%' "$W/scripts.txt" && fail "unexpanded macros in the scriptlets"
grep -q 'systemd-sysusers --replace=/usr/lib/sysusers.d/ninfer.conf' "$W/scripts.txt" || fail "no sysusers in %pre"
grep -q '^u ninfer ' "$W/scripts.txt" || fail "%pre does not carry the sysusers lines"
grep -q 'systemctl --no-reload preset ninferd.service ninferd-http.socket ninferd-control.socket' "$W/scripts.txt" \
    || fail "no preset in %post"
grep -q 'systemctl --no-reload disable --now ninferd.service' "$W/scripts.txt" || fail "no disable in %preun"
grep -q 'systemctl try-restart ninferd.service' "$W/scripts.txt" || fail "no try-restart in %postun"

rpm -qplv "$rpm" > "$W/files.txt"
for f in /usr/sbin/ninferd /usr/bin/ninferctl /usr/lib/systemd/system/ninferd.service \
         /usr/lib/systemd/system/ninferd-http.socket /usr/lib/systemd/system/ninferd-control.socket \
         /usr/lib/sysusers.d/ninfer.conf /usr/lib/tmpfiles.d/ninfer.conf /usr/lib/systemd/catalog/ninfer.catalog \
         /etc/ninfer/ninferd.conf /usr/share/ninfer/demo.ninfer /usr/share/man/man8/ninferd.8.gz \
         /usr/share/man/man5/ninferd.conf.5.gz /usr/share/man/man8/ninferctl.8.gz; do
    grep -q " $f\$" "$W/files.txt" || fail "not packaged: $f"
done
grep -q '^-rw-r----- .*root *ninfer .* /etc/ninfer/ninferd.conf$' "$W/files.txt" || fail "ninferd.conf is not 0640 root:ninfer"
grep -q '^drwxr-x--- .*ninfer *ninfer .* /var/lib/ninfer$' "$W/files.txt" || fail "/var/lib/ninfer is not 0750 ninfer:ninfer"
rpm -qp --configfiles "$rpm" | grep -qx /etc/ninfer/ninferd.conf || fail "ninferd.conf is not %config"
rpm -qp --qf '[%{FILEFLAGS:fflags} %{FILENAMES}\n]' "$rpm" | grep -q '^cn /etc/ninfer/ninferd.conf$' \
    || fail "ninferd.conf is not %config(noreplace)"

echo "--- rpmlint"
rpmlint -r "$SRC/packaging/rpm/ninfer.rpmlintrc" "$rpm" "$spec" 2>&1 | tee "$W/rpmlint.txt" || fail "rpmlint reports errors"

[ -z "${NINFER_RPM_WORKDIR:-}" ] && [ $failed = 0 ] && rm -rf "$W"
[ $failed = 0 ] && echo "test_package_rpm: ok"
exit $failed
