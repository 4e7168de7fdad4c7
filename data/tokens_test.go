package data

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// seqTokens returns n tokens start, start+1, ... (mod vocab), so that a
// window's content says where it came from.
func seqTokens(start, n int) []uint16 {
	out := make([]uint16, n)
	for i := range out {
		out[i] = uint16((start + i) % GPT2VocabSize)
	}
	return out
}

func writeTokens(t *testing.T, path string, toks []uint16, f TokenFormat) string {
	t.Helper()
	if err := WriteTokenFile(path, toks, f); err != nil {
		t.Fatal(err)
	}
	return path
}

func i64s(u []uint16) []int64 {
	out := make([]int64, len(u))
	for i, v := range u {
		out[i] = int64(v)
	}
	return out
}

func TestTokenDatasetWindows(t *testing.T) {
	dir := t.TempDir()
	const T = 8
	a := seqTokens(0, 48)    // (48-1)/8 = 5 windows: 48/8 = 6 would read past the end
	b := seqTokens(1000, 17) // 2 windows, exactly: 17 = 2*8+1
	c := seqTokens(2000, 5)  // too short for a window
	paths := []string{
		writeTokens(t, filepath.Join(dir, "a_train_000001.bin"), a, TokensLLMC),
		writeTokens(t, filepath.Join(dir, "b.bin"), b, TokensNanoGPT),
		writeTokens(t, filepath.Join(dir, "c_train_000003.bin"), c, TokensLLMC),
	}
	ds, err := OpenTokens(paths, T)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if ds.Len() != 7 || ds.NumTokens() != 48+17+5 || ds.SeqLen() != T {
		t.Fatalf("Len %d NumTokens %d, want 7 windows of 70 tokens", ds.Len(), ds.NumTokens())
	}
	if ds.files[0].Format() != TokensLLMC || ds.files[1].Format() != TokensNanoGPT {
		t.Fatalf("detected formats %v %v", ds.files[0].Format(), ds.files[1].Format())
	}
	var want [][]uint16
	for w := range 5 {
		want = append(want, a[w*T:w*T+T+1])
	}
	for w := range 2 {
		want = append(want, b[w*T:w*T+T+1])
	}
	all := make([]int, ds.Len())
	for i := range all {
		all[i] = i
		s, err := ds.Get(i)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(s.Input.I64(), i64s(want[i][:T])) || !slices.Equal(s.Target.I64(), i64s(want[i][1:])) {
			t.Fatalf("window %d: input %v target %v, want the tokens %v", i, s.Input.I64(), s.Target.I64(), want[i])
		}
	}
	bt, err := ds.GetBatch([]int{6, 0, 3})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(bt.Inputs.Shape(), []int{3, T}) || !slices.Equal(bt.Targets.Shape(), []int{3, T}) {
		t.Fatalf("batch shapes %v %v", bt.Inputs.Shape(), bt.Targets.Shape())
	}
	for r, i := range []int{6, 0, 3} {
		if !slices.Equal(bt.Inputs.I64()[r*T:(r+1)*T], i64s(want[i][:T])) || !slices.Equal(bt.Targets.I64()[r*T:(r+1)*T], i64s(want[i][1:])) {
			t.Fatalf("batch row %d differs from window %d", r, i)
		}
	}
	// The loader's fast path and the per-sample path agree.
	slow, err := collateFrom(ds, all, DefaultCollate)
	if err != nil {
		t.Fatal(err)
	}
	fast, _ := ds.GetBatch(all)
	if !slices.Equal(slow.Inputs.I64(), fast.Inputs.I64()) || !slices.Equal(slow.Targets.I64(), fast.Targets.I64()) {
		t.Fatal("GetBatch differs from DefaultCollate of Get")
	}
	for _, i := range []int{-1, 7} {
		if _, err := ds.Get(i); !errors.Is(err, ErrIndex) {
			t.Errorf("Get(%d): %v, want ErrIndex", i, err)
		}
	}
}

