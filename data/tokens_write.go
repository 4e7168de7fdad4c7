package data

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"path/filepath"

	"github.com/goddp/goddp/internal/atomicfile"
)

// WriteTokenFile writes tokens to path in format (TokensLLMC, the default
// for TokensAuto, or TokensNanoGPT), little-endian, atomically: through a
// temporary file in the same directory that is fsynced and renamed, so a
// reader never sees half a file. llm.c's header counts tokens in an int32,
// so an llm.c file holds at most 2³¹-1 of them.
func WriteTokenFile(path string, tokens []uint16, format TokenFormat) error {
	if format == TokensAuto {
		format = TokensLLMC
	}
	if format != TokensLLMC && format != TokensNanoGPT {
		return fmt.Errorf("%w: WriteTokenFile %s: unknown token format %v", ErrConfig, path, format)
	}
	if format == TokensLLMC && len(tokens) > math.MaxInt32 {
		return fmt.Errorf("%w: WriteTokenFile %s: %d tokens, llm.c's header holds at most %d", ErrConfig, path, len(tokens), math.MaxInt32)
	}
	err := atomicfile.Write(path, "."+filepath.Base(path)+".tmp-*", func(w io.Writer) error {
		if format == TokensLLMC {
			var hdr [LLMCHeaderBytes]byte
			binary.LittleEndian.PutUint32(hdr[0:], LLMCMagic)
			binary.LittleEndian.PutUint32(hdr[4:], LLMCVersion)
			binary.LittleEndian.PutUint32(hdr[8:], uint32(len(tokens)))
			if _, err := w.Write(hdr[:]); err != nil {
				return err
			}
		}
		buf := make([]byte, 0, 64<<10)
		for len(tokens) > 0 {
			n := min(len(tokens), cap(buf)/2)
			buf = buf[:0]
			for _, t := range tokens[:n] {
				buf = binary.LittleEndian.AppendUint16(buf, t)
			}
			if _, err := w.Write(buf); err != nil {
				return err
			}
			tokens = tokens[n:]
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("data: WriteTokenFile %s: %w", path, err)
	}
	return nil
}
