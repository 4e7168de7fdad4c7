package tokenizer

import (
	"errors"
	"fmt"
	"strings"

	tiktoken "github.com/tiktoken-go/tokenizer"
)

// GPT-2's vocabulary: ids 0..GPT2VocabSize-1, the last of them the
// <|endoftext|> token that separates documents.
const (
	GPT2VocabSize = 50257
	GPT2EOT       = 50256
)

// eotText is how Decode spells GPT2EOT, as tiktoken's decode does.
const eotText = "<|endoftext|>"

// ErrToken marks an id outside the vocabulary.
var ErrToken = errors.New("tokenizer: id outside the vocabulary")

// GPT2 is GPT-2's byte-level BPE tokenizer (tiktoken's r50k_base). It is
// safe for concurrent use.
type GPT2 struct {
	codec tiktoken.Codec
	del   *delEncoder // for texts with DEL, which the module drops (del.go)
}

// NewGPT2 returns GPT-2's tokenizer. The vocabulary is compiled into the
// binary, so this needs neither network nor files.
func NewGPT2() (*GPT2, error) {
	c, err := tiktoken.Get(tiktoken.R50kBase)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: r50k_base: %w", err)
	}
	// Python's errors="replace", which tiktoken's decode uses; encode then
	// sees the string Python would have read from the same bytes.
	c.SetErrorMode(tiktoken.ErrorModeReplace)
	return &GPT2{codec: c, del: &delEncoder{}}, nil
}

// VocabSize is the number of ids, 50257.
func (g *GPT2) VocabSize() int { return GPT2VocabSize }

// EOT is the <|endoftext|> id, 50256.
func (g *GPT2) EOT() int { return GPT2EOT }

// Encode returns text's ids (tiktoken's encode_ordinary: a literal
// "<|endoftext|>" in text is ordinary text).
func (g *GPT2) Encode(text string) ([]int, error) {
	if strings.IndexByte(text, del) >= 0 {
		var out []int
		err := g.del.encode(text, func(id int) { out = append(out, id) })
		return out, err
	}
	ids, _, err := g.codec.Encode(text)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: encode: %w", err)
	}
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out, nil
}

// AppendUint16 appends text's ids to dst as uint16, the width of llm.c's
// and nanoGPT's token files (every GPT-2 id fits), and returns the
// extended slice.
func (g *GPT2) AppendUint16(dst []uint16, text string) ([]uint16, error) {
	if strings.IndexByte(text, del) >= 0 {
		err := g.del.encode(text, func(id int) { dst = append(dst, uint16(id)) })
		return dst, err
	}
	ids, _, err := g.codec.Encode(text)
	if err != nil {
		return dst, fmt.Errorf("tokenizer: encode: %w", err)
	}
	for _, id := range ids {
		dst = append(dst, uint16(id)) // ids < GPT2VocabSize < 1<<16
	}
	return dst, nil
}

// Decode returns the text of ids; GPT2EOT decodes to "<|endoftext|>". An id
// outside 0..GPT2VocabSize-1 is an error wrapping ErrToken that names it and
// its position.
func (g *GPT2) Decode(ids []int) (string, error) {
	// The module's r50k_base has no entry for EOT, so decode the runs
	// between EOTs and join them.
	var out []byte
	run := make([]uint, 0, len(ids))
	flush := func() error {
		if len(run) == 0 {
			return nil
		}
		s, err := g.codec.Decode(run)
		if err != nil {
			return fmt.Errorf("tokenizer: decode: %w", err)
		}
		out = append(out, s...)
		run = run[:0]
		return nil
	}
	for i, id := range ids {
		if id < 0 || id >= GPT2VocabSize {
			return "", fmt.Errorf("%w: id %d at position %d, GPT-2 has ids 0..%d", ErrToken, id, i, GPT2VocabSize-1)
		}
		if id == GPT2EOT {
			if err := flush(); err != nil {
				return "", err
			}
			out = append(out, eotText...)
			continue
		}
		run = append(run, uint(id))
	}
	if err := flush(); err != nil {
		return "", err
	}
	return string(out), nil
}
