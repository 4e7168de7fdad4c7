package gpt2

import (
	"encoding/json"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/goddp/goddp/amp"
	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/tensor"
)

// tinyFixture is testdata/tiny.json (scripts/gen_fixtures_gpt2.py).
type tinyFixture struct {
	Config struct {
		Vocab  int `json:"vocab_size"`
		Ctx    int `json:"n_positions"`
		Embd   int `json:"n_embd"`
		Layers int `json:"n_layer"`
		Heads  int `json:"n_head"`
	} `json:"config"`
	IDs         [][]int              `json:"idx"`
	Targets     [][]int              `json:"targets"`
	Logits      []float64            `json:"logits"`
	LogitsSum   float64              `json:"logits_sum"`
	LogitsSumSq float64              `json:"logits_sumsq"`
	Loss        float64              `json:"loss"`
	Grads       map[string][]float64 `json:"grads"`
}

func loadTinyFixture(t *testing.T) (*tinyFixture, *Model) {
	t.Helper()
	b, err := os.ReadFile("testdata/tiny.json")
	if err != nil {
		t.Fatal(err)
	}
	var f tinyFixture
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	c := f.Config
	m := newTiny(t, Config{VocabSize: c.Vocab, BlockSize: c.Ctx, Layers: c.Layers, Heads: c.Heads, Embd: c.Embd}, 99)
	if err := m.LoadHF("testdata/tiny.safetensors"); err != nil { // written by the script, as HF writes it
		t.Fatal(err)
	}
	return &f, m
}

// closeTo reports whether got matches want within 1e-5 of want's scale
// (its largest magnitude): float32 against torch's float64 run of the
// same float32 weights.
func closeTo(t *testing.T, name string, got []float32, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
	}
	scale := 0.0
	for _, w := range want {
		scale = math.Max(scale, math.Abs(w))
	}
	worst, at := 0.0, 0
	for i := range want {
		if d := math.Abs(float64(got[i]) - want[i]); d > worst {
			worst, at = d, i
		}
	}
	if worst > 1e-5*scale {
		t.Errorf("%s: element %d is %v, torch %v (off by %.3g of scale %.3g)", name, at, got[at], want[at], worst/scale, scale)
	}
}

// TestTorchFixture runs scripts/gen_fixtures_gpt2.py's tiny GPT-2 (HF
// names and Conv1D layout, loaded from the script's safetensors file):
// logits, loss and six parameters' gradients within 1e-5 relative.
func TestTorchFixture(t *testing.T) {
	f, m := loadTinyFixture(t)
	logits := m.Forward(autograd.Const(ids(f.IDs)))
	closeTo(t, "logits", logits.Value.F32(), f.Logits)
	var sum, sumsq float64
	for _, v := range logits.Value.F32() {
		sum += float64(v)
		sumsq += float64(v) * float64(v)
	}
	if math.Abs(sum-f.LogitsSum) > 1e-5*math.Sqrt(f.LogitsSumSq) || math.Abs(sumsq/f.LogitsSumSq-1) > 1e-5 {
		t.Errorf("logits' sum %v and sum of squares %v, torch %v and %v", sum, sumsq, f.LogitsSum, f.LogitsSumSq)
	}
	loss := m.Loss(logits, ids(f.Targets))
	if l := loss.Value.Item(); math.Abs(l/f.Loss-1) > 1e-5 {
		t.Errorf("loss %v, torch %v", l, f.Loss)
	}
	if err := loss.Backward(); err != nil {
		t.Fatal(err)
	}
	params := map[string]*autograd.Variable{}
	for _, np := range m.NamedParameters() {
		params[np.Name] = np.Param
	}
	for name, want := range f.Grads {
		p := params[name]
		if p == nil || p.Grad == nil {
			t.Errorf("%s: no gradient", name)
			continue
		}
		closeTo(t, name+" grad", p.Grad.Contiguous().F32(), want)
	}
}

// TestTorchFixtureBF16 runs the fixture under amp.Autocast's bf16
// products (the Conv1Ds and the tied head): the logits stay within
// bfloat16's rounding of torch's float32 run.
func TestTorchFixtureBF16(t *testing.T) {
	f, m := loadTinyFixture(t)
	defer amp.Autocast(m, amp.BFloat16)()
	if m.headPrecision != tensor.PrecisionBFloat16 || m.Block(1).MLP.CProj.Precision != tensor.PrecisionBFloat16 {
		t.Fatal("amp.Autocast did not reach the head or the Conv1Ds")
	}
	got := m.Forward(autograd.Const(ids(f.IDs))).Value.F32()
	scale, worst := 0.0, 0.0
	for i, w := range f.Logits {
		scale = math.Max(scale, math.Abs(w))
		worst = math.Max(worst, math.Abs(float64(got[i])-w))
	}
	// bfloat16 keeps 8 bits: a few 2⁻⁸ of the logits' scale through 2 layers.
	if worst > 0.05*scale || worst < 1e-6*scale {
		t.Errorf("bf16 logits off by %.3g of scale %.3g: want bfloat16's error, not float32's nor more", worst/scale, scale)
	}
}

// TestTorchLLMCFile reads the fixture's weights from the llm.c model file
// the script writes as llm.c's exporter does (float32, vocabulary padded
// to 128 with zero rows, Linear layout): torch's logits on the real
// columns, zero on the padded ones (zero rows of the tied head), and the
// same parameters as the safetensors file.
func TestTorchLLMCFile(t *testing.T) {
	f, hf := loadTinyFixture(t)
	m, err := FromLLMC("testdata/tiny_llmc.bin")
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.PaddedVocab() != 128 || m.Config.VocabSize != f.Config.Vocab {
		t.Fatalf("config %+v", m.Config)
	}
	logits := m.Forward(autograd.Const(ids(f.IDs))).Value // [2, 16, 128]
	words := tensor.Narrow(logits, 2, 0, f.Config.Vocab).Contiguous().F32()
	closeTo(t, "logits", words, f.Logits)
	for i, v := range tensor.Narrow(logits, 2, f.Config.Vocab, 128-f.Config.Vocab).Contiguous().F32() {
		if v != 0 {
			t.Fatalf("padded logit %d is %v, want 0", i, v)
		}
	}
	hsd, msd := hf.HFStateDict(), m.HFStateDict()
	for k, v := range hsd {
		if !slices.Equal(v.F32(), msd[k].F32()) {
			t.Errorf("%s differs between the llm.c file and the safetensors file", k)
		}
	}
}
