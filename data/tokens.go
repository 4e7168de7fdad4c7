package data

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/goddp/goddp/internal/mmapfile"
	"github.com/goddp/goddp/tensor"
)

// TokenFormat is the layout of a token file.
type TokenFormat int

const (
	// TokensAuto reads llm.c's layout when the file starts with its magic
	// number and nanoGPT's otherwise (see OpenTokenFile).
	TokensAuto TokenFormat = iota
	// TokensLLMC is llm.c's shard: a header of 256 little-endian int32s
	// (LLMCMagic, LLMCVersion, the token count, zeros), then the tokens as
	// little-endian uint16.
	TokensLLMC
	// TokensNanoGPT is nanoGPT's train.bin/val.bin: little-endian uint16
	// tokens and nothing else.
	TokensNanoGPT
)

func (f TokenFormat) String() string {
	switch f {
	case TokensAuto:
		return "auto"
	case TokensLLMC:
		return "llm.c"
	case TokensNanoGPT:
		return "nanoGPT"
	}
	return fmt.Sprintf("TokenFormat(%d)", int(f))
}

// llm.c's token shard header (dev/data/data_common.py, write_datafile).
const (
	LLMCMagic       = 20240520
	LLMCVersion     = 1    // uint16 tokens; llm.c's version 2 holds uint32 LLaMA-3 tokens
	LLMCHeaderBytes = 1024 // 256 int32s
)

// GPT2VocabSize is the default vocabulary bound for token files: GPT-2's
// 50257 ids (tokenizer.GPT2VocabSize; data does not import the tokenizer).
const GPT2VocabSize = 50257

// TokenFile is one token file, memory-mapped read-only. Its tokens are
// viewed in place, not copied.
type TokenFile struct {
	path   string
	format TokenFormat
	mm     *mmapfile.File
	tokens []uint16
}

// OpenTokenFile maps path and checks its layout. With TokensAuto a file
// whose first int32 is LLMCMagic is read as llm.c's, and any other as
// nanoGPT's headerless tokens, unless its first token would then be vocab
// or more: then it is neither (a damaged llm.c header, say), and the error
// names the magic it found. Errors wrap ErrFormat and name the file and the numbers: a wrong
// magic or version, a size other than 1024 + 2·count bytes, an odd size.
// vocab bounds only that sniff here; token values are checked as windows
// are read (TokenDataset) or all at once by Validate.
func OpenTokenFile(path string, format TokenFormat, vocab int) (*TokenFile, error) {
	mm, err := mmapfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("data: token file: %w", err)
	}
	f := &TokenFile{path: path, mm: mm}
	if err := f.parse(format, vocab); err != nil {
		mm.Close()
		return nil, err
	}
	return f, nil
}

func (f *TokenFile) parse(format TokenFormat, vocab int) error {
	b := f.mm.Bytes()
	bad := func(msg string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrFormat, f.path, fmt.Sprintf(msg, args...))
	}
	if format == TokensAuto {
		switch {
		case len(b) >= 4 && binary.LittleEndian.Uint32(b) == LLMCMagic:
			format = TokensLLMC
		case len(b) >= 4 && int(binary.LittleEndian.Uint16(b)) >= vocab:
			return bad("neither llm.c's token shard (magic %d, want %d) nor headerless uint16 tokens (first token %d, vocabulary %d)",
				int32(binary.LittleEndian.Uint32(b)), LLMCMagic, binary.LittleEndian.Uint16(b), vocab)
		default:
			format = TokensNanoGPT
		}
	}
	f.format = format
	switch format {
	case TokensLLMC:
		if len(b) < LLMCHeaderBytes {
			return bad("%d bytes, shorter than llm.c's %d-byte header", len(b), LLMCHeaderBytes)
		}
		hdr := func(i int) int32 { return int32(binary.LittleEndian.Uint32(b[4*i:])) }
		if m := hdr(0); m != LLMCMagic {
			return bad("magic %d, want %d (llm.c's token shard)", m, LLMCMagic)
		}
		switch v := hdr(1); v {
		case LLMCVersion:
		case 2:
			return bad("version 2 (llm.c's uint32 LLaMA-3 tokens) is not supported, want %d (uint16 GPT-2 tokens)", LLMCVersion)
		default:
			return bad("version %d, want %d", v, LLMCVersion)
		}
		count := int64(hdr(2))
		if count < 0 || int64(len(b)) != LLMCHeaderBytes+2*count {
			return bad("%d bytes, but its header counts %d tokens, which take %d+2·%d = %d bytes",
				len(b), count, LLMCHeaderBytes, count, LLMCHeaderBytes+2*count)
		}
		f.tokens = mmapfile.Uint16s(b[LLMCHeaderBytes:])
	case TokensNanoGPT:
		if len(b)%2 != 0 {
			return bad("%d bytes, an odd size; headerless uint16 tokens take 2 bytes each", len(b))
		}
		f.tokens = mmapfile.Uint16s(b)
	default:
		return fmt.Errorf("%w: %s: unknown token format %v", ErrConfig, f.path, format)
	}
	return nil
}

