// Command gpt trains a character-level decoder-only transformer on
// /usr/share/common-licenses/GPL-3, the workload of
// ../shared/anchors/torch_models.py's "gpt", for a side-by-side comparison
// with torch DDP + Gloo: vocab = the file's distinct bytes, context 64,
// d_model 128, 4 heads, 2 pre-LayerNorm blocks (causal self-attention, GELU
// MLP 512), learned positional embeddings, final LayerNorm, Linear head, no
// dropout and no weight tying; AdamW lr 1e-3, weight decay 0.01; batch 32
// sequences per rank; sample i is the 64-byte window starting at byte 8i.
// After each epoch rank 0 prints its mean training loss over the epoch as
// loss=; at the end it prints a greedy sample. Run it under the launcher:
//
//	go run ./cmd/ddprun --standalone --nproc-per-node 2 ./examples/gpt -epochs 3
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/goddp/goddp/autograd"
	"github.com/goddp/goddp/data"
	_ "github.com/goddp/goddp/devices" // registers cuda and sim: -device cuda, sim, sim:N
	"github.com/goddp/goddp/nn"
	"github.com/goddp/goddp/optim"
	"github.com/goddp/goddp/tensor"
	"github.com/goddp/goddp/trainer"
)

const (
	textPath = "/usr/share/common-licenses/GPL-3"
	ctxLen   = 64
	dModel   = 128
	nHeads   = 4
	nLayers  = 2
	stride   = 8
)

func main() {
	path := textPath
	if p := os.Getenv("GPT_TEXT"); p != "" { // another text, or the GPL where base-files put none
		path = p
	}
	text, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gpt: %v (the file comes with Debian's base-files package; GPT_TEXT names another)\n", err)
		os.Exit(1)
	}
	os.Exit(run(os.Args, os.Stdout, text))
}

// defaults are the example's flag defaults.
var defaults = trainer.Defaults{Epochs: 3, BatchSize: 32, SaveEvery: 0, CkptDir: ""}

// run trains on text with the flags in args (args[0] the program name) and
// returns the exit code; rank 0 then prints a greedy sample. A model on a
// device is copied to the host at every epoch's end (the device is released
// when trainer.Main returns), and the sample comes from that copy.
func run(args []string, out io.Writer, text []byte) int {
	c := newCorpus(text)
	rank := envInt("RANK", 0)
	var model, host *GPT
	code := trainer.Main(args, out, defaults, func(rng *tensor.RNG) (trainer.Job, error) {
		ds, err := c.dataset()
		if err != nil {
			return trainer.Job{}, err
		}
		model = NewGPT(rng, len(c.vocab), ctxLen, dModel, nHeads, nLayers)
		return trainer.Job{
			Name:    "gpt",
			Dataset: ds,
			Model:   model,
			NewOpt: func(params []*autograd.Variable) (optim.Optimizer, error) {
				cfg := optim.DefaultAdam()
				cfg.WeightDecay = 0.01
				return optim.NewAdamW(params, cfg)
			},
			Loss: (&seqLoss{vocab: len(c.vocab)}).loss,
			Callbacks: []trainer.Callback{trainer.Funcs{EpochEnd: func(context.Context, *trainer.Trainer, trainer.EpochInfo) error {
				var err error
				host, err = hostCopy(model, host)
				return err
			}}},
		}, nil
	})
	if code == 0 && rank == 0 && model != nil {
		m := model
		if host != nil {
			m = host
		}
		prompt := c.encode(text[:32])
		fmt.Fprintf(out, "sample: %q\n", c.decode(append(prompt, generate(m, prompt, 160)...)))
	}
	return code
}

