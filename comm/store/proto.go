package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/goddp/goddp/comm/internal/wire"
	"io"
	"time"
)

// The store's wire protocol, after the handshake (comm/internal/auth): both directions
// carry frames of a big-endian u32 payload length followed by the payload.
//
//	request  = op u8 | id u64 | fields...
//	response = status u8 | id u64 | fields...
//
// Byte strings are u32 length + bytes. Every length is checked against what
// remains of the frame before anything is allocated, and a frame itself is
// read incrementally, so a hostile length field costs no memory it did not
// also send. Requests carry an id so that a client can have several in
// flight; blocking gets and waits answer out of order.

type storeOp uint8

const (
	opSet storeOp = iota + 1
	opGet
	opAdd
	opWait
	opCompareSet
	opDelete
	opNumKeys
	opPing
	opCheck // non-blocking: do all keys exist?
)

func (o storeOp) String() string {
	switch o {
	case opSet:
		return "set"
	case opGet:
		return "get"
	case opAdd:
		return "add"
	case opWait:
		return "wait"
	case opCompareSet:
		return "compare_set"
	case opDelete:
		return "delete"
	case opNumKeys:
		return "num_keys"
	case opPing:
		return "ping"
	case opCheck:
		return "check"
	}
	return fmt.Sprintf("storeOp(%d)", uint8(o))
}

const (
	statusOK uint8 = iota
	statusTimeout
	statusBadRequest
	statusFailed
)

// Protocol limits.
const (
	maxStoreFrame = 64 << 20 // one request or response
	maxStoreKey   = 64 << 10
	maxWaitKeys   = 1 << 16
)

var errStoreProto = errors.New("comm: store protocol error")

type storeRequest struct {
	Op       storeOp
	ID       uint64
	Keys     []string // one for every op but wait/check (any number) and num_keys/ping (none)
	Value    []byte   // set: value; compare_set: desired
	Expected []byte   // compare_set
	Delta    int64    // add
	Timeout  time.Duration
}

type storeResponse struct {
	Status uint8
	ID     uint64
	Value  []byte // get, compare_set; error message for statusBadRequest/Failed
	Int    int64  // add, num_keys, delete (0/1), check (0/1)
}

// encode appends the framed request to dst.
func (r *storeRequest) encode(dst []byte) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, byte(r.Op))
	dst = binary.BigEndian.AppendUint64(dst, r.ID)
	switch r.Op {
	case opSet:
		dst = wire.AppendBytes(dst, []byte(r.Keys[0]))
		dst = wire.AppendBytes(dst, r.Value)
	case opGet:
		dst = wire.AppendBytes(dst, []byte(r.Keys[0]))
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.Timeout.Milliseconds()))
	case opAdd:
		dst = wire.AppendBytes(dst, []byte(r.Keys[0]))
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.Delta))
	case opWait, opCheck:
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(r.Keys)))
		for _, k := range r.Keys {
			dst = wire.AppendBytes(dst, []byte(k))
		}
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.Timeout.Milliseconds()))
	case opCompareSet:
		dst = wire.AppendBytes(dst, []byte(r.Keys[0]))
		dst = wire.AppendBytes(dst, r.Expected)
		dst = wire.AppendBytes(dst, r.Value)
	case opDelete:
		dst = wire.AppendBytes(dst, []byte(r.Keys[0]))
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// decodeStoreRequest parses one request payload (without the length prefix).
func decodeStoreRequest(b []byte) (storeRequest, error) {
	d := wire.Decoder{B: b}
	req := storeRequest{Op: storeOp(d.U8()), ID: d.U64()}
	key := func() { req.Keys = []string{decodeKey(&d)} }
	switch req.Op {
	case opSet:
		key()
		req.Value = d.Bytes()
	case opGet:
		key()
		req.Timeout = d.Millis()
	case opAdd:
		key()
		req.Delta = int64(d.U64())
	case opWait, opCheck:
		n := d.U32()
		// Each key takes at least its 4-byte length: bound the count by
		// what the frame can hold before allocating.
		if n > maxWaitKeys || int(n) > d.Remaining()/4 {
			return req, fmt.Errorf("%w: %s of %d keys", errStoreProto, req.Op, n)
		}
		req.Keys = make([]string, 0, n)
		for i := uint32(0); i < n && d.Err == nil; i++ {
			req.Keys = append(req.Keys, decodeKey(&d))
		}
		req.Timeout = d.Millis()
	case opCompareSet:
		key()
		req.Expected = d.Bytes()
		req.Value = d.Bytes()
	case opDelete:
		key()
	case opNumKeys, opPing:
	default:
		return req, fmt.Errorf("%w: unknown op %d", errStoreProto, uint8(req.Op))
	}
	if d.Err != nil {
		return req, fmt.Errorf("%w: %s: %v", errStoreProto, req.Op, d.Err)
	}
	if d.Remaining() != 0 {
		return req, fmt.Errorf("%w: %s: %d trailing bytes", errStoreProto, req.Op, d.Remaining())
	}
	return req, nil
}

func (r *storeResponse) encode(dst []byte) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, r.Status)
	dst = binary.BigEndian.AppendUint64(dst, r.ID)
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.Int))
	dst = wire.AppendBytes(dst, r.Value)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

func decodeStoreResponse(b []byte) (storeResponse, error) {
	d := wire.Decoder{B: b}
	r := storeResponse{Status: d.U8(), ID: d.U64(), Int: int64(d.U64())}
	r.Value = d.Bytes()
	if d.Err == nil && d.Remaining() != 0 {
		d.Err = fmt.Errorf("%d trailing bytes", d.Remaining())
	}
	if d.Err != nil {
		return r, fmt.Errorf("%w: response: %v", errStoreProto, d.Err)
	}
	return r, nil
}

// readStoreFrame reads one length-prefixed frame. The payload is read in
// pieces as it arrives, so a large length from a stranger allocates only what
// it actually sends.
func readStoreFrame(r io.Reader, buf []byte) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(hdr[:]))
	if n > maxStoreFrame {
		return nil, fmt.Errorf("%w: frame of %d bytes exceeds the %d limit", errStoreProto, n, maxStoreFrame)
	}
	const step = 1 << 20
	buf = buf[:0]
	for len(buf) < n {
		k := min(n-len(buf), step)
		if cap(buf)-len(buf) < k {
			buf = append(buf, make([]byte, k)...)[:len(buf)]
		}
		if _, err := io.ReadFull(r, buf[len(buf):len(buf)+k]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		buf = buf[:len(buf)+k]
	}
	return buf, nil
}

// decodeKey reads a byte string and checks it against the key limit.
func decodeKey(d *wire.Decoder) string {
	b := d.Bytes()
	if d.Err == nil && len(b) > maxStoreKey {
		d.Err = fmt.Errorf("key of %d bytes exceeds the %d limit", len(b), maxStoreKey)
	}
	return string(b)
}