// Path is the file's path as given to OpenTokenFile.
func (f *TokenFile) Path() string { return f.path }

// Format is the layout the file was read with (never TokensAuto).
func (f *TokenFile) Format() TokenFormat { return f.format }

// Len is the number of tokens.
func (f *TokenFile) Len() int { return len(f.tokens) }

// Tokens are the file's tokens, viewing the mapping: valid until Close,
// and read-only (writing faults).
func (f *TokenFile) Tokens() []uint16 { return f.tokens }

// Close unmaps the file.
func (f *TokenFile) Close() error {
	f.tokens = nil
	if err := f.mm.Close(); err != nil {
		return fmt.Errorf("data: token file %s: munmap: %w", f.path, err)
	}
	return nil
}

// checkTokens returns an error naming the first token of toks, which start
// at token offset off in f, that is not below vocab.
func (f *TokenFile) checkTokens(toks []uint16, off, vocab int) error {
	for k, t := range toks {
		if int(t) >= vocab {
			return f.badToken(off+k, t, vocab)
		}
	}
	return nil
}

func (f *TokenFile) badToken(i int, t uint16, vocab int) error {
	byteOff := 2 * i
	if f.format == TokensLLMC {
		byteOff += LLMCHeaderBytes
	}
	return fmt.Errorf("%w: %s: token %d at token offset %d (byte %d) is not below the vocabulary size %d",
		ErrFormat, f.path, t, i, byteOff, vocab)
}

// TokenDataset is a language-model dataset over token files: sample i is a
// window of SeqLen+1 consecutive tokens, Input its first SeqLen and Target
// its last SeqLen (the next token at each position), both int64 [SeqLen].
//
// A file of n tokens holds (n-1)/SeqLen windows, at token offsets 0,
// SeqLen, 2·SeqLen, ...: consecutive windows share one token, so every
// token but the last few is a target exactly once per epoch, and no window
// crosses from one file into the next (as llm.c's DataLoader). The windows
// are numbered file by file in the order the files were given.
//
// The dataset is map-style, so a DistributedSampler deals the windows to
// ranks as for any Dataset: a seeded permutation per epoch, each window
// once per epoch across the ranks (plus torch's wrap-around padding), and
// mid-epoch resumption through the sampler's State. It implements
// BatchGetter, so a DataLoader assembles [B, SeqLen] batches directly.
//
// Tokens are checked against the vocabulary as each window is read: a
// token not below it fails Get with an error naming the file and the
// token's offset. Checking at open would read the whole corpus from disk
// on every rank before the first step; Validate does that on request.
//
// Get and GetBatch are safe for concurrent use, and against Close: after
// Close they return an error instead of touching the unmapped memory.
type TokenDataset struct {
	mu     sync.RWMutex // Get holds it shared; Close exclusively
	files  []*TokenFile
	ends   []int // cumulative window counts per file
	seqLen int
	vocab  int
	closed bool
}

type tokenConfig struct {
	vocab  int
	format TokenFormat
}

// TokenOption configures OpenTokens and OpenTokenSplits.
type TokenOption func(*tokenConfig)

