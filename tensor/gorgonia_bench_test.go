package tensor

import (
	"testing"

	gt "gorgonia.org/tensor"
)

// BenchmarkGorgoniaVsLoop records why elementwise work runs over plain slices:
// gorgonia's engine against a plain loop for the same float32 add, at the
// MLP's activation size (64x512), same-shape and row-broadcast (bias add).
func BenchmarkGorgoniaVsLoop(b *testing.B) {
	const m, n = 64, 512
	x := make([]float32, m*n)
	y := make([]float32, m*n)
	bias := make([]float32, n)
	for i := range x {
		x[i], y[i] = float32(i), float32(2*i)
	}
	dx := gt.New(gt.WithShape(m, n), gt.WithBacking(x))
	dy := gt.New(gt.WithShape(m, n), gt.WithBacking(y))
	dout := gt.New(gt.WithShape(m, n), gt.Of(gt.Float32))
	dbias := gt.New(gt.WithShape(1, n), gt.WithBacking(bias))
	out := make([]float32, m*n)

	b.Run("same/gorgonia-alloc", func(b *testing.B) {
		for b.Loop() {
			if _, err := gt.Add(dx, dy); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("same/gorgonia-reuse", func(b *testing.B) {
		for b.Loop() {
			if _, err := gt.Add(dx, dy, gt.WithReuse(dout)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("same/loop", func(b *testing.B) {
		for b.Loop() {
			addLoop(out, x, y)
		}
	})
	b.Run("same/tensor.binaryInto-reuse", func(b *testing.B) {
		tx, ty, to := FromF32(x, m, n), FromF32(y, m, n), FromF32(out, m, n)
		for b.Loop() {
			binaryInto(opAdd, to, tx, ty)
		}
	})
	b.Run("same/tensor.Add", func(b *testing.B) {
		tx, ty := FromF32(x, m, n), FromF32(y, m, n)
		for b.Loop() {
			Add(tx, ty)
		}
	})
	b.Run("rowbcast/gorgonia-repeat", func(b *testing.B) {
		// gorgonia has no implicit broadcasting: the bias must be repeated first.
		for b.Loop() {
			rep, err := gt.Repeat(dbias, 0, m)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := gt.Add(dx, rep, gt.WithReuse(dout)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("rowbcast/loop", func(b *testing.B) {
		for b.Loop() {
			for r := 0; r < m; r++ {
				addLoop(out[r*n:(r+1)*n], x[r*n:(r+1)*n], bias)
			}
		}
	})
	b.Run("rowbcast/tensor.Add", func(b *testing.B) {
		tx, tb := FromF32(x, m, n), FromF32(bias, n)
		for b.Loop() {
			Add(tx, tb)
		}
	})
	b.Run("new/gt.New", func(b *testing.B) {
		for b.Loop() {
			_ = gt.New(gt.WithShape(m*n), gt.WithBacking(out))
		}
	})
}

// addLoop is the plain loop; a function of its own so the compiler sees
// local slice headers (a loop inside the benchmark closure reloads them).
func addLoop(out, x, y []float32) {
	x, y = x[:len(out)], y[:len(out)]
	for i := range out {
		out[i] = x[i] + y[i]
	}
}