func TestTokenFileErrors(t *testing.T) {
	dir := t.TempDir()
	good := seqTokens(0, 100)
	llmc := func(magic, version, count int32, toks []uint16) []byte {
		b := make([]byte, LLMCHeaderBytes, LLMCHeaderBytes+2*len(toks))
		binary.LittleEndian.PutUint32(b[0:], uint32(magic))
		binary.LittleEndian.PutUint32(b[4:], uint32(version))
		binary.LittleEndian.PutUint32(b[8:], uint32(count))
		for _, v := range toks {
			b = binary.LittleEndian.AppendUint16(b, v)
		}
		return b
	}
	cases := []struct {
		name   string
		bytes  []byte
		format TokenFormat
		want   []string
	}{
		{"magic.bin", llmc(20240521, 1, 100, good), TokensLLMC, []string{"magic 20240521", "want 20240520"}},
		{"magic_auto.bin", llmc(20240521, 1, 100, good), TokensAuto, []string{"magic 20240521", "want 20240520", "first token 55433"}},
		{"version.bin", llmc(LLMCMagic, 7, 100, good), TokensAuto, []string{"version 7", "want 1"}},
		{"version2.bin", llmc(LLMCMagic, 2, 100, good), TokensAuto, []string{"version 2", "uint32"}},
		{"short.bin", llmc(LLMCMagic, 1, 100, good)[:1000], TokensLLMC, []string{"1000 bytes", "1024-byte header"}},
		{"truncated.bin", llmc(LLMCMagic, 1, 100, good)[:1024+2*99], TokensAuto, []string{"1222 bytes", "counts 100 tokens", "1224 bytes"}},
		{"extra.bin", llmc(LLMCMagic, 1, 99, good), TokensAuto, []string{"1224 bytes", "counts 99 tokens", "1222 bytes"}},
		{"negative.bin", llmc(LLMCMagic, 1, -5, good), TokensAuto, []string{"counts -5 tokens"}},
		{"odd.bin", []byte{1, 0, 2}, TokensNanoGPT, []string{"3 bytes", "odd size"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name)
			if err := os.WriteFile(path, c.bytes, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := OpenTokens([]string{path}, 4, TokensFormat(c.format))
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("err = %v, want ErrFormat", err)
			}
			for _, w := range append([]string{path}, c.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}

	// A token outside the vocabulary: the window that holds it fails with
	// the file and the offset, the others read, and Validate finds it.
	bad := slices.Clone(good)
	bad[37] = 50257
	for _, f := range []TokenFormat{TokensLLMC, TokensNanoGPT} {
		path := writeTokens(t, filepath.Join(dir, fmt.Sprintf("vocab_%v.bin", f)), bad, f)
		ds, err := OpenTokens([]string{path}, 10)
		if err != nil {
			t.Fatal(err)
		}
		byteOff := 2 * 37
		if f == TokensLLMC {
			byteOff += 1024
		}
		for _, w := range []int{3, 4} { // window 3 is tokens 30..40, window 4 tokens 40..50
			_, err := ds.Get(w)
			if w == 4 {
				if err != nil {
					t.Fatalf("%v: window 4 has no bad token: %v", f, err)
				}
				continue
			}
			want := fmt.Sprintf("%s: token 50257 at token offset 37 (byte %d) is not below the vocabulary size 50257", path, byteOff)
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), want) {
				t.Fatalf("%v: Get(3) = %v, want %q", f, err, want)
			}
			if _, err := ds.GetBatch([]int{0, 3}); err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("%v: GetBatch: %v", f, err)
			}
		}
		if err := ds.Validate(); err == nil || !strings.Contains(err.Error(), "token offset 37") {
			t.Fatalf("%v: Validate: %v", f, err)
		}
		ds.Close()
		// A smaller vocabulary makes good tokens bad.
		ds, err = OpenTokens([]string{writeTokens(t, filepath.Join(dir, "small.bin"), good, f)}, 10, TokensVocab(50))
		if err != nil {
			t.Fatal(err)
		}
		if err := ds.Validate(); err == nil || !strings.Contains(err.Error(), "token 50 at token offset 50") {
			t.Fatalf("%v: Validate with vocabulary 50: %v", f, err)
		}
		ds.Close()
	}

	short := writeTokens(t, filepath.Join(dir, "tiny.bin"), seqTokens(0, 4), TokensLLMC)
	if _, err := OpenTokens([]string{short}, 4); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "no window of seq_len+1 = 5 tokens") {
		t.Fatalf("a file shorter than a window: %v", err)
	}
	if _, err := OpenTokens([]string{filepath.Join(dir, "missing.bin")}, 4); err == nil || !strings.Contains(err.Error(), "missing.bin") {
		t.Fatalf("a missing file: %v", err)
	}
	if _, err := OpenTokens([]string{short}, 0); !errors.Is(err, ErrConfig) {
		t.Fatalf("seq_len 0: %v", err)
	}
}

