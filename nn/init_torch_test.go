package nn

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/tensor"
)

// torchArr is an array as scripts/gen_fixtures_rng.py stores it: raw
// little-endian bytes in base64, compared bit for bit.
type torchArr struct {
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
	B64   string `json:"b64"`
}

func (a torchArr) tensor(t *testing.T) *tensor.Tensor {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(a.B64)
	require.NoError(t, err)
	if a.DType == "float64" {
		d := make([]float64, len(raw)/8)
		for i := range d {
			d[i] = math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:]))
		}
		return tensor.FromF64(d, a.Shape...)
	}
	require.Equal(t, "float32", a.DType)
	d := make([]float32, len(raw)/4)
	for i := range d {
		d[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return tensor.FromF32(d, a.Shape...)
}

type torchInitFixture struct {
	Cases struct {
		MLPSeed7     map[string]torchArr  `json:"mlp_seed7"`
		LayersSeed11 map[string]torchArr  `json:"layers_seed11"`
		ConvSeed3    map[string]torchArr  `json:"conv_seed3"`
		InitSeq      [][2]json.RawMessage `json:"init_seq_seed5"`
	} `json:"cases"`
	Dropout []struct {
		Seed              uint64   `json:"seed"`
		P                 float64  `json:"p"`
		X                 torchArr `json:"x"`
		Y                 torchArr `json:"y"`
		LinearThenDropout bool     `json:"linear_then_dropout"`
		Weight            torchArr `json:"weight"`
		Bias              torchArr `json:"bias"`
	} `json:"dropout"`
}

func loadTorchInit(t *testing.T) torchInitFixture {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "rng", "torch_init.json"))
	require.NoError(t, err, "fixtures come from /usr/bin/python3 scripts/gen_fixtures_rng.py")
	var f torchInitFixture
	require.NoError(t, json.Unmarshal(b, &f))
	return f
}

// requireBitEqual demands the same shape and identical bits (max abs
// difference 0, and no -0/+0 or NaN slack).
func requireBitEqual(t *testing.T, want, got *tensor.Tensor, msg string) {
	t.Helper()
	require.Equal(t, want.Shape(), got.Shape(), "%s: shape", msg)
	require.Equal(t, want.DType(), got.DType(), "%s: dtype", msg)
	if want.DType() == tensor.Float64 {
		w, g := want.F64(), got.Contiguous().F64()
		for i := range w {
			require.Equal(t, math.Float64bits(w[i]), math.Float64bits(g[i]), "%s: element %d: got %v want %v", msg, i, g[i], w[i])
		}
		return
	}
	w, g := want.F32(), got.Contiguous().F32()
	for i := range w {
		require.Equal(t, math.Float32bits(w[i]), math.Float32bits(g[i]), "%s: element %d: got %v want %v", msg, i, g[i], w[i])
	}
}

func requireStateDictMatches(t *testing.T, m Module, want map[string]torchArr) {
	t.Helper()
	sd := StateDict(m)
	require.Equal(t, len(want), sd.Len(), "state dict keys %v", sd.Keys())
	for k, w := range want {
		got, ok := sd.Get(k)
		require.True(t, ok, "goddp's model has no %q", k)
		requireBitEqual(t, w.tensor(t), got, k)
	}
}

// TestInitMatchesTorchMLP is issue 19's bar: after torch.manual_seed(7),
// Linear(20,64)-ReLU-Linear(64,4) built in torch has exactly the weights of
// goddp's model built from tensor.NewRNG(7).
func TestInitMatchesTorchMLP(t *testing.T) {
	f := loadTorchInit(t)
	rng := tensor.NewRNG(7)
	m := NewSequential(NewLinear(rng, 20, 64), NewReLU(), NewLinear(rng, 64, 4))
	requireStateDictMatches(t, m, f.Cases.MLPSeed7)
}

// TestInitMatchesTorchLayers builds every initialised layer kind in torch's
// order from one seed: Embedding's N(0,1) on both of torch's normal_ paths
// (80 elements: the block kernel; 6: the scalar Box-Muller), LayerNorm's
// ones and zeros, Linear with and without bias.
func TestInitMatchesTorchLayers(t *testing.T) {
	f := loadTorchInit(t)
	rng := tensor.NewRNG(11)
	m := &Container{}
	m.RegisterModule("emb", NewEmbedding(rng, 10, 8))
	m.RegisterModule("ln", NewLayerNorm(8))
	m.RegisterModule("lin", NewLinear(rng, 8, 3))
	m.RegisterModule("emb_small", NewEmbedding(rng, 3, 2))
	m.RegisterModule("lin_nobias", NewLinearNoBias(rng, 5, 7))
	requireStateDictMatches(t, m, f.Cases.LayersSeed11)
}