// TokensVocab sets the vocabulary size tokens must stay below (default
// GPT2VocabSize).
func TokensVocab(n int) TokenOption { return func(c *tokenConfig) { c.vocab = n } }

// TokensFormat fixes the file layout instead of detecting it (TokensAuto).
func TokensFormat(f TokenFormat) TokenOption { return func(c *tokenConfig) { c.format = f } }

// OpenTokens maps the token files at paths, in that order, as one dataset
// of windows of seqLen+1 tokens. It fails if a file is malformed (an error
// naming it; the files already mapped are closed), or if no file holds a
// whole window.
func OpenTokens(paths []string, seqLen int, opts ...TokenOption) (*TokenDataset, error) {
	c := tokenConfig{vocab: GPT2VocabSize}
	for _, o := range opts {
		o(&c)
	}
	if seqLen <= 0 {
		return nil, fmt.Errorf("%w: token sequence length %d must be positive", ErrConfig, seqLen)
	}
	if c.vocab <= 0 || c.vocab > 1<<16 {
		return nil, fmt.Errorf("%w: token vocabulary size %d must be in 1..65536 (uint16 tokens)", ErrConfig, c.vocab)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("%w: no token files", ErrConfig)
	}
	d := &TokenDataset{seqLen: seqLen, vocab: c.vocab}
	total, tokens := 0, 0
	for _, p := range paths {
		f, err := OpenTokenFile(p, c.format, c.vocab)
		if err != nil {
			d.Close()
			return nil, err
		}
		d.files = append(d.files, f)
		if f.Len() > 0 {
			total += (f.Len() - 1) / seqLen
		}
		tokens += f.Len()
		d.ends = append(d.ends, total)
	}
	if total == 0 {
		d.Close()
		return nil, fmt.Errorf("%w: %d token file(s) (%s...) hold %d tokens and no window of seq_len+1 = %d tokens",
			ErrConfig, len(paths), paths[0], tokens, seqLen+1)
	}
	return d, nil
}

// OpenTokenSplits opens the training and validation sets in dir, which is
// a directory or a glob pattern of token files. A file whose name has
// "val" as a word (split at '_', '-', '.') is validation: llm.c's shard 0
// (fineweb_val_000000.bin), tiny_shakespeare_val.bin, nanoGPT's val.bin;
// one with "train" is training; each set is sorted by name. Another file
// (in a directory, only *.bin files are considered) is an error naming
// it, as is a set left empty.
func OpenTokenSplits(dir string, seqLen int, opts ...TokenOption) (train, val *TokenDataset, err error) {
	pattern := dir
	if isDir(dir) {
		pattern = filepath.Join(dir, "*.bin")
	}
	paths, err := filepath.Glob(pattern)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: token files %q: %w", ErrConfig, dir, err)
	}
	var trainPaths, valPaths []string
	for _, p := range paths {
		switch splitOf(filepath.Base(p)) {
		case "train":
			trainPaths = append(trainPaths, p)
		case "val":
			valPaths = append(valPaths, p)
		default:
			return nil, nil, fmt.Errorf("%w: token file %s is neither validation (*_val_*.bin, val.bin) nor training (*_train_*.bin, train.bin)", ErrConfig, p)
		}
	}
	if len(trainPaths) == 0 || len(valPaths) == 0 {
		return nil, nil, fmt.Errorf("%w: %q has %d training and %d validation token files; want at least one of each (*_train_*.bin and *_val_*.bin, or train.bin and val.bin)",
			ErrConfig, dir, len(trainPaths), len(valPaths))
	}
	sort.Strings(trainPaths)
	sort.Strings(valPaths)
	if train, err = OpenTokens(trainPaths, seqLen, opts...); err != nil {
		return nil, nil, err
	}
	if val, err = OpenTokens(valPaths, seqLen, opts...); err != nil {
		train.Close()
		return nil, nil, err
	}
	return train, val, nil
}

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// splitOf is "val" or "train" when exactly one of those words is a field
// of name (without .bin, split at '_', '-' and '.'): llm.c's
// fineweb_val_000000.bin and tiny_shakespeare_train.bin, nanoGPT's
// val.bin; "" otherwise.
func splitOf(name string) string {
	fields := strings.FieldsFunc(strings.TrimSuffix(name, ".bin"), func(r rune) bool { return r == '_' || r == '-' || r == '.' })
	isVal, isTrain := false, false
	for _, f := range fields {
		isVal = isVal || f == "val"
		isTrain = isTrain || f == "train"
	}
	switch {
	case isVal && !isTrain:
		return "val"
	case isTrain && !isVal:
		return "train"
	}
	return ""
}

