package comm

import (
	"bytes"
	"context"
	"encoding/gob"
	"fmt"
)

// Object collectives move small gob-encoded Go values (metadata, configs,
// bucket layouts), like torch's broadcast_object_list and
// all_gather_object. They work on any backend with Broadcast and AllGather:
// a size goes first, then the padded bytes.

// maxObjectBytes bounds an encoded object; these collectives are for metadata.
const maxObjectBytes = 1 << 30

// BroadcastObject sets *v on every rank to root's *v.
func BroadcastObject[T any](ctx context.Context, pg ProcessGroup, v *T, root int) error {
	var payload []byte
	if pg.Rank() == root {
		var b bytes.Buffer
		if err := gob.NewEncoder(&b).Encode(v); err != nil {
			return fmt.Errorf("%w: broadcast object: encode: %v", ErrBadArgument, err)
		}
		payload = b.Bytes()
	}
	size := []int64{int64(len(payload))}
	if err := pg.Broadcast(Int64s(size), root).Wait(ctx); err != nil {
		return err
	}
	if size[0] < 0 || size[0] > maxObjectBytes {
		return fmt.Errorf("%w: broadcast object of %d bytes", ErrBadArgument, size[0])
	}
	buf := make([]int64, (size[0]+7)/8)
	raw := Int64s(buf).Bytes
	copy(raw, payload)
	if err := pg.Broadcast(Int64s(buf), root).Wait(ctx); err != nil {
		return err
	}
	if pg.Rank() == root {
		return nil
	}
	var out T
	if err := gob.NewDecoder(bytes.NewReader(raw[:size[0]])).Decode(&out); err != nil {
		return fmt.Errorf("comm: broadcast object: decode: %w", err)
	}
	*v = out
	return nil
}

// AllGatherObject returns every rank's v, indexed by rank.
func AllGatherObject[T any](ctx context.Context, pg ProcessGroup, v T) ([]T, error) {
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(&v); err != nil {
		return nil, fmt.Errorf("%w: all-gather object: encode: %v", ErrBadArgument, err)
	}
	n := pg.Size()
	sizes := make([]int64, n)
	if err := AllGather(pg, Int64s(sizes), Int64s([]int64{int64(b.Len())})).Wait(ctx); err != nil {
		return nil, err
	}
	var most int64
	for _, s := range sizes {
		if s < 0 || s > maxObjectBytes {
			return nil, fmt.Errorf("%w: all-gather object of %d bytes", ErrBadArgument, s)
		}
		most = max(most, s)
	}
	words := int((most + 7) / 8)
	mine := make([]int64, words)
	copy(Int64s(mine).Bytes, b.Bytes())
	all := make([]int64, words*n)
	if err := AllGather(pg, Int64s(all), Int64s(mine)).Wait(ctx); err != nil {
		return nil, err
	}
	raw := Int64s(all).Bytes
	out := make([]T, n)
	for r := range n {
		chunk := raw[r*words*8 : r*words*8+int(sizes[r])]
		if err := gob.NewDecoder(bytes.NewReader(chunk)).Decode(&out[r]); err != nil {
			return nil, fmt.Errorf("comm: all-gather object from rank %d: decode: %w", r, err)
		}
	}
	return out, nil
}
