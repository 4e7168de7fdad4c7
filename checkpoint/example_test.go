package checkpoint_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/goddp/goddp/checkpoint"
	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/tensor"
)

// The seed Trainer's save/resume cycle with a Manager: save every few
// epochs, keep the last two, and resume from the newest valid checkpoint.
func Example() {
	dir, _ := os.MkdirTemp("", "ckpt")
	defer os.RemoveAll(dir)
	m, err := checkpoint.NewManager(dir, checkpoint.Keep(2))
	if err != nil {
		panic(err)
	}
	defer m.Close() // releases the directory for the next run
	if _, err := m.Latest(); errors.Is(err, checkpoint.ErrNotFound) {
		fmt.Println("no checkpoint: starting fresh")
	}
	weights := map[string]*tensor.Tensor{
		"weight": tensor.FromF32(make([]float32, 20), 1, 20),
		"bias":   tensor.FromF32([]float32{0}, 1),
	}
	for epoch := 0; epoch < 15; epoch++ {
		weights["bias"].F32()[0] = float32(epoch) // "training"
		if epoch%5 == 0 {
			_, err := m.Save(&checkpoint.Checkpoint{Epoch: epoch, Step: 64 * (epoch + 1), Model: weights,
				Sampler: &data.SamplerState{Epoch: epoch, NumReplicas: 2, DatasetLen: 2048, Shuffle: true}})
			if err != nil {
				panic(err)
			}
		}
	}
	files, _ := m.List()
	for _, f := range files {
		fmt.Println(filepath.Base(f))
	}
	found, err := m.Latest()
	if err != nil {
		panic(err)
	}
	c := found.Checkpoint
	fmt.Println("resume after epoch", c.Epoch, "step", c.Step, "bias", c.Model["bias"].F32())
	// Output:
	// no checkpoint: starting fresh
	// ckpt-e00000010-s000000000704.safetensors
	// ckpt-e00000005-s000000000384.safetensors
	// resume after epoch 10 step 704 bias [10]
}

// A damaged file is reported with its name, and Latest falls back to an
// older checkpoint.
func ExampleManager_Latest() {
	dir, _ := os.MkdirTemp("", "ckpt")
	defer os.RemoveAll(dir)
	m, _ := checkpoint.NewManager(dir)
	defer m.Close()
	for epoch := 1; epoch <= 2; epoch++ {
		if _, err := m.Save(&checkpoint.Checkpoint{Epoch: epoch}); err != nil {
			panic(err)
		}
	}
	newest := m.Path(2, 0)
	b, _ := os.ReadFile(newest)
	_ = os.WriteFile(newest, b[:len(b)-1], 0o644) // truncate by one byte

	found, err := m.Latest()
	if err != nil {
		panic(err)
	}
	fmt.Println("loaded epoch", found.Checkpoint.Epoch)
	for _, s := range found.Skipped {
		fmt.Println("skipped", filepath.Base(s.Path), errors.Is(s.Err, checkpoint.ErrCorrupt))
	}
	// Output:
	// loaded epoch 1
	// skipped ckpt-e00000002-s000000000000.safetensors true
}

// Plain safetensors files, as exchanged with other frameworks.
func ExampleWriteSafetensors() {
	path := filepath.Join(os.TempDir(), "goddp-example.safetensors")
	defer os.Remove(path)
	w := tensor.FromF32([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	if err := checkpoint.SaveSafetensors(path, map[string]*tensor.Tensor{"w": w}, map[string]string{"format": "pt"}); err != nil {
		panic(err)
	}
	ts, meta, err := checkpoint.LoadSafetensors(path)
	if err != nil {
		panic(err)
	}
	fmt.Println(ts["w"].Shape(), ts["w"].F32(), meta["format"])
	// Output:
	// [2 3] [1 2 3 4 5 6] pt
}
