package data

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"os/exec"
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