// Len is the number of windows.
func (d *TokenDataset) Len() int {
	if len(d.ends) == 0 {
		return 0
	}
	return d.ends[len(d.ends)-1]
}

// SeqLen is the number of input (and target) tokens per sample.
func (d *TokenDataset) SeqLen() int { return d.seqLen }

// VocabSize is the bound tokens are checked against.
func (d *TokenDataset) VocabSize() int { return d.vocab }

// NumTokens is the number of tokens in all files.
func (d *TokenDataset) NumTokens() int64 {
	var n int64
	for _, f := range d.files {
		n += int64(f.Len())
	}
	return n
}

// Paths are the files, in window order.
func (d *TokenDataset) Paths() []string {
	out := make([]string, len(d.files))
	for i, f := range d.files {
		out[i] = f.Path()
	}
	return out
}

// ErrClosed marks use of a closed TokenDataset.
var ErrClosed = errors.New("data: token dataset is closed")

// window returns window i's SeqLen+1 tokens, checked against the
// vocabulary. The caller holds d.mu shared.
func (d *TokenDataset) window(i int) ([]uint16, error) {
	if d.closed {
		return nil, ErrClosed
	}
	if i < 0 || i >= d.Len() {
		return nil, fmt.Errorf("%w: index %d, token dataset has %d windows", ErrIndex, i, d.Len())
	}
	k := sort.SearchInts(d.ends, i+1)
	start := 0
	if k > 0 {
		start = d.ends[k-1]
	}
	f := d.files[k]
	off := (i - start) * d.seqLen
	toks := f.tokens[off : off+d.seqLen+1]
	if err := f.checkTokens(toks, off, d.vocab); err != nil {
		return nil, err
	}
	return toks, nil
}

// Get returns window i: Input its tokens 0..SeqLen-1 and Target its tokens
// 1..SeqLen, int64 [SeqLen] views of one fresh buffer.
func (d *TokenDataset) Get(i int) (Sample, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	toks, err := d.window(i)
	if err != nil {
		return Sample{}, err
	}
	buf := make([]int64, len(toks))
	for k, t := range toks {
		buf[k] = int64(t)
	}
	T := d.seqLen
	return Sample{Input: tensor.FromI64(buf[:T:T], T), Target: tensor.FromI64(buf[1:], T)}, nil
}

// GetBatch assembles windows indices into Inputs and Targets, int64
// [len(indices), SeqLen].
func (d *TokenDataset) GetBatch(indices []int) (Batch, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	T := d.seqLen
	in := make([]int64, len(indices)*T)
	tg := make([]int64, len(indices)*T)
	for b, i := range indices {
		toks, err := d.window(i)
		if err != nil {
			return Batch{}, err
		}
		row, trow := in[b*T:(b+1)*T], tg[b*T:(b+1)*T]
		for k := range T {
			row[k] = int64(toks[k])
			trow[k] = int64(toks[k+1])
		}
	}
	return Batch{Inputs: tensor.FromI64(in, len(indices), T), Targets: tensor.FromI64(tg, len(indices), T),
		Indices: append([]int(nil), indices...)}, nil
}

// Validate checks every token of every file against the vocabulary and
// returns the first bad one (file and offset), reading the whole corpus.
func (d *TokenDataset) Validate() error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		return ErrClosed
	}
	for _, f := range d.files {
		if err := f.checkTokens(f.tokens, 0, d.vocab); err != nil {
			return err
		}
	}
	return nil
}

// Close unmaps the files. Later calls of Get, GetBatch and Validate fail
// with ErrClosed. Closing twice is a no-op.
func (d *TokenDataset) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	var errs []error
	for _, f := range d.files {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}
