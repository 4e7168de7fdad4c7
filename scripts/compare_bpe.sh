#!/usr/bin/env bash
# Compares goddp's GPT-2 ids for a whole text file with those of the npm
# package gpt-3-encoder (the reference of scripts/gen_fixtures_bpe.sh), for
# checks beyond the committed fixture on real corpora:
#
#	zcat /usr/share/dictd/gcide.dict.dz | head -c 3000000 > /tmp/g3.txt
#	bash scripts/compare_bpe.sh /tmp/g3.txt
#
# prints "identical: N ids" or the first differing position and exits 1.
# gpt-3-encoder's encode concatenates arrays in a loop (quadratic on a
# large text), so its own pre-tokenizer expression is run here and encode
# is called per piece, which gives the same ids in linear time. Needs node,
# npm and the npm registry; the package goes to a temporary directory.
set -euo pipefail
file=$(realpath "$1")
root=$(cd "$(dirname "$0")/.." && pwd)
version=1.1.4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm install --silent --no-save --no-audit --no-fund --ignore-scripts "gpt-3-encoder@$version" >/dev/null)
(cd "$root" && go run ./cmd/tokenize -o "$tmp/out" -prefix t -val-tokens 0 -shard-size 2147483647 "$file" >/dev/null 2>&1)

FILE="$file" SHARD="$tmp/out/t_train_000001.bin" NODE_PATH="$tmp/node_modules" node - <<'EOF'
const fs = require('fs');
const { encode } = require('gpt-3-encoder');
// gpt-3-encoder's Encoder.js pattern, verbatim.
const pat = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;
const text = fs.readFileSync(process.env.FILE).toString('utf-8');
const ref = [];
for (const m of text.matchAll(pat)) for (const id of encode(m[0])) ref.push(id);
const b = fs.readFileSync(process.env.SHARD);
const n = b.readInt32LE(8);
// The shard starts with the <|endoftext|> that precedes every document.
if (n < 1 || b.readUInt16LE(1024) !== 50256) throw new Error('shard does not start with EOT');
const ours = [];
for (let i = 1; i < n; i++) ours.push(b.readUInt16LE(1024 + 2 * i));
for (let i = 0; i < Math.max(ref.length, ours.length); i++) {
  if (ref[i] !== ours[i]) {
    console.log(`differ at id ${i}: goddp ${ours.slice(i, i + 5)}, gpt-3-encoder ${ref.slice(i, i + 5)}`);
    process.exit(1);
  }
}
console.log(`identical: ${ref.length} ids`);
EOF
