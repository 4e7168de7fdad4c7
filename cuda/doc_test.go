package cuda_test

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/cuda/sim"
)

// docList returns the names doc.go lists in the paragraph that starts
// with start, after its first colon and space (a parenthetical that ends
// in "): " is skipped).
func docList(t *testing.T, doc, start string) []string {
	t.Helper()
	i := strings.Index(doc, "\n// "+start)
	require.GreaterOrEqual(t, i, 0, "doc.go has no %q paragraph", start)
	para := doc[i+len("\n// "):]
	if j := strings.Index(para, "\n//\n"); j >= 0 {
		para = para[:j]
	}
	para = strings.ReplaceAll(para, "\n//", "")
	if j := strings.Index(para, "): "); j >= 0 {
		para = para[j+3:]
	} else {
		para = para[strings.Index(para, ": ")+2:]
	}
	names := regexp.MustCompile(`[A-Z][A-Za-z0-9]+`).FindAllString(para, -1)
	slices.Sort(names)
	return names
}

// The op list in doc.go is the devtensor table a cuda:N device fills:
// every entry sim:N (the same table, on the host) has is listed under
// "Ops:", and the cuDNN entries, which only a GPU with cuDNN fills, under
// "With cuDNN". An op added to the table or taken from it without the
// package doc saying so fails here.
func TestDocListsTheKernelTable(t *testing.T) {
	b, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	doc := string(b)
	s := sim.New(0)
	t.Cleanup(func() { s.Close() })
	k := reflect.ValueOf(s.Tensors().Kernels()).Elem()
	var filled, all []string
	for i := range k.NumField() {
		if k.Field(i).Kind() != reflect.Func {
			continue
		}
		name := k.Type().Field(i).Name
		all = append(all, name)
		if !k.Field(i).IsNil() {
			filled = append(filled, name)
		}
	}
	slices.Sort(filled)
	require.Equal(t, filled, docList(t, doc, "Ops: "), "doc.go's \"Ops:\" list against the entries sim:N fills")
	var dnn []string
	for _, n := range docList(t, doc, "With cuDNN") {
		dnn = append(dnn, n)
		require.Contains(t, all, n, "doc.go lists %s, which tensor.Kernels has not", n)
		require.NotContains(t, filled, n, "doc.go lists %s as cuDNN-only, but sim fills it", n)
	}
	require.NotEmpty(t, dnn)
}
