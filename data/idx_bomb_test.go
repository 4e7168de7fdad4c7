package data

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bombSize is how much the bomb inflates to.
const bombSize = 512 << 20

// gzipBomb streams a gzipped IDX file whose header declares one uint8 but
// which inflates to bombSize bytes. It is compressed on the fly into a pipe,
// so neither the compressed nor the inflated stream is ever held in memory.
func gzipBomb() io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		zw, _ := gzip.NewWriterLevel(pw, gzip.BestCompression)
		_, err := zw.Write(idxBytes(0x08, []uint32{1}, []byte{7}))
		zeros := make([]byte, 1<<20)
		for left := bombSize - 9; left > 0 && err == nil; left -= len(zeros) {
			_, err = zw.Write(zeros[:min(left, len(zeros))])
		}
		if err == nil {
			err = zw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr
}

// bombEnv asks the test binary, run as a child, to decode the bomb.
const bombEnv = "GODDP_TEST_IDX_BOMB"

// TestIDXGzipBombChild decodes the bomb when run by TestIDXGzipBomb; the
// parent measures it from outside.
func TestIDXGzipBombChild(t *testing.T) {
	if os.Getenv(bombEnv) != "1" {
		t.Skip("run by TestIDXGzipBomb in a child process")
	}
	r := gzipBomb()
	defer r.Close()
	start := time.Now()
	_, err := DecodeIDX(r, "bomb.idx.gz")
	elapsed := time.Since(start)
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "trailing bytes") {
		t.Fatalf("want ErrFormat naming trailing bytes, got %v", err)
	}
	t.Logf("BOMB elapsed=%s err=%v", elapsed, err)
}

// TestIDXGzipBomb is issue 17's bar: a gzipped IDX whose header declares 1
// byte but which inflates to 512 MiB is rejected within 5 s with a peak RSS
// under 200 MiB. The decode runs in a child process so that its peak RSS
// (getrusage's ru_maxrss) is its own.
func TestIDXGzipBomb(t *testing.T) {
	if os.Getenv(bombEnv) == "1" {
		t.Skip("in the child")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestIDXGzipBombChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), bombEnv+"=1")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	wall := time.Since(start)
	require.NoError(t, err, "child: %s", out)
	require.Contains(t, string(out), "BOMB elapsed=", "the child ran the decode: %s", out)
	maxRSS := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10 // KiB on Linux
	t.Logf("gzip bomb (declares 1 byte, inflates to %d MiB): child wall %s, peak RSS %.1f MiB; %s",
		bombSize>>20, wall.Round(time.Millisecond), float64(maxRSS)/(1<<20), lastLine(out, "BOMB"))
	assert.Less(t, wall, 5*time.Second, "rejected within 5 s (child start-up included)")
	assert.Less(t, maxRSS, int64(200<<20), "peak RSS under 200 MiB")
}

func lastLine(out []byte, marker string) string {
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, marker) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// TestIDXGzipBounds checks the other edges of the bounded gzip read: exact
// fits decode, short streams are truncated, a little trailing data is
// counted, a declared size past memory is refused before reading, and a
// corrupt checksum after the declared data is still caught.
func TestIDXGzipBounds(t *testing.T) {
	ok := idxBytes(0x0B, []uint32{2}, []byte{1, 2, 3, 4})
	a, err := DecodeIDX(bytes.NewReader(gz(t, ok)), "x.gz")
	require.NoError(t, err)
	assert.Equal(t, []int16{0x102, 0x304}, a.Data)

	badCRC := gz(t, ok)
	badCRC[len(badCRC)-8] ^= 1 // the CRC-32 in the gzip trailer
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"truncated", gz(t, ok[:len(ok)-1]), "byte 11: file truncated"},
		{"trailing", gz(t, append(ok, 9, 9, 9)), "byte 12: 3 trailing bytes"},
		{"huge claim", gz(t, idxBytes(0x0E, []uint32{1 << 31, 1 << 31, 1 << 31}, nil)), "larger than memory"},
		{"short header", gz(t, []byte{0, 0}), "x.gz: byte 2"},
		{"dims cut", gz(t, []byte{0, 0, 8, 2, 0, 0, 0, 1}), "byte 8: file ends inside the dimensions"},
		{"type", gz(t, []byte{0, 0, 7, 1, 0, 0, 0, 0}), "unknown IDX type code 0x07"},
		{"crc", badCRC, "gzip stream"},
		{"garbage after member", append(gz(t, ok), 1, 2, 3), "gzip stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeIDX(bytes.NewReader(tc.in), "x.gz")
			require.ErrorIs(t, err, ErrFormat)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// declaredEnv names the gzipped IDX file TestIDXDeclaredSizeChild reads.
const declaredEnv = "GODDP_TEST_IDX_DECLARED"

// TestIDXDeclaredSizeChild reads the file named by declaredEnv when run by
// TestIDXDeclaredSizeRSS. It also measures a file by hand:
//
//	GODDP_TEST_IDX_DECLARED=bomb.gz /usr/bin/time -v ./data.test -test.run '^TestIDXDeclaredSizeChild$'
func TestIDXDeclaredSizeChild(t *testing.T) {
	path := os.Getenv(declaredEnv)
	if path == "" {
		t.Skip("run by TestIDXDeclaredSizeRSS in a child process")
	}
	a, err := ReadIDX(path)
	require.NoError(t, err)
	t.Logf("DECLARED shape=%v dtype=%s", a.Shape, a.DType())
}

// TestIDXDeclaredSizeRSS is issue 24's bar for a gzipped IDX file that
// really holds the large array its header declares: decoding peaks at the
// declared size plus a small constant, for bytes and for converted types
// alike (it peaked at about 4x: a doubling buffer, then the typed copy).
func TestIDXDeclaredSizeRSS(t *testing.T) {
	if os.Getenv(declaredEnv) != "" {
		t.Skip("in the child")
	}
	const declared = 256 << 20
	const slack = 64 << 20 // the test binary, the runtime, gzip's window
	for _, tc := range []struct {
		name string
		code byte
		size int
	}{{"uint8", 0x08, 1}, {"float32", 0x0D, 4}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "big.idx.gz")
			f, err := os.Create(path)
			require.NoError(t, err)
			zw, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
			_, err = zw.Write(idxBytes(tc.code, []uint32{declared / uint32(tc.size)}, nil))
			require.NoError(t, err)
			zeros := make([]byte, 1<<20)
			for left := declared; left > 0; left -= len(zeros) {
				_, err = zw.Write(zeros)
				require.NoError(t, err)
			}
			require.NoError(t, zw.Close())
			require.NoError(t, f.Close())

			cmd := exec.Command(os.Args[0], "-test.run=^TestIDXDeclaredSizeChild$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), declaredEnv+"="+path)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "child: %s", out)
			require.Contains(t, string(out), "DECLARED shape=", "the child ran the decode: %s", out)
			maxRSS := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10 // KiB on Linux
			t.Logf("%s IDX declaring %d MiB: peak RSS %.1f MiB", tc.name, declared>>20, float64(maxRSS)/(1<<20))
			assert.Less(t, maxRSS, int64(declared+slack), "peak RSS within the declared size + %d MiB", slack>>20)
		})
	}
}

