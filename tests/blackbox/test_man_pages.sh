#!/bin/bash
# ninfer - the built man pages and default config: mandoc -T lint -W error and man --warnings are
# clean; ninferd(8) names every option of `ninferd --help`, ninferd.conf(5) every config key,
# ninferctl(8) every command of `ninferctl --help` (drift checks against the generating tables);
# the generated ninferd.conf passes --check-config and holds every key.
set -euo pipefail
BIN=${NINFER_BIN:?}
daemon=$BIN/daemon/ninferd
ctl=$BIN/ctl/ninferctl
man=$BIN/packaging/man
conf=$BIN/packaging/ninferd.conf
for f in "$daemon" "$ctl" "$man/ninferd.8" "$man/ninferd.conf.5" "$man/ninferctl.8" "$conf"; do
    [ -e "$f" ] || { echo "test_man_pages: $f not built" >&2; exit 1; }
done
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
failed=0
fail() { echo "test_man_pages: FAIL: $*"; failed=1; }

for page in "$man"/ninferd.8 "$man"/ninferd.conf.5 "$man"/ninferctl.8; do
    mandoc -T lint -W error "$page" || fail "mandoc -T lint -W error $page"
    warnings=$(MANWIDTH=80 man --warnings -l -Tutf8 "$page" 2>&1 >/dev/null)
    [ -z "$warnings" ] || fail "man --warnings $page: $warnings"
    MANWIDTH=80 man -l -Tutf8 "$page" 2>/dev/null | col -b > "$T/$(basename "$page").txt"
    grep -q '@[A-Z_]*@' "$T/$(basename "$page").txt" && fail "$page keeps a placeholder"
done

# Options of ninferd --help (the table) must all be in ninferd(8).
for opt in $("$daemon" --help | grep -o -- '^  --[a-z0-9-]*' | sed 's/^  //'); do
    grep -q -- "$opt" "$T/ninferd.8.txt" || fail "ninferd(8) lacks $opt"
done
# Keys of the generated config (commented defaults included) must all be in ninferd.conf(5),
# and every key ninferd.conf(5) documents must be accepted by the daemon.
# Captured once: `ninferd --help | grep -q` under pipefail fails at random when grep exits first (SIGPIPE).
daemon_help=$("$daemon" --help)
keys=$(sed -n 's/^#\{0,1\}\([a-z][a-z0-9-]*\) =.*/\1/p' "$conf")
[ "$(echo "$keys" | wc -l)" -ge 20 ] || fail "the generated config lists only $(echo "$keys" | wc -l) keys"
for key in $keys; do
    grep -q "^ *$key = " "$T/ninferd.conf.5.txt" || fail "ninferd.conf(5) lacks the key $key"
    grep -q -- "--$key" <<<"$daemon_help" || fail "config key $key is not a ninferd option"
done
# Commands of ninferctl --help must all be in ninferctl(8).
for cmd in $("$ctl" --help | sed -n '/^commands:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p'); do
    grep -q "^ *$cmd\$" "$T/ninferctl.8.txt" || fail "ninferctl(8) lacks the command $cmd"
done

# The packaged default config is valid (its artifact is the installed demo; use the built one).
"$daemon" --config "$conf" --artifact "$BIN/packaging/demo.ninfer" --device cpu --check-config > "$T/check.txt" \
    || fail "--check-config rejects the generated config"
grep -Eq '^artifact = /usr(/local)?/share/ninfer/demo.ninfer$' "$conf" || fail "the default config does not serve the demo (the installed data dir)"
size=$(stat -L -c %s "$BIN/packaging/demo.ninfer")
[ "$size" -le $((40 * 1024 * 1024)) ] || fail "demo artifact is $size bytes (> 40 MiB)"

[ $failed = 0 ] && echo "test_man_pages: ok (3 pages, $(echo "$keys" | wc -l) keys, demo $size bytes)"
exit $failed
