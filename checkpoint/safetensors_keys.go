package checkpoint

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// uniqueKeys returns an error naming the first key that appears twice in
// one object of the header hdr, which must already be valid JSON.
//
// encoding/json keeps the last of duplicate keys without a word, while
// other readers may keep the first: a file with two entries for one tensor
// (or two checksums) would then load as different weights in goddp and in
// torch, and a checksum check could pass over bytes that are not the ones
// used. So the header is walked token by token and any duplicate refused.
// Inside a tensor's entry the field names are compared as encoding/json
// matches them to struct fields, without regard to case ("dtype" and
// "DType" are one field to it).
func uniqueKeys(hdr []byte) error {
	type object struct {
		where   string // "the header", "__metadata__", or `tensor "name"`
		seen    map[string]bool
		fold    bool // an entry: compare keys as encoding/json does
		wantKey bool
		key     string // the key whose value is being read
	}
	var stack []*object
	var arrays []int // per object level, how many arrays are open inside it
	dec := json.NewDecoder(bytes.NewReader(hdr))
	valueDone := func() {
		if n := len(stack); n > 0 && arrays[n-1] == 0 {
			stack[n-1].wantKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("header JSON: %v", err)
		}
		n := len(stack)
		if n > 0 && arrays[n-1] == 0 && stack[n-1].wantKey {
			o := stack[n-1]
			if tok == json.Delim('}') {
				stack, arrays = stack[:n-1], arrays[:n-1]
				valueDone()
				continue
			}
			k, _ := tok.(string)
			canon := k
			if o.fold {
				for _, f := range []string{"dtype", "shape", "data_offsets"} {
					if strings.EqualFold(k, f) {
						canon = f
					}
				}
			}
			if o.seen[canon] {
				return fmt.Errorf("duplicate key %q in %s", k, o.where)
			}
			o.seen[canon], o.key, o.wantKey = true, k, false
			continue
		}
		switch tok {
		case json.Delim('{'):
			o := &object{where: "the header", seen: map[string]bool{}, wantKey: true}
			if n == 1 && arrays[0] == 0 { // a value of the top-level object
				if k := stack[0].key; k == "__metadata__" {
					o.where = k
				} else {
					o.where, o.fold = fmt.Sprintf("tensor %q", k), true
				}
			} else if n > 0 {
				o.where = "a nested object of " + stack[n-1].where
			}
			stack, arrays = append(stack, o), append(arrays, 0)
		case json.Delim('['):
			if n > 0 {
				arrays[n-1]++
			}
		case json.Delim(']'):
			if n > 0 {
				arrays[n-1]--
			}
			valueDone()
		default:
			valueDone()
		}
	}
}
