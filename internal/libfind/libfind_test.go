package libfind_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/internal/libfind"
)

// tree makes files (and python3 symlinks) under a temp root.
func tree(t *testing.T, files []string, links map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for _, f := range files {
		p := filepath.Join(root, f)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, nil, 0o644))
	}
	for link, target := range links {
		p := filepath.Join(root, link)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.Symlink(filepath.Join(root, target), p))
	}
	return root
}

func envOf(root string, kv map[string]string) libfind.Env {
	return libfind.Env{Root: root, Getenv: func(k string) string { return kv[k] }}
}

func TestCandidates(t *testing.T) {
	root := tree(t, []string{
		"/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcublas.so.13",
		"/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2",
		"/usr/local/lib/python3.11/dist-packages/nvidia/cublas/lib/libcublas.so.12",
		"/home/u/.local/lib/python3.10/site-packages/nvidia/cublas/lib/libcublas.so.11",
		"/opt/py/bin/python3.12",
	}, map[string]string{"/opt/py/bin/python3": "/opt/py/bin/python3.12"})
	env := envOf(root, map[string]string{"VIRTUAL_ENV": "/venv", "HOME": "/home/u", "PATH": "/opt/py/bin:/nonexistent"})

	got := libfind.Candidates("GODDP_CUBLAS_LIBRARY", libfind.CUBLASSonames(13000), env)
	assert.Equal(t, []string{
		"libcublas.so.13", root + "/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcublas.so.13",
		"libcublas.so.12", root + "/usr/local/lib/python3.11/dist-packages/nvidia/cublas/lib/libcublas.so.12",
		"libcublas.so.11", root + "/home/u/.local/lib/python3.10/site-packages/nvidia/cublas/lib/libcublas.so.11",
	}, got)

	nccl := libfind.Candidates("GODDP_NCCL_LIBRARY", []string{"libnccl.so.2"}, env)
	assert.Equal(t, []string{"libnccl.so.2", root + "/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"}, nccl)
}

// An explicit path is the only candidate.
func TestCandidatesEnvOverride(t *testing.T) {
	env := envOf(t.TempDir(), map[string]string{"GODDP_CUBLAS_LIBRARY": "/x/libcublas.so.12"})
	assert.Equal(t, []string{"/x/libcublas.so.12"}, libfind.Candidates("GODDP_CUBLAS_LIBRARY", []string{"libcublas.so.12"}, env))
}

// A python3 on PATH that links into another prefix contributes both.
func TestPythonOnPath(t *testing.T) {
	root := tree(t, []string{
		"/opt/conda/envs/a/lib/python3.10/site-packages/nvidia/nccl/lib/libnccl.so.2",
		"/opt/conda/envs/a/bin/python3.10",
	}, map[string]string{"/work/env/bin/python3": "/opt/conda/envs/a/bin/python3.10"})
	env := envOf(root, map[string]string{"PATH": "/work/env/bin"})
	assert.Equal(t, []string{"/opt/conda/envs/a/lib/python3.10/site-packages/nvidia/nccl/lib"}, libfind.PythonLibDirs(env))
}

func TestCUBLASSonames(t *testing.T) {
	for _, tc := range []struct {
		driver int
		want   []string
	}{
		{0, []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}},
		{13000, []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}},
		{12020, []string{"libcublas.so.12", "libcublas.so.11"}}, // R535: no cuBLAS 13
		{11080, []string{"libcublas.so.11"}},
	} {
		assert.Equal(t, tc.want, libfind.CUBLASSonames(tc.driver), "driver %d", tc.driver)
	}
}

// cuDNN: the environment variable, then the system's libcudnn.so.9 and .8,
// then the wheels' nvidia/cudnn/lib copies, newest soname first.
func TestCUDNNCandidates(t *testing.T) {
	root := tree(t, []string{
		"/venv/lib/python3.12/site-packages/nvidia/cudnn/lib/libcudnn.so.9",
		"/usr/local/lib/python3.11/dist-packages/nvidia/cudnn/lib/libcudnn.so.8",
	}, nil)
	env := envOf(root, map[string]string{"VIRTUAL_ENV": "/venv", "HOME": "/nonexistent"})
	assert.Equal(t, []string{
		"libcudnn.so.9", "libcudnn.so.8",
		root + "/venv/lib/python3.12/site-packages/nvidia/cudnn/lib/libcudnn.so.9",
		root + "/usr/local/lib/python3.11/dist-packages/nvidia/cudnn/lib/libcudnn.so.8",
	}, libfind.CandidatesSystemFirst("GODDP_CUDNN_LIBRARY", libfind.CUDNNSonames(), env))

	env = envOf(root, map[string]string{"GODDP_CUDNN_LIBRARY": "/x/libcudnn.so.9"})
	assert.Equal(t, []string{"/x/libcudnn.so.9"}, libfind.CandidatesSystemFirst("GODDP_CUDNN_LIBRARY", libfind.CUDNNSonames(), env))
}