// loaderIndices runs one epoch of a loader over ds for each rank of a
// world and returns each rank's window indices, checking that every batch
// holds the windows its indices name.
func loaderIndices(t *testing.T, ds *TokenDataset, world, epoch int, seed uint64) [][]int {
	t.Helper()
	ref := make(map[int][]int64)
	for i := range ds.Len() {
		s, err := ds.Get(i)
		if err != nil {
			t.Fatal(err)
		}
		ref[i] = s.Input.I64()
	}
	out := make([][]int, world)
	for r := range world {
		s, err := NewDistributedSampler(ds, SamplerReplicas(world), SamplerRank(r), SamplerSeed(seed))
		if err != nil {
			t.Fatal(err)
		}
		l, err := NewDataLoader(ds, BatchSize(4), WithSampler(s))
		if err != nil {
			t.Fatal(err)
		}
		l.SetEpoch(epoch)
		for b, err := range l.All(context.Background()) {
			if err != nil {
				t.Fatal(err)
			}
			T := ds.SeqLen()
			for k, i := range b.Indices {
				if !slices.Equal(b.Inputs.I64()[k*T:(k+1)*T], ref[i]) {
					t.Fatalf("rank %d: batch row %d is not window %d", r, k, i)
				}
			}
			out[r] = append(out[r], b.Indices...)
		}
	}
	return out
}

