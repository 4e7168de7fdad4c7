package launch

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunBuildKeepsBinary checks the build cache: an unchanged package is
// not linked again, a changed one is rebuilt, and the rebuild replaces the
// kept binary's name without writing into the old file, which a job
// started earlier may still be running.
func TestRunBuildKeepsBinary(t *testing.T) {
	src, cache := t.TempDir(), t.TempDir()
	t.Setenv("TMPDIR", t.TempDir())
	require.NoError(t, os.WriteFile(filepath.Join(src, "go.mod"), []byte("module hello\n\ngo 1.22\n"), 0o644))
	write := func(msg string) {
		require.NoError(t, os.WriteFile(filepath.Join(src, "main.go"),
			[]byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\""+msg+"\") }\n"), 0o644))
	}
	run := func() (string, string) {
		cfg, out, errb := testConfig(1)
		cfg.Program, cfg.BuildCache, cfg.Log = src, cache, errb
		require.NoError(t, Run(context.Background(), cfg), errb.String())
		kept, err := filepath.Glob(filepath.Join(cache, "*", filepath.Base(src)))
		require.NoError(t, err)
		require.Len(t, kept, 1)
		return out.String(), kept[0]
	}

	write("v1")
	out, kept := run()
	assert.Contains(t, out, "v1")
	old := filepath.Join(t.TempDir(), "old")
	require.NoError(t, os.Link(kept, old)) // what a job started now would be running
	before, err := os.Stat(kept)
	require.NoError(t, err)
	v1, err := os.ReadFile(kept)
	require.NoError(t, err)

	out, _ = run()
	assert.Contains(t, out, "v1")
	after, err := os.Stat(kept)
	require.NoError(t, err)
	assert.True(t, os.SameFile(before, after), "an up-to-date binary is kept as is")

	write("v2")
	out, _ = run()
	assert.Contains(t, out, "v2")
	after, err = os.Stat(kept)
	require.NoError(t, err)
	assert.False(t, os.SameFile(before, after), "a rebuild is a new file")
	oldNow, err := os.ReadFile(old)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(v1, oldNow), "the old binary was not written")
	scratch, _ := filepath.Glob(filepath.Join(cache, "*", ".build-*"))
	assert.Empty(t, scratch)
}
