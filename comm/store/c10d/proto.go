package c10d

import (
	"encoding/binary"
	"fmt"
	"io"
)

// validationMagic is the u32 a validated server expects after VALIDATE.
const validationMagic = 0x3C85F7CE

// Answers of CHECK and WAIT.
const (
	checkReady    = 0
	checkNotReady = 1
	stopWaiting   = 0
)

// dialect is the op numbering of one generation of torch's protocol.
type dialect struct {
	name                                                 string
	validated                                            bool // connections start with VALIDATE
	set, compareSet, get, add, check, wait, numKeys, del byte
	ping                                                 byte // 0: none
	maxKey, maxValue                                     int  // 0: unbounded
}

// legacy is torch 1.x's numbering (and 2.x's before VALIDATE).
var legacy = dialect{name: "legacy (torch 1.x, no validation)",
	set: 0, compareSet: 1, get: 2, add: 3, check: 4, wait: 5, numKeys: 6, del: 8}

// validated is the numbering since VALIDATE was added; the libuv server's
// key and value bounds apply, since the client cannot tell which server
// it talks to.
var validated = dialect{name: "validated (torch 2.x)", validated: true,
	set: 1, compareSet: 2, get: 3, add: 4, check: 5, wait: 6, numKeys: 7, del: 8, ping: 13,
	maxKey: 8 << 10, maxValue: 8 << 20}

// opValidate is VALIDATE in the validated numbering.
const opValidate = 0

// request builds one request's bytes.
type request []byte

func (r request) op(b byte) request { return append(r, b) }

func (r request) u32(v uint32) request { return binary.LittleEndian.AppendUint32(r, v) }

func (r request) u64(v uint64) request { return binary.LittleEndian.AppendUint64(r, v) }

func (r request) bytes(b []byte) request { return append(r.u64(uint64(len(b))), b...) }

func (r request) str(s string) request { return append(r.u64(uint64(len(s))), s...) }

// keys is the u64 count and the keys, as CHECK and WAIT take them.
func (r request) keys(ks []string) request {
	r = r.u64(uint64(len(ks)))
	for _, k := range ks {
		r = r.str(k)
	}
	return r
}

// validation is the opening of every connection to a validated server.
func validation() request { return request{}.op(opValidate).u32(validationMagic) }

func readU8(r io.Reader) (byte, error) {
	var b [1]byte
	_, err := io.ReadFull(r, b[:])
	return b[0], err
}

func readI64(r io.Reader) (int64, error) {
	var b [8]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, err
	}
	return int64(binary.LittleEndian.Uint64(b[:])), nil
}

// readVec reads a u64 length and that many bytes; limit bounds the length
// before anything is allocated (a server that is not torch's could send
// anything).
func readVec(r io.Reader, limit int) ([]byte, error) {
	n, err := readI64(r)
	if err != nil {
		return nil, err
	}
	if n < 0 || n > int64(limit) {
		return nil, fmt.Errorf("answer of %d bytes, more than the %d any request of this client can have stored", uint64(n), limit)
	}
	b := make([]byte, n)
	_, err = io.ReadFull(r, b)
	return b, err
}
