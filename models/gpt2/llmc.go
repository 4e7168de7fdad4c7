package gpt2

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/checkpoint"
	"github.com/goddp/goddp/internal/half"
	"github.com/goddp/goddp/tensor"
)

// llm.c's model file (karpathy/llm.c, train_gpt2.py's write_model and
// train_gpt2.c's gpt2_build_from_checkpoint): a header of 256
// little-endian int32s, header[0] the magic 20240326, header[1] the
// version (3: every tensor float32; 5: every tensor bfloat16, LayerNorms
// included), header[2..7] max_seq_len, vocab_size, num_layers,
// num_heads, channels, padded_vocab_size, the rest zero; then the
// parameters back to back in this order, each stacked over the layers:
//
//	wte [Vp, C], wpe [maxT, C], ln1w [L, C], ln1b [L, C],
//	qkvw [L, 3C, C], qkvb [L, 3C], attprojw [L, C, C], attprojb [L, C],
//	ln2w [L, C], ln2b [L, C], fcw [L, 4C, C], fcb [L, 4C],
//	fcprojw [L, C, 4C], fcprojb [L, C], lnfw [C], lnfb [C]
//
// The four matrices are torch's Linear layout [out, in], the transpose
// of HF's Conv1D weights that this package keeps. wte has the padded
// rows (llm.c's exporter fills them with zeros).

// LLMCMagic is header[0] of an llm.c model file.
const LLMCMagic = 20240326

// The llm.c model file versions this package reads and writes.
const (
	LLMCFloat32  = 3 // every tensor float32
	LLMCBFloat16 = 5 // every tensor bfloat16 (round to nearest even on write)
)

const llmcHeaderInts = 256

// ErrLLMC is wrapped by the errors about llm.c model files.
var ErrLLMC = errors.New("gpt2: bad llm.c model file")

// llmcTensor is one of the file's 16 tensors: the parameter of layer l
// (l ignored for the three that are not per layer), and whether the file
// holds its transpose.
type llmcTensor struct {
	name      string
	perLayer  bool
	transpose bool
	param     func(m *Model, l int) *autograd.Variable
}

var llmcOrder = []llmcTensor{
	{"wte", false, false, func(m *Model, _ int) *autograd.Variable { return m.Transformer.WTE.Weight }},
	{"wpe", false, false, func(m *Model, _ int) *autograd.Variable { return m.Transformer.WPE.Weight }},
	{"ln1w", true, false, func(m *Model, l int) *autograd.Variable { return m.Block(l).Ln1.Weight }},
	{"ln1b", true, false, func(m *Model, l int) *autograd.Variable { return m.Block(l).Ln1.Bias }},
	{"qkvw", true, true, func(m *Model, l int) *autograd.Variable { return m.Block(l).Attn.CAttn.Weight }},
	{"qkvb", true, false, func(m *Model, l int) *autograd.Variable { return m.Block(l).Attn.CAttn.Bias }},
	{"attprojw", true, true, func(m *Model, l int) *autograd.Variable { return m.Block(l).Attn.CProj.Weight }},
	{"attprojb", true, false, func(m *Model, l int) *autograd.Variable { return m.Block(l).Attn.CProj.Bias }},
	{"ln2w", true, false, func(m *Model, l int) *autograd.Variable { return m.Block(l).Ln2.Weight }},
	{"ln2b", true, false, func(m *Model, l int) *autograd.Variable { return m.Block(l).Ln2.Bias }},
	{"fcw", true, true, func(m *Model, l int) *autograd.Variable { return m.Block(l).MLP.CFc.Weight }},
	{"fcb", true, false, func(m *Model, l int) *autograd.Variable { return m.Block(l).MLP.CFc.Bias }},
	{"fcprojw", true, true, func(m *Model, l int) *autograd.Variable { return m.Block(l).MLP.CProj.Weight }},
	{"fcprojb", true, false, func(m *Model, l int) *autograd.Variable { return m.Block(l).MLP.CProj.Bias }},
	{"lnfw", false, false, func(m *Model, _ int) *autograd.Variable { return m.Transformer.LnF.Weight }},
	{"lnfb", false, false, func(m *Model, _ int) *autograd.Variable { return m.Transformer.LnF.Bias }},
}

// each calls fn on every (tensor, layer) of the file in its order.
func (m *Model) eachLLMC(fn func(f llmcTensor, l int, p *autograd.Variable) error) error {
	for _, f := range llmcOrder {
		layers := 1
		if f.perLayer {
			layers = m.Config.Layers
		}
		for l := range layers {
			if err := fn(f, l, f.param(m, l)); err != nil {
				return err
			}
		}
	}
	return nil
}