// TestIDXMaxBytes checks the settable cap on the declared data size: a
// declaration over it is refused before any data is read, naming the file,
// the declared size and the cap, whether or not the data is present.
func TestIDXMaxBytes(t *testing.T) {
	// A header declaring 3 GiB of float32 and no data: a gzipped stream
	// cannot tell how much it holds until it is inflated.
	huge := gz(t, idxBytes(0x0D, []uint32{3 << 28}, nil))
	_, err := DecodeIDX(bytes.NewReader(huge), "huge.idx.gz")
	require.ErrorIs(t, err, ErrFormat)
	assert.Contains(t, err.Error(), "huge.idx.gz: byte 4: the header declares 3221225472 data bytes")
	assert.Contains(t, err.Error(), "over the cap of 2147483648 bytes")

	body := make([]byte, 101)
	small := idxBytes(0x08, []uint32{101}, body)
	_, err = DecodeIDX(bytes.NewReader(small), "small.idx", IDXMaxBytes(100))
	require.ErrorIs(t, err, ErrFormat)
	assert.Contains(t, err.Error(), "small.idx: byte 4: the header declares 101 data bytes (shape [101] of 1-byte elements), over the cap of 100 bytes")

	path := filepath.Join(t.TempDir(), "small.idx.gz")
	require.NoError(t, os.WriteFile(path, gz(t, small), 0o644))
	_, err = ReadIDX(path, IDXMaxBytes(100))
	require.ErrorIs(t, err, ErrFormat)
	assert.Contains(t, err.Error(), path+": byte 4: the header declares 101 data bytes")
	a, err := ReadIDX(path, IDXMaxBytes(101))
	require.NoError(t, err)
	assert.Equal(t, []int{101}, a.Shape)

	_, err = DecodeIDX(bytes.NewReader(small), "small.idx", IDXMaxBytes(0))
	require.ErrorIs(t, err, ErrConfig)
}

// TestIDXChunks decodes typed data that spans several staging chunks, from
// a reader whose length is unknown, and reports where one cut mid-chunk ends.
func TestIDXChunks(t *testing.T) {
	const n = 3*idxChunk/8 + 5
	want := make([]float64, n)
	for i := range want {
		want[i] = float64(i) - 0.5
	}
	var buf bytes.Buffer
	require.NoError(t, WriteIDX(&buf, &Array{Shape: []int{n}, Data: want}))
	full := buf.Bytes()
	a, err := DecodeIDX(io.MultiReader(bytes.NewReader(full)), "f64.idx")
	require.NoError(t, err)
	assert.Equal(t, want, a.Data)
	a, err = DecodeIDX(bytes.NewReader(gz(t, full)), "f64.idx.gz")
	require.NoError(t, err)
	assert.Equal(t, want, a.Data)

	cut := full[:8+idxChunk+13]
	_, err = DecodeIDX(io.MultiReader(bytes.NewReader(cut)), "cut.idx")
	require.ErrorIs(t, err, ErrFormat)
	assert.Contains(t, err.Error(), fmt.Sprintf("cut.idx: byte %d: file truncated: shape [%d] of 8-byte elements needs more than the %d data bytes present", len(cut), n, idxChunk+13))
}
