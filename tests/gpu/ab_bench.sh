#!/usr/bin/env bash
# ninfer - A/B timing of whole decode steps on the GPU machine. Every variant runs bench_decode with
# the same arguments, in interleaved rounds (machines drift 1-2% between runs and a little within
# one, so variants are compared within one run only, round by round). One line per (variant, round)
# gives each (batch, depth)'s median step in ms; a summary gives each variant's mean per (batch,
# depth) and its change against the first variant.
#
# Usage (repository root): tests/gpu/ab_bench.sh [--rounds N] VARIANT... -- BENCH_ARGS...
#   VARIANT      label[@bindir][:NAME=value[,NAME=value...]]. bindir holds bench_decode (and the
#                shared libraries carried beside it; default $NINFER_GPU_BIN, else build-gpu/tests);
#                the settings are added to the environment of that variant's runs only (the kernel
#                switches of kernels/include/ninfer/kernels/tuning.h; a retired one fails the run).
#   BENCH_ARGS   bench_decode's, e.g. --synthetic qwen3.6-35b-a3b --recipe q4 --batch 1,8
#                --prompt-len 8192 --gen 16 --decode-only
#   NINFER_AB_TIMEOUT  seconds a bench run may take (default 150).
# Example: tests/gpu/ab_bench.sh --rounds 3 base int8t6:NINFER_GEMV_INT8_TARGET=6 old@.deps/old/bin \
#            -- --synthetic qwen3.6-35b-a3b --recipe q4 --batch 1,2,8 --prompt-len 8192 --gen 16 --decode-only
# A run whose bench fails prints its exit status and last lines, and the script exits 1 at the end.
set -uo pipefail

rounds=2
variants=()
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) rounds=${2:?--rounds needs a number}; shift 2 ;;
    --) shift; break ;;
    -*) echo "ab_bench: unknown option $1" >&2; exit 2 ;;
    *) variants+=("$1"); shift ;;
    esac
done
if [ ${#variants[@]} -eq 0 ] || [ $# -eq 0 ] || ! [[ $rounds =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: ab_bench.sh [--rounds N] label[@bindir][:NAME=value,...]... -- bench_decode args" >&2
    exit 2
fi
default_bin=${NINFER_GPU_BIN:-build-gpu/tests}
timeout_s=${NINFER_AB_TIMEOUT:-150}
results=$(mktemp)
trap 'rm -f "$results"' EXIT
status=0

for ((r = 1; r <= rounds; r++)); do
    for v in "${variants[@]}"; do
        spec=${v%%:*} settings=
        [[ $v == *:* ]] && settings=${v#*:}
        label=${spec%%@*} bin=$default_bin
        [[ $spec == *@* ]] && bin=${spec#*@}
        env_args=()
        if [ -n "$settings" ]; then
            IFS=, read -r -a env_args <<<"$settings"
        fi
        out=$(env "${env_args[@]}" LD_LIBRARY_PATH="$PWD/$bin:${LD_LIBRARY_PATH:-}" \
            timeout "$timeout_s" "$bin/bench_decode" "$@" 2>&1)
        rc=$?
        # "decode batch B depth D: X ms/step, ..." -> "bB dD X"
        cells=$(sed -n -E 's/^decode batch ([0-9]+) depth ([0-9]+): ([0-9.]+) ms.*/b\1 d\2 \3/p' <<<"$out")
        if [ $rc -ne 0 ] || [ -z "$cells" ]; then
            echo "== $label r$r: FAILED (exit $rc)"
            tail -5 <<<"$out" | sed 's/^/   /'
            status=1
            continue
        fi
        echo "== $label r$r: $(tr '\n' ' ' <<<"$cells")"
        while read -r b d ms; do echo "$label $b $d $ms"; done <<<"$cells" >>"$results"
    done
done

# Summary: per (batch, depth), each variant's mean and its change against the first variant's.
first=${variants[0]%%:*}
first=${first%%@*}
awk -v first="$first" '
    { key = $2 " " $3; sum[$1, key] += $4; n[$1, key]++; if (!(key in seen)) { seen[key] = 1; keys[++nk] = key }
      if (!($1 in vseen)) { vseen[$1] = 1; labels[++nv] = $1 } }
    END {
        if (nk == 0) exit
        print "summary (mean ms per step; change against " first "):"
        for (k = 1; k <= nk; k++) {
            line = sprintf("  %-12s", keys[k])
            base = n[first, keys[k]] ? sum[first, keys[k]] / n[first, keys[k]] : 0
            for (i = 1; i <= nv; i++) {
                l = labels[i]
                if (!n[l, keys[k]]) { line = line sprintf("  %s -", l); continue }
                m = sum[l, keys[k]] / n[l, keys[k]]
                if (l == first || base == 0) line = line sprintf("  %s %.3f", l, m)
                else line = line sprintf("  %s %.3f (%+.1f%%)", l, m, 100 * (m - base) / base)
            }
            print line
        }
    }' "$results"
exit $status