// hostCopy copies the parameters of m, when it lives on a device, into host
// (a host GPT of m's sizes, made when nil) and returns it; nil for a model
// on the host.
func hostCopy(m, host *GPT) (*GPT, error) {
	if m.head.Weight.Value.IsCPU() {
		return nil, nil
	}
	if host == nil {
		heads := 1
		if m.blocks.Len() > 0 {
			heads = m.blocks.At(0).(*Block).heads
		}
		host = NewGPT(tensor.NewRNG(0), m.tok.Weight.Value.Size(0), m.ctx, m.tok.Weight.Value.Size(1), heads, m.blocks.Len())
	}
	src, dst := nn.Parameters(m), nn.Parameters(host)
	for i, p := range src {
		if err := tensor.Copy(dst[i].Value, p.Value); err != nil {
			return nil, fmt.Errorf("gpt: copying the model to the host: %w", err)
		}
	}
	return host, nil
}

// corpus maps the text's bytes to token ids (the sorted distinct bytes).
type corpus struct {
	vocab []byte
	index [256]int
	ids   []int
}

func newCorpus(text []byte) *corpus {
	c := &corpus{}
	var seen [256]bool
	for _, b := range text {
		seen[b] = true
	}
	for b := range 256 {
		if seen[b] {
			c.index[b] = len(c.vocab)
			c.vocab = append(c.vocab, byte(b))
		}
	}
	c.ids = c.encode(text)
	return c
}

func (c *corpus) encode(s []byte) []int {
	ids := make([]int, len(s))
	for i, b := range s {
		ids[i] = c.index[b]
	}
	return ids
}

func (c *corpus) decode(ids []int) string {
	out := make([]byte, len(ids))
	for i, id := range ids {
		out[i] = c.vocab[id]
	}
	return string(out)
}

// dataset returns inputs [N, 64] and targets [N, 64] (the inputs shifted by
// one byte) for the windows starting at bytes 0, 8, 16, ... below len-65,
// the anchor's torch.arange(0, len(ids) - 65, 8).
func (c *corpus) dataset() (*data.TensorDataset, error) {
	var starts []int
	for s := 0; s < len(c.ids)-ctxLen-1; s += stride {
		starts = append(starts, s)
	}
	n := len(starts)
	// Token ids are int64 tensors (torch's long): they stay on the host
	// when the model trains on a device, where the embedding and the loss
	// read them without waiting for the device.
	x, y := make([]int64, n*ctxLen), make([]int64, n*ctxLen)
	for i, s := range starts {
		for j := range ctxLen {
			x[i*ctxLen+j] = int64(c.ids[s+j])
			y[i*ctxLen+j] = int64(c.ids[s+j+1])
		}
	}
	return data.NewTensorDataset(tensor.FromI64(x, n, ctxLen), tensor.FromI64(y, n, ctxLen))
}

// seqLoss is the loss function, cross-entropy of logits [B, T, V] through
// Reshape as the anchor's F.cross_entropy(o.reshape(-1, V), t.reshape(-1)).
// The trainer prints rank 0's mean of it over each epoch as loss=.
type seqLoss struct{ vocab int }

// loss takes the batch's targets [B, T], int64 token ids, which stay on the
// host whatever the model's device.
func (l *seqLoss) loss(out *autograd.Variable, b data.Batch) *autograd.Variable {
	return autograd.CrossEntropy(autograd.Reshape(out, -1, l.vocab), b.Targets, autograd.ReductionMean)
}

// generate extends prompt greedily by n tokens, feeding the model at most
// its context's last ctx tokens. The ids go to the model's device and the
// last position's logits come back to the host for the argmax.
func generate(m *GPT, prompt []int, n int) []int {
	ids := append([]int(nil), prompt...)
	dev := m.head.Weight.Value.Device()
	nn.Eval(m)
	nn.NoGrad(m, func() {
		for range n {
			window := ids[max(0, len(ids)-m.ctx):]
			x := tensor.New(tensor.Float32, 1, len(window))
			for i, id := range window {
				x.F32()[i] = float32(id)
			}
			logits := m.Forward(autograd.Const(x.MustTo(dev))).Value // [1, T, V]
			last := tensor.Narrow(logits, 1, len(window)-1, 1).MustTo(tensor.CPU()).Contiguous()
			ids = append(ids, tensor.ArgMax(last.Reshape(1, -1), 1)[0])
		}
	})
	return ids[len(prompt):]
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}
