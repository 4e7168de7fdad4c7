package data

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzTokenFile feeds arbitrary bytes to OpenTokens: it must fail with
// ErrFormat or ErrConfig, or give windows whose tokens are the file's
// (after the header, if any), every one below the vocabulary or a Get error
// naming ErrFormat, with Validate agreeing.
func FuzzTokenFile(f *testing.F) {
	hdr := make([]byte, LLMCHeaderBytes)
	binary.LittleEndian.PutUint32(hdr, LLMCMagic)
	binary.LittleEndian.PutUint32(hdr[4:], LLMCVersion)
	binary.LittleEndian.PutUint32(hdr[8:], 4)
	f.Add(append(hdr, 1, 0, 2, 0, 3, 0, 4, 0))
	f.Add([]byte{1, 0, 2, 0, 3, 0, 0xff, 0xff, 5, 0})
	f.Add([]byte{0xd9, 0xd8, 0x34, 0x01, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "f.bin")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		const vocab, T = 300, 2
		ds, err := OpenTokens([]string{path}, T, TokensVocab(vocab))
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v wraps neither ErrFormat nor ErrConfig", err)
			}
			return
		}
		defer ds.Close()
		body := b
		if ds.files[0].Format() == TokensLLMC {
			body = b[LLMCHeaderBytes:]
		}
		allOK := true
		for i := range ds.Len() {
			s, err := ds.Get(i)
			if err != nil {
				if !errors.Is(err, ErrFormat) {
					t.Fatalf("Get(%d): %v", i, err)
				}
				allOK = false
				continue
			}
			for k, v := range s.Input.I64() {
				if want := binary.LittleEndian.Uint16(body[2*(i*T+k):]); v != int64(want) || v >= vocab {
					t.Fatalf("window %d token %d = %d, file has %d", i, k, v, want)
				}
			}
		}
		if err := ds.Validate(); allOK && err != nil && ds.Len()*T+1 == ds.files[0].Len() {
			t.Fatalf("every window read but Validate says %v", err)
		} else if !allOK && err == nil {
			t.Fatal("a window failed but Validate found nothing")
		}
	})
}