// TestInitMatchesTorchConv2d: Conv2d's default init (plain, grouped,
// bias-free, rectangular kernel) equals torch's for the same seed and order.
func TestInitMatchesTorchConv2d(t *testing.T) {
	f := loadTorchInit(t)
	require.NotEmpty(t, f.Cases.ConvSeed3, "fixture lacks conv_seed3: rerun scripts/gen_fixtures_rng.py")
	rng := tensor.NewRNG(3)
	m := &Container{}
	m.RegisterModule("c1", NewConv2d(rng, 1, 4, 5, Padding(2)))
	m.RegisterModule("c2", NewConv2d(rng, 4, 6, 3, Groups(2), NoBias()))
	m.RegisterModule("c3", NewConv2d(rng, 6, 6, 0, KernelSize(3, 1), Groups(6)))
	requireStateDictMatches(t, m, f.Cases.ConvSeed3)
}

// TestInitFunctionsMatchTorch replays torch.nn.init calls in the fixture's
// order on one generator (torch.manual_seed(5)).
func TestInitFunctionsMatchTorch(t *testing.T) {
	f := loadTorchInit(t)
	rng := tensor.NewRNG(5)
	steps := map[string]func() *tensor.Tensor{
		"kaiming_uniform_a_sqrt5": func() *tensor.Tensor {
			w := tensor.New(tensor.Float32, 6, 4)
			KaimingUniform_(rng, w, math.Sqrt(5), FanIn, "leaky_relu")
			return w
		},
		"kaiming_uniform_relu": func() *tensor.Tensor {
			w := tensor.New(tensor.Float32, 6, 4)
			KaimingUniform_(rng, w, 0, FanIn, "relu")
			return w
		},
		"kaiming_uniform_conv": func() *tensor.Tensor {
			w := tensor.New(tensor.Float32, 8, 3, 3, 3)
			KaimingUniform_(rng, w, math.Sqrt(5), FanIn, "leaky_relu")
			return w
		},
		"kaiming_normal_fan_out_relu": func() *tensor.Tensor {
			w := tensor.New(tensor.Float32, 6, 4)
			KaimingNormal_(rng, w, 0, FanOut, "relu")
			return w
		},
		"xavier_uniform": func() *tensor.Tensor {
			w := tensor.New(tensor.Float32, 6, 4)
			XavierUniform_(rng, w, 1)
			return w
		},
		"xavier_normal_tanh": func() *tensor.Tensor {
			w := tensor.New(tensor.Float32, 6, 4)
			XavierNormal_(rng, w, CalculateGain("tanh"))
			return w
		},
		"uniform": func() *tensor.Tensor {
			w := tensor.New(tensor.Float32, 5)
			Uniform_(rng, w, -0.1, 0.3)
			return w
		},
		"normal": func() *tensor.Tensor {
			w := tensor.New(tensor.Float32, 40)
			Normal_(rng, w, 0.5, 0.02)
			return w
		},
	}
	require.Len(t, f.Cases.InitSeq, len(steps))
	for _, step := range f.Cases.InitSeq {
		var name string
		var want torchArr
		require.NoError(t, json.Unmarshal(step[0], &name))
		require.NoError(t, json.Unmarshal(step[1], &want))
		fn, ok := steps[name]
		require.True(t, ok, "no Go step for %q", name)
		requireBitEqual(t, want.tensor(t), fn(), name)
	}
}

func TestInitHelpers(t *testing.T) {
	in, out := CalculateFanInAndFanOut(tensor.New(tensor.Float32, 8, 3, 5, 5))
	require.Equal(t, 75, in)
	require.Equal(t, 200, out)
	require.Panics(t, func() { CalculateFanInAndFanOut(tensor.New(tensor.Float32, 4)) })
	require.Panics(t, func() { CalculateGain("swish") })
	require.InDelta(t, math.Sqrt(2.0/(1+0.01*0.01)), CalculateGain("leaky_relu"), 0)
	w := tensor.New(tensor.Float64, 3)
	Ones_(w)
	require.Equal(t, []float64{1, 1, 1}, w.F64())
	Zeros_(w)
	require.Equal(t, []float64{0, 0, 0}, w.F64())
}
