// Package tokenshards is cmd/tokenize's engine, importable by programs in
// this module (examples/gpt2 prepares its data with it): text in, GPT-2
// token shards in llm.c's format out.
//
// Write reads the inputs in order and cuts each into documents (a whole
// input, or with Config.Paragraphs each run of non-blank lines without its
// last line end), every document preceded by <|endoftext|> as in llm.c's
// fineweb.py. The text is cut into pieces of about Config.Chunk bytes at
// points where GPT-2's pre-tokenizer cuts anyway (tokenizer.LastCut), so
// the pieces' ids are the document's; Config.Workers goroutines encode the
// pieces and the ids are put back in input order, so the shards do not
// depend on Workers or Chunk. At most 4·Workers pieces are in flight:
// memory is about 2·ShardSize bytes for the shard being filled plus those
// pieces, whatever the size of the corpus or of one document.
//
// Shard 0, PREFIX_val_000000.bin, takes the first ValTokens tokens; then
// PREFIX_train_000001.bin, ... take ShardSize each, the last what is left;
// a document may straddle two shards, as in fineweb.py. Each is written
// atomically by data.WriteTokenFile and read back by data.OpenTokenSplits.
package tokenshards