func TestTokenDatasetDistributedSampler(t *testing.T) {
	dir := t.TempDir()
	// 3 files, 12+9+9 = 30 windows: divisible by 2 and by 3, so every
	// window is dealt exactly once per epoch with no padding.
	var paths []string
	for k, n := range []int{12*4 + 1, 9*4 + 3, 9*4 + 1} {
		paths = append(paths, writeTokens(t, filepath.Join(dir, fmt.Sprintf("s_train_%06d.bin", k+1)), seqTokens(100*k, n), TokensLLMC))
	}
	ds, err := OpenTokens(paths, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if ds.Len() != 30 {
		t.Fatalf("Len = %d, want 30", ds.Len())
	}
	for _, world := range []int{2, 3} {
		e0 := loaderIndices(t, ds, world, 0, 7)
		seen := make([]int, ds.Len())
		for r, idx := range e0 {
			if len(idx) != ds.Len()/world {
				t.Fatalf("world %d: rank %d got %d windows, want %d", world, r, len(idx), ds.Len()/world)
			}
			for _, i := range idx {
				seen[i]++
			}
		}
		for i, n := range seen {
			if n != 1 {
				t.Fatalf("world %d: window %d seen %d times in epoch 0", world, i, n)
			}
		}
		if again := loaderIndices(t, ds, world, 0, 7); !slices.EqualFunc(e0, again, slices.Equal) {
			t.Fatalf("world %d: the same seed and epoch gave another order", world)
		}
		if e1 := loaderIndices(t, ds, world, 1, 7); slices.EqualFunc(e0, e1, slices.Equal) {
			t.Fatalf("world %d: epochs 0 and 1 have the same order", world)
		}
		if s8 := loaderIndices(t, ds, world, 0, 8); slices.EqualFunc(e0, s8, slices.Equal) {
			t.Fatalf("world %d: seeds 7 and 8 have the same order", world)
		}
	}
	// 30 windows over 4 ranks: torch pads by wrapping around to 32, so
	// two windows come twice and none is missing.
	seen := map[int]int{}
	for _, idx := range loaderIndices(t, ds, 4, 0, 7) {
		for _, i := range idx {
			seen[i]++
		}
	}
	twice := 0
	for i := range ds.Len() {
		if seen[i] == 0 {
			t.Fatalf("world 4: window %d never seen", i)
		}
		if seen[i] == 2 {
			twice++
		}
	}
	if twice != 2 {
		t.Fatalf("world 4: %d windows seen twice, want the 2 of torch's padding", twice)
	}
}

func TestTokenDatasetResumeMidEpoch(t *testing.T) {
	path := writeTokens(t, filepath.Join(t.TempDir(), "r_train_000001.bin"), seqTokens(0, 40*8+1), TokensLLMC)
	ds, err := OpenTokens([]string{path}, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	newLoader := func(rank int) (*DataLoader, *DistributedSampler) {
		s, err := NewDistributedSampler(ds, SamplerReplicas(2), SamplerRank(rank), SamplerSeed(3))
		if err != nil {
			t.Fatal(err)
		}
		l, err := NewDataLoader(ds, BatchSize(3), WithSampler(s))
		if err != nil {
			t.Fatal(err)
		}
		return l, s
	}
	for rank := range 2 {
		// The uninterrupted epoch 2.
		l, _ := newLoader(rank)
		l.SetEpoch(2)
		var full [][]int64
		for b, err := range l.All(context.Background()) {
			if err != nil {
				t.Fatal(err)
			}
			full = append(full, b.Inputs.I64())
		}
		// Stop after 4 batches, save the state as a checkpoint would.
		l, s := newLoader(rank)
		l.SetEpoch(2)
		n := 0
		for _, err := range l.All(context.Background()) {
			if err != nil {
				t.Fatal(err)
			}
			if n++; n == 4 {
				break
			}
		}
		saved, _ := json.Marshal(s.State())
		// A fresh process: new dataset handle, sampler and loader.
		l2, s2 := newLoader(rank)
		var st SamplerState
		if err := json.Unmarshal(saved, &st); err != nil {
			t.Fatal(err)
		}
		if err := s2.LoadState(st); err != nil {
			t.Fatal(err)
		}
		l2.SetEpoch(st.Epoch)
		var rest [][]int64
		for b, err := range l2.All(context.Background()) {
			if err != nil {
				t.Fatal(err)
			}
			rest = append(rest, b.Inputs.I64())
		}
		if len(full) != 7 || !slices.EqualFunc(rest, full[4:], slices.Equal) {
			t.Fatalf("rank %d: resumed after 4 of %d batches, got %d batches, not the remaining %d", rank, len(full), len(rest), len(full)-4)
		}
	}
}

func TestTokenDatasetCloseUnmaps(t *testing.T) {
	dir := t.TempDir()
	paths := []string{
		writeTokens(t, filepath.Join(dir, "m_train_000001.bin"), seqTokens(0, 100), TokensLLMC),
		writeTokens(t, filepath.Join(dir, "m_train_000002.bin"), seqTokens(0, 100), TokensNanoGPT),
	}
	mapped := func() []string {
		maps, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			t.Skip("no /proc/self/maps:", err)
		}
		var out []string
		for _, p := range paths {
			if strings.Contains(string(maps), p) {
				out = append(out, p)
			}
		}
		return out
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/maps")
	}
	for round := range 3 { // no mapping survives any round
		ds, err := OpenTokens(paths, 4)
		if err != nil {
			t.Fatal(err)
		}
		if got := mapped(); len(got) != 2 {
			t.Fatalf("round %d: mapped while open: %v", round, got)
		}
		if err := ds.Close(); err != nil {
			t.Fatal(err)
		}
		if got := mapped(); len(got) != 0 {
			t.Fatalf("round %d: still mapped after Close: %v", round, got)
		}
		if _, err := ds.Get(0); !errors.Is(err, ErrClosed) {
			t.Fatalf("Get after Close: %v, want ErrClosed", err)
		}
		if _, err := ds.GetBatch([]int{0}); !errors.Is(err, ErrClosed) {
			t.Fatalf("GetBatch after Close: %v, want ErrClosed", err)
		}
		if err := ds.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	}
	// Readers racing Close get windows or ErrClosed, never a fault on the
	// unmapped memory.
	ds, err := OpenTokens(paths, 4)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				if _, err := ds.GetBatch([]int{(g + k) % ds.Len()}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	ds.Close()
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("a read racing Close: %v", err)
		}
	}

	// A bad file among good ones: OpenTokens fails and unmaps the good.
	bad := filepath.Join(dir, "m_train_000003.bin")
	if err := os.WriteFile(bad, []byte{1, 2, 3}, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenTokens(append(slices.Clone(paths), bad), 4); !errors.Is(err, ErrFormat) {
		t.Fatalf("bad third file: %v", err)
	}
	if got := mapped(); len(got) != 0 {
		t.Fatalf("a failed OpenTokens left %v mapped", got)
	}
}

func TestOpenTokenSplits(t *testing.T) {
	dir := t.TempDir()
	writeTokens(t, filepath.Join(dir, "web_val_000000.bin"), seqTokens(0, 41), TokensLLMC)
	writeTokens(t, filepath.Join(dir, "web_train_000002.bin"), seqTokens(0, 21), TokensLLMC)
	writeTokens(t, filepath.Join(dir, "web_train_000001.bin"), seqTokens(0, 81), TokensLLMC)
	for _, where := range []string{dir, filepath.Join(dir, "web_*.bin")} {
		train, val, err := OpenTokenSplits(where, 4)
		if err != nil {
			t.Fatal(err)
		}
		if got := train.Paths(); len(got) != 2 || filepath.Base(got[0]) != "web_train_000001.bin" || train.Len() != 20+5 {
			t.Fatalf("%s: train %v with %d windows", where, got, train.Len())
		}
		if got := val.Paths(); len(got) != 1 || val.Len() != 10 {
			t.Fatalf("%s: val %v with %d windows", where, got, val.Len())
		}
		train.Close()
		val.Close()
	}
	if _, _, err := OpenTokenSplits(filepath.Join(dir, "*_train_*.bin"), 4); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "2 training and 0 validation") {
		t.Fatalf("no validation shard: %v", err)
	}
	nano := t.TempDir()
	writeTokens(t, filepath.Join(nano, "train.bin"), seqTokens(0, 41), TokensNanoGPT)
	writeTokens(t, filepath.Join(nano, "val.bin"), seqTokens(0, 41), TokensNanoGPT)
	train, val, err := OpenTokenSplits(nano, 4)
	if err != nil {
		t.Fatal(err)
	}
	train.Close()
	val.Close()
	writeTokens(t, filepath.Join(nano, "extra.bin"), seqTokens(0, 41), TokensNanoGPT)
	if _, _, err := OpenTokenSplits(nano, 4); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "extra.bin") {
		t.Fatalf("a file of neither split: %v", err)
	}
}

