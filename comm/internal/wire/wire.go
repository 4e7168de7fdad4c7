// Package wire holds the big-endian, length-checked encoding helpers that
// the rendezvous store's protocol and the tcp backend's control messages
// share. A Decoder never allocates on a length it has not checked against
// what remains of its frame.
package wire

import (
	"encoding/binary"
	"fmt"
	"time"
)

// AppendBytes appends b as a u32 length and the bytes.
func AppendBytes(dst, b []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b)))
	return append(dst, b...)
}

// Decoder reads big-endian fields from B; the first short read sets Err
// and later reads return zero values.
type Decoder struct {
	B   []byte
	Err error
}

// Remaining is the number of undecoded bytes.
func (d *Decoder) Remaining() int { return len(d.B) }

func (d *Decoder) Take(n int) []byte {
	if d.Err != nil {
		return nil
	}
	if n < 0 || n > len(d.B) {
		d.Err = fmt.Errorf("field of %d bytes overruns the frame (%d left)", n, len(d.B))
		return nil
	}
	v := d.B[:n:n]
	d.B = d.B[n:]
	return v
}

func (d *Decoder) U8() uint8 {
	if b := d.Take(1); b != nil {
		return b[0]
	}
	return 0
}

func (d *Decoder) U32() uint32 {
	if b := d.Take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (d *Decoder) U64() uint64 {
	if b := d.Take(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

func (d *Decoder) Bytes() []byte {
	n := d.U32()
	if d.Err != nil {
		return nil
	}
	if uint64(n) > uint64(len(d.B)) {
		d.Err = fmt.Errorf("byte string of %d bytes overruns the frame (%d left)", n, len(d.B))
		return nil
	}
	return d.Take(int(n))
}

// Millis reads a u64 millisecond count, capped so it cannot overflow a Duration.
func (d *Decoder) Millis() time.Duration {
	ms := d.U64()
	const maxMS = uint64(365 * 24 * time.Hour / time.Millisecond)
	return time.Duration(min(ms, maxMS)) * time.Millisecond
}
