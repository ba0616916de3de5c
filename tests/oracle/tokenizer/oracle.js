#!/usr/bin/env node
// ninfer tests - tokenizer oracle: @lenml/tokenizers (a port of transformers' tokenizers) encodes
// our corpus so that ninferctl's ids can be compared with it, line by line.
//
//   node oracle.js prepare TOKENIZER_DIR OUT_DIR [--qwen35-regex]
//       writes OUT_DIR/tokenizer.json (+ tokenizer_config.json; with --qwen35-regex the Split regex
//       is replaced by Qwen3.5's, vocabulary unchanged), OUT_DIR/cases.jsonl (one JSON string per
//       case), OUT_DIR/expected.txt (the oracle's ids, one line per case) and OUT_DIR/nfc.jsonl.
//   node oracle.js compare OUT_DIR OURS_IDS OURS_DECODED
//       exits 1 with a report if any line of ids differs or decode(encode(x)) != NFC(x).
"use strict";
const fs = require("fs");
const path = require("path");

const NPM = process.env.NINFER_NPM_DIR || "/opt/ninfer-npm/node_modules";
// Qwen3.5's pre-tokenizer (docs/MODEL.md §14): \p{M} joins letters, digits one by one.
const QWEN35_REGEX =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

function corpusCases() {
  const dir = __dirname;
  const cases = [];
  for (const name of fs.readdirSync(dir).filter((n) => /^corpus.*\.txt$/.test(n)).sort()) {
    const text = fs.readFileSync(path.join(dir, name), "utf8");
    const lines = text.split("\n").filter((l) => l.length > 0);
    if (name === "corpus_escaped.txt") {
      for (const l of lines) cases.push(JSON.parse(l));
    } else {
      cases.push(...lines);
      cases.push(text); // the whole file once, with its newlines
    }
  }
  return cases;
}

function setSplitRegex(preTokenizer, regex) {
  let n = 0;
  const visit = (p) => {
    if (!p) return;
    if (p.type === "Sequence") p.pretokenizers.forEach(visit);
    if (p.type === "Split" && p.pattern.Regex !== undefined) { p.pattern.Regex = regex; n++; }
  };
  visit(preTokenizer);
  if (n !== 1) throw new Error(`expected one Split regex, found ${n}`);
}

function prepare(tokenizerDir, outDir, qwen35) {
  const { TokenizerLoader } = require(path.join(NPM, "@lenml/tokenizers"));
  const tokenizerJSON = JSON.parse(fs.readFileSync(path.join(tokenizerDir, "tokenizer.json"), "utf8"));
  const tokenizerConfig = JSON.parse(fs.readFileSync(path.join(tokenizerDir, "tokenizer_config.json"), "utf8"));
  if (qwen35) setSplitRegex(tokenizerJSON.pre_tokenizer, QWEN35_REGEX);
  fs.mkdirSync(outDir, { recursive: true });
  fs.writeFileSync(path.join(outDir, "tokenizer.json"), JSON.stringify(tokenizerJSON));
  fs.writeFileSync(path.join(outDir, "tokenizer_config.json"), JSON.stringify(tokenizerConfig));
  const tokenizer = TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });
  const cases = corpusCases();
  const ids = cases.map((c) => tokenizer.encode(c, { add_special_tokens: false }).join(" "));
  fs.writeFileSync(path.join(outDir, "cases.jsonl"), cases.map((c) => JSON.stringify(c)).join("\n") + "\n");
  fs.writeFileSync(path.join(outDir, "expected.txt"), ids.join("\n") + "\n");
  fs.writeFileSync(path.join(outDir, "nfc.jsonl"), cases.map((c) => JSON.stringify(c.normalize("NFC"))).join("\n") + "\n");
  const bytes = cases.reduce((n, c) => n + Buffer.byteLength(c, "utf8"), 0);
  console.log(`oracle: ${cases.length} cases, ${bytes} bytes${qwen35 ? " (Qwen3.5 regex)" : ""}`);
}

function compare(outDir, oursIdsPath, oursDecodedPath) {
  const lines = (p) => fs.readFileSync(p, "utf8").split("\n").slice(0, -1);
  const cases = lines(path.join(outDir, "cases.jsonl")).map((l) => JSON.parse(l));
  const expected = lines(path.join(outDir, "expected.txt"));
  const nfc = lines(path.join(outDir, "nfc.jsonl")).map((l) => JSON.parse(l));
  const ours = lines(oursIdsPath);
  const decoded = lines(oursDecodedPath).map((l) => JSON.parse(l));
  let failures = 0;
  const report = (what, i, a, b) => {
    if (++failures <= 20)
      console.log(`${what} case ${i}: ${JSON.stringify(cases[i]).slice(0, 120)}\n  oracle: ${a.slice(0, 300)}\n  ours:   ${b.slice(0, 300)}`);
  };
  if (ours.length !== cases.length || decoded.length !== cases.length)
    throw new Error(`line counts differ: ${cases.length} cases, ${ours.length} id lines, ${decoded.length} decoded`);
  for (let i = 0; i < cases.length; i++) {
    if (ours[i] !== expected[i]) report("ids differ:", i, expected[i], ours[i]);
    if (decoded[i] !== nfc[i]) report("decode(encode(x)) != NFC(x):", i, JSON.stringify(nfc[i]), JSON.stringify(decoded[i]));
  }
  console.log(`oracle: ${cases.length} cases compared, ${failures} failures`);
  process.exit(failures ? 1 : 0);
}

const [mode, a, b, c] = process.argv.slice(2);
if (mode === "prepare") prepare(a, b, c === "--qwen35-regex");
else if (mode === "compare") compare(a, b, c);
else { console.error("usage: oracle.js prepare DIR OUT [--qwen35-regex] | compare OUT IDS DECODED"); process.exit(2); }