func TestWriteTokenFileFormats(t *testing.T) {
	dir := t.TempDir()
	toks := seqTokens(50000, 300) // wraps past the vocabulary back to 0
	llmc := writeTokens(t, filepath.Join(dir, "a.bin"), toks, TokensAuto)
	raw, _ := os.ReadFile(llmc)
	if len(raw) != 1024+600 || binary.LittleEndian.Uint32(raw) != LLMCMagic ||
		binary.LittleEndian.Uint32(raw[4:]) != 1 || binary.LittleEndian.Uint32(raw[8:]) != 300 ||
		binary.LittleEndian.Uint16(raw[1024:]) != 50000 || slices.ContainsFunc(raw[12:1024], func(b byte) bool { return b != 0 }) {
		t.Fatalf("llm.c file: %d bytes, header %v", len(raw), raw[:12])
	}
	nano := writeTokens(t, filepath.Join(dir, "b.bin"), toks, TokensNanoGPT)
	raw, _ = os.ReadFile(nano)
	if len(raw) != 600 || binary.LittleEndian.Uint16(raw[2:]) != 50001 {
		t.Fatalf("nanoGPT file: %d bytes", len(raw))
	}
	for _, p := range []string{llmc, nano} {
		f, err := OpenTokenFile(p, TokensAuto, GPT2VocabSize)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(f.Tokens(), toks) {
			t.Fatalf("%s: tokens do not round-trip", p)
		}
		f.Close()
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Fatalf("temporary files left: %v", entries)
	}
}
