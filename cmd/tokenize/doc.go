// Command tokenize turns text into GPT-2 token shards in llm.c's format,
// which data.OpenTokenSplits and data.OpenTokens read for training. It is
// the command-line face of internal/tokenshards, which programs in this
// module can call directly.
//
//	tokenize -o data/web -prefix web -shard-size 100000000 corpus/*.txt
//	cat book.txt | tokenize -o data/book -prefix book -val-tokens 32768
//	tokenize -o data/gcide -prefix gcide -paragraphs -shard-size 10000000 /usr/share/dictd/gcide.dict.dz
//
// # Input
//
// The arguments are text files, glob patterns (quoted, so that the command
// expands them; each must match a file) or "-" for standard input, which is
// also the input when there are no arguments. A gzip stream is decompressed
// whatever its name, including dictd's dictzip (.dz) files. Text is UTF-8;
// invalid bytes become U+FFFD as Python's errors="replace" makes them.
//
// A document is a whole input, or with -paragraphs each run of non-blank
// lines (a blank line holds only whitespace; the last line end of a
// paragraph is dropped). Every document is preceded by <|endoftext|>
// (50256), as llm.c's fineweb.py does, so documents are separated by it
// and the first one starts after it too. The text "<|endoftext|>" inside a
// document is ordinary text (tiktoken's encode_ordinary).
//
// # Output
//
// Shards in -o named PREFIX_val_000000.bin (shard 0, the validation shard,
// -val-tokens tokens; default -shard-size, as fineweb.py's first shard),
// then PREFIX_train_000001.bin, PREFIX_train_000002.bin, ... of -shard-size
// tokens each, the last one shorter. A document may straddle two shards,
// as in fineweb.py. Each file is llm.c's: a header of 256 little-endian
// int32s (magic 20240520, version 1, token count) and the tokens as
// little-endian uint16. Files are written atomically (a temporary file in
// -o, fsynced, renamed), so an interrupted run leaves whole shards only.
//
// # Speed and memory
//
// Inputs are cut into pieces of about -chunk bytes at points where GPT-2's
// pre-tokenizer cuts anyway (tokenizer.LastCut), so the pieces encode to
// the ids of the whole; -workers goroutines (default: all cores) encode
// them, and the ids are reassembled in input order: the output does not
// depend on -workers or -chunk. Memory stays near 2·-shard-size bytes for
// the shard being filled plus 4·-workers pieces in flight, whatever the
// size of the corpus or of a single document. Encoding costs about 1.2
// million tokens per second of CPU time: the GCIDE run below made 16.05
// million tokens from 39.4 MB in 8.4 s on 2 cores (154% CPU, 1.9 million
// tokens/s, 104 MB peak resident; /usr/bin/time -v, 2026-11-29, on a
// machine shared with other jobs).
//
// # Example: the GCIDE dictionary
//
// Debian's dict-gcide package (apt-get install dict-gcide) installs the
// Collaborative International Dictionary of English as
// /usr/share/dictd/gcide.dict.dz (13.5 MB compressed, 39.4 MB of text):
//
//	go run ./cmd/tokenize -o data/gcide -prefix gcide -paragraphs \
//	    -shard-size 10000000 -val-tokens 1000000 /usr/share/dictd/gcide.dict.dz
//
// writes gcide_val_000000.bin (1M tokens), gcide_train_000001.bin (10M)
// and gcide_train_000002.bin (5.05M) from 252829 paragraphs; then train on
// data.OpenTokenSplits("data/gcide", 1024).
package main