func eltSize(version int) int {
	if version == LLMCBFloat16 {
		return 2
	}
	return 4
}

// WriteLLMC writes m as an llm.c model file of the given version
// (LLMCFloat32 or LLMCBFloat16). The header's vocab_size is VocabSize and
// padded_vocab_size PaddedVocab: all of wte's rows are written.
func (m *Model) WriteLLMC(w io.Writer, version int) error {
	if version != LLMCFloat32 && version != LLMCBFloat16 {
		return fmt.Errorf("%w: cannot write version %d (want %d, float32, or %d, bfloat16)", ErrLLMC, version, LLMCFloat32, LLMCBFloat16)
	}
	c := m.Config
	var hdr [llmcHeaderInts]int32
	hdr[0], hdr[1] = LLMCMagic, int32(version)
	for i, v := range []int{c.BlockSize, c.VocabSize, c.Layers, c.Heads, c.Embd, c.PaddedVocab()} {
		if v > math.MaxInt32 {
			return fmt.Errorf("%w: size %d does not fit the header's int32", ErrLLMC, v)
		}
		hdr[2+i] = int32(v)
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	if err := binary.Write(bw, binary.LittleEndian, hdr[:]); err != nil {
		return fmt.Errorf("gpt2: writing llm.c header: %w", err)
	}
	size := eltSize(version)
	var buf []byte
	err := m.eachLLMC(func(f llmcTensor, l int, p *autograd.Variable) error {
		t, err := p.Value.To(tensor.CPU())
		if err != nil {
			return fmt.Errorf("gpt2: %s of layer %d to the host: %w", f.name, l, err)
		}
		t = tensor.AsType(t, tensor.Float32)
		if f.transpose {
			t = transpose2D(t)
		}
		vals := t.F32()
		buf = buf[:0]
		for _, v := range vals {
			if size == 2 {
				buf = binary.LittleEndian.AppendUint16(buf, half.F32ToBF16(v))
			} else {
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
			}
		}
		_, err = bw.Write(buf)
		return err
	})
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return fmt.Errorf("gpt2: writing llm.c model: %w", err)
	}
	return nil
}

// SaveLLMC writes the model to path atomically (checkpoint.WriteFileAtomic)
// as an llm.c model file of the given version.
func (m *Model) SaveLLMC(path string, version int) error {
	return checkpoint.WriteFileAtomic(path, func(w io.Writer) error { return m.WriteLLMC(w, version) })
}

// llmcHeader reads and checks the header; name labels the errors.
func llmcHeader(r io.Reader, name string) (cfg Config, version int, err error) {
	var hdr [llmcHeaderInts]int32
	if err := binary.Read(r, binary.LittleEndian, hdr[:]); err != nil {
		return Config{}, 0, fmt.Errorf("%w: %s: reading the %d-byte header: %w", ErrLLMC, name, 4*llmcHeaderInts, err)
	}
	if hdr[0] != LLMCMagic {
		return Config{}, 0, fmt.Errorf("%w: %s: magic %d, want %d (not an llm.c GPT-2 model file)", ErrLLMC, name, hdr[0], LLMCMagic)
	}
	version = int(hdr[1])
	if version != LLMCFloat32 && version != LLMCBFloat16 {
		return Config{}, 0, fmt.Errorf("%w: %s: version %d, want %d (float32) or %d (bfloat16)", ErrLLMC, name, version, LLMCFloat32, LLMCBFloat16)
	}
	cfg = Config{BlockSize: int(hdr[2]), VocabSize: int(hdr[3]), Layers: int(hdr[4]), Heads: int(hdr[5]),
		Embd: int(hdr[6]), PaddedVocabSize: int(hdr[7])}
	if err := cfg.Validate(); err != nil {
		return Config{}, 0, fmt.Errorf("%w: %s: header max_seq_len %d, vocab_size %d, num_layers %d, num_heads %d, channels %d, padded_vocab_size %d: %w",
			ErrLLMC, name, hdr[2], hdr[3], hdr[4], hdr[5], hdr[6], hdr[7], err)
	}
	return cfg, version, nil
}

// ReadLLMCConfig returns the Config in the header of the llm.c model
// file at path (Dropout 0), to build the model that LoadLLMC fills.
func ReadLLMCConfig(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, fmt.Errorf("gpt2: %w", err)
	}
	defer f.Close()
	cfg, _, err := llmcHeader(f, path)
	return cfg, err
}

