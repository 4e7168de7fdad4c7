package comm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// The store's wire protocol, after the handshake (auth.go): both directions
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
		dst = appendBytes(dst, []byte(r.Keys[0]))
		dst = appendBytes(dst, r.Value)
	case opGet:
		dst = appendBytes(dst, []byte(r.Keys[0]))
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.Timeout.Milliseconds()))
	case opAdd:
		dst = appendBytes(dst, []byte(r.Keys[0]))
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.Delta))
	case opWait, opCheck:
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(r.Keys)))
		for _, k := range r.Keys {
			dst = appendBytes(dst, []byte(k))
		}
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.Timeout.Milliseconds()))
	case opCompareSet:
		dst = appendBytes(dst, []byte(r.Keys[0]))
		dst = appendBytes(dst, r.Expected)
		dst = appendBytes(dst, r.Value)
	case opDelete:
		dst = appendBytes(dst, []byte(r.Keys[0]))
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// decodeStoreRequest parses one request payload (without the length prefix).
func decodeStoreRequest(b []byte) (storeRequest, error) {
	d := wireDecoder{b: b}
	req := storeRequest{Op: storeOp(d.u8()), ID: d.u64()}
	key := func() { req.Keys = []string{d.key()} }
	switch req.Op {
	case opSet:
		key()
		req.Value = d.bytes()
	case opGet:
		key()
		req.Timeout = d.millis()
	case opAdd:
		key()
		req.Delta = int64(d.u64())
	case opWait, opCheck:
		n := d.u32()
		// Each key takes at least its 4-byte length: bound the count by
		// what the frame can hold before allocating.
		if n > maxWaitKeys || int(n) > d.remaining()/4 {
			return req, fmt.Errorf("%w: %s of %d keys", errStoreProto, req.Op, n)
		}
		req.Keys = make([]string, 0, n)
		for i := uint32(0); i < n && d.err == nil; i++ {
			req.Keys = append(req.Keys, d.key())
		}
		req.Timeout = d.millis()
	case opCompareSet:
		key()
		req.Expected = d.bytes()
		req.Value = d.bytes()
	case opDelete:
		key()
	case opNumKeys, opPing:
	default:
		return req, fmt.Errorf("%w: unknown op %d", errStoreProto, uint8(req.Op))
	}
	if d.err != nil {
		return req, fmt.Errorf("%w: %s: %v", errStoreProto, req.Op, d.err)
	}
	if d.remaining() != 0 {
		return req, fmt.Errorf("%w: %s: %d trailing bytes", errStoreProto, req.Op, d.remaining())
	}
	return req, nil
}

func (r *storeResponse) encode(dst []byte) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, r.Status)
	dst = binary.BigEndian.AppendUint64(dst, r.ID)
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.Int))
	dst = appendBytes(dst, r.Value)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

func decodeStoreResponse(b []byte) (storeResponse, error) {
	d := wireDecoder{b: b}
	r := storeResponse{Status: d.u8(), ID: d.u64(), Int: int64(d.u64())}
	r.Value = d.bytes()
	if d.err == nil && d.remaining() != 0 {
		d.err = fmt.Errorf("%d trailing bytes", d.remaining())
	}
	if d.err != nil {
		return r, fmt.Errorf("%w: response: %v", errStoreProto, d.err)
	}
	return r, nil
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b)))
	return append(dst, b...)
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

// wireDecoder reads big-endian fields from b; the first short read sets err
// and later reads return zero values.
type wireDecoder struct {
	b   []byte
	err error
}

func (d *wireDecoder) remaining() int { return len(d.b) }

func (d *wireDecoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.err = fmt.Errorf("field of %d bytes overruns the frame (%d left)", n, len(d.b))
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *wireDecoder) u8() uint8 {
	if b := d.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (d *wireDecoder) u32() uint32 {
	if b := d.take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (d *wireDecoder) u64() uint64 {
	if b := d.take(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

func (d *wireDecoder) bytes() []byte {
	n := d.u32()
	if d.err != nil {
		return nil
	}
	if uint64(n) > uint64(len(d.b)) {
		d.err = fmt.Errorf("byte string of %d bytes overruns the frame (%d left)", n, len(d.b))
		return nil
	}
	return d.take(int(n))
}

func (d *wireDecoder) key() string {
	b := d.bytes()
	if d.err == nil && len(b) > maxStoreKey {
		d.err = fmt.Errorf("key of %d bytes exceeds the %d limit", len(b), maxStoreKey)
	}
	return string(b)
}

// millis reads a u64 millisecond count, capped so it cannot overflow a Duration.
func (d *wireDecoder) millis() time.Duration {
	ms := d.u64()
	const maxMS = uint64(365 * 24 * time.Hour / time.Millisecond)
	return time.Duration(min(ms, maxMS)) * time.Millisecond
}
