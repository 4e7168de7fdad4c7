package backend_test

import (
	"testing"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/commtest"
)

type unwrapping struct{ backend.ProcessGroup }

func (u unwrapping) Unwrap() backend.ProcessGroup { return u.ProcessGroup }

type opaque struct{ backend.ProcessGroup }

func TestAsVectorAllReducer(t *testing.T) {
	g := commtest.NewGroups(1)[0]
	if v, ok := backend.AsVectorAllReducer(g); !ok || v != g.(backend.VectorAllReducer) {
		t.Fatalf("the in-memory group itself: got %v, %v", v, ok)
	}
	if v, ok := backend.AsVectorAllReducer(unwrapping{unwrapping{g}}); !ok || v != g.(backend.VectorAllReducer) {
		t.Fatalf("through two Unwraps: got %v, %v", v, ok)
	}
	if _, ok := backend.AsVectorAllReducer(opaque{g}); ok {
		t.Fatal("a wrapper without Unwrap hides AllReduceV; it must not be found")
	}
	if _, ok := backend.AsVectorAllReducer(nil); ok {
		t.Fatal("nil group")
	}
}