// FromLLMC builds a model of the file's sizes (Dropout 0) and loads it.
func FromLLMC(path string) (*Model, error) {
	cfg, err := ReadLLMCConfig(path)
	if err != nil {
		return nil, err
	}
	m, err := build(nil, cfg)
	if err != nil {
		return nil, err
	}
	if err := m.LoadLLMC(path); err != nil {
		return nil, err
	}
	return m, nil
}

// LoadLLMC reads the llm.c model file at path into m; see ReadLLMC.
func (m *Model) LoadLLMC(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("gpt2: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		if err := m.checkLLMCSize(f, path, st.Size()); err != nil {
			return err
		}
	}
	return m.ReadLLMC(f, path)
}

// checkLLMCSize compares the file's size with what its header promises,
// before any tensor is read, then rewinds.
func (m *Model) checkLLMCSize(f *os.File, path string, size int64) error {
	cfg, version, err := llmcHeader(f, path)
	if err != nil {
		return err
	}
	want := int64(4*llmcHeaderInts) + int64(cfg.NumParams())*int64(eltSize(version))
	if size != want {
		return fmt.Errorf("%w: %s: %d bytes, but its header (%d layers, width %d, padded vocabulary %d, context %d, version %d) needs %d",
			ErrLLMC, path, size, cfg.Layers, cfg.Embd, cfg.PaddedVocab(), cfg.BlockSize, version, want)
	}
	_, err = f.Seek(0, io.SeekStart)
	return err
}

// ReadLLMC reads an llm.c model file (version 3 or 5) from r into m in
// place; name labels the errors. The header's sizes must be m's
// (Config's VocabSize, PaddedVocab, BlockSize, Layers, Heads, Embd), the
// stream must end after the last tensor, and every value is read before
// any parameter changes, so m is unchanged on error. bfloat16 values
// widen to float32 exactly.
func (m *Model) ReadLLMC(r io.Reader, name string) error {
	br := bufio.NewReaderSize(r, 1<<20)
	cfg, version, err := llmcHeader(br, name)
	if err != nil {
		return err
	}
	c := m.Config
	if cfg.BlockSize != c.BlockSize || cfg.VocabSize != c.VocabSize || cfg.PaddedVocab() != c.PaddedVocab() ||
		cfg.Layers != c.Layers || cfg.Heads != c.Heads || cfg.Embd != c.Embd {
		return fmt.Errorf("%w: %s: header (context %d, vocabulary %d padded to %d, %d layers, %d heads, width %d) does not match the model's (%d, %d, %d, %d, %d, %d)",
			ErrLLMC, name, cfg.BlockSize, cfg.VocabSize, cfg.PaddedVocab(), cfg.Layers, cfg.Heads, cfg.Embd,
			c.BlockSize, c.VocabSize, c.PaddedVocab(), c.Layers, c.Heads, c.Embd)
	}
	size := eltSize(version)
	type staged struct {
		p *autograd.Variable
		t *tensor.Tensor
	}
	var loads []staged
	var raw []byte
	err = m.eachLLMC(func(f llmcTensor, l int, p *autograd.Variable) error {
		shape := p.Value.Shape()
		if f.transpose {
			shape = []int{shape[1], shape[0]}
		}
		t := tensor.Empty(tensor.Float32, shape...)
		vals := t.F32()
		if n := len(vals) * size; cap(raw) < n {
			raw = make([]byte, n)
		}
		raw = raw[:len(vals)*size]
		if _, err := io.ReadFull(br, raw); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("%w: %s: truncated inside %s of layer %d", ErrLLMC, name, f.name, l)
			}
			return fmt.Errorf("gpt2: reading %s: %w", name, err)
		}
		for i := range vals {
			if size == 2 {
				vals[i] = half.BF16ToF32(binary.LittleEndian.Uint16(raw[2*i:]))
			} else {
				vals[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			}
		}
		if f.transpose {
			t = transpose2D(t)
		}
		loads = append(loads, staged{p, t})
		return nil
	})
	if err != nil {
		return err
	}
	if n, _ := br.Read(make([]byte, 1)); n > 0 {
		return fmt.Errorf("%w: %s: bytes left after the last tensor (lnfb)", ErrLLMC, name)
	}
	for _, s := range loads {
		if err := tensor.Copy(s.p.Value, s.t); err != nil {
			return fmt.Errorf("gpt2: loading %s: %w", name, err)
		}
	}
	return nil
}
