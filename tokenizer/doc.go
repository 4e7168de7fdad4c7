// Package tokenizer turns text into GPT-2's token ids and back: GPT-2's
// byte-level BPE, the encoding tiktoken calls r50k_base (OpenAI's
// encoder.json and vocab.bpe), with its 50257 ids, the last of which, 50256,
// is <|endoftext|>.
//
// It is a thin wrapper over the Go module github.com/tiktoken-go/tokenizer
// (MIT licence, pinned at v0.10.0 in go.mod), which embeds the vocabulary in
// the binary: nothing is downloaded or read from disk at run time, unlike
// Python's tiktoken, which fetches it on first use. The wrapper adds what a
// training pipeline needs and the module lacks: ids as ints or uint16, the
// <|endoftext|> id (the module's r50k_base cannot decode it), bounds
// checks that name the bad id, and safe cut points for encoding a large
// text in pieces.
//
// One flaw of the module is mended here: v0.10.0's pre-tokenizer drops
// U+007F (DEL), so a text holding DEL is encoded by this package's own
// byte-pair merge over the module's vocabulary instead (del.go), which
// gives GPT-2's id 221 and is checked against the module on every other
// text (TestDELPathMatchesModule, FuzzCuts). It also uses
// github.com/dlclark/regexp2/v2 (MIT), the module's own dependency.
//
// # Semantics
//
// Encode is tiktoken's encode_ordinary, which llm.c's and nanoGPT's data
// scripts use: the text "<|endoftext|>" inside a document is encoded as
// ordinary text (seven ids), never as the special token; a data pipeline
// inserts EOT between documents itself. Invalid UTF-8 is first replaced as
// Python's bytes.decode(errors="replace") does (one U+FFFD per maximal
// invalid subsequence), and Decode of ids that end inside a multi-byte
// character gives U+FFFD likewise, as tiktoken's decode does by default.
//
// The ids equal those of an independent implementation, the npm package
// gpt-3-encoder (a port of OpenAI's encoder.py that applies vocab.bpe's
// merges one pair at a time) on testdata/tokenizer/sample.txt, a text with
// contractions, numbers, whitespace runs, CRLF, accents, other scripts and
// emoji; scripts/gen_fixtures_bpe.sh produced the fixture and
// TestGPT2MatchesIndependentEncoder compares. scripts/compare_bpe.sh does
// the same for any file: on the first 3 MB of Debian's GCIDE dictionary
// the two gave the same 1212049 ids (2026-11-29).
//
// # Encoding in pieces
//
// GPT-2 first splits text with a regular expression and then applies BPE to
// each piece, so encoding two halves of a text separately gives the ids of
// the whole only if the cut falls where the expression would cut anyway.
// LastCut finds such points (a line end between two visible ASCII
// characters, or the space before a word between two ASCII letters), and
// Chunks uses it to split a text that goroutines then encode in parallel;
// the concatenated ids equal Encode of the whole (TestChunksEncodeAsWhole
// checks every cut point of the sample).
//
// A GPT2 is safe for concurrent use. One goroutine encodes 3 to 4 MB of
// English text (about a million tokens) per second; cmd/tokenize runs
// one per core.
package tokenizer
