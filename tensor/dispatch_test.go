package tensor

import (
	"fmt"
	"strings"
	"testing"
)

// hostDevice is a device whose memory is host slices and whose kernels are
// plain loops: enough to see that ops dispatch on their operands' device.
type hostDevice struct {
	name string
	k    Kernels
}

type hostStorage struct {
	d *hostDevice
	x []float32
}

func (s *hostStorage) Device() Device { return s.d }

func (d *hostDevice) String() string { return d.name }
func (d *hostDevice) Alloc(n int) (Storage, error) {
	return &hostStorage{d: d, x: make([]float32, n)}, nil
}
func (d *hostDevice) Upload(dst Storage, off int, src []float32) error {
	copy(dst.(*hostStorage).x[off:], src)
	return nil
}
func (d *hostDevice) Download(dst []float32, src Storage, off int) error {
	copy(dst, src.(*hostStorage).x[off:])
	return nil
}
func (d *hostDevice) Kernels() *Kernels  { return &d.k }
func (d *hostDevice) Synchronize() error { return nil }

func elems(t *Tensor) []float32 {
	s, off := t.Storage()
	return s.(*hostStorage).x[off : off+t.Numel()]
}

func newHostDevice(name string) *hostDevice {
	d := &hostDevice{name: name}
	d.k.Add = func(y, a, b *Tensor) {
		ys, as, bs := elems(y), elems(a), elems(b)
		for i := range ys {
			ys[i] = as[i] + bs[i]
		}
	}
	d.k.ReLU = func(y, x *Tensor) {
		ys, xs := elems(y), elems(x)
		for i, v := range xs {
			ys[i] = max(v, 0)
		}
	}
	return d
}

func panicOf(f func()) (msg string) {
	defer func() { msg = fmt.Sprint(recover()) }()
	f()
	return ""
}

func TestOpsDispatchOnDevice(t *testing.T) {
	dev := newHostDevice("fake:0")
	a := FromF32([]float32{1, -2, 3}, 3)
	b := FromF32([]float32{10, 20, -30}, 3)
	da, db := a.MustTo(dev), b.MustTo(dev)

	sum := Add(da, db)
	if sum.Device() != Device(dev) {
		t.Fatalf("Add of two fake:0 tensors is on %v", sum.Device())
	}
	if got, want := sum.MustTo(CPU()).F32(), Add(a, b).F32(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Add on fake:0 = %v, cpu = %v", got, want)
	}
	if got, want := ReLU(da).MustTo(CPU()).F32(), ReLU(a).F32(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ReLU on fake:0 = %v, cpu = %v", got, want)
	}
}

func TestMixedDevicesNameBoth(t *testing.T) {
	dev, other := newHostDevice("fake:0"), newHostDevice("fake:1")
	a := FromF32([]float32{1, 2}, 2)
	cases := []struct {
		name string
		op   func()
		want string
	}{
		{"cpu+dev", func() { Add(a, a.MustTo(dev)) }, "tensor: Add: operands on cpu and fake:0"},
		{"dev+cpu", func() { Add(a.MustTo(dev), a) }, "tensor: Add: operands on fake:0 and cpu"},
		{"dev+dev", func() { Add(a.MustTo(dev), a.MustTo(other)) }, "tensor: Add: operands on fake:0 and fake:1"},
		{"relu-bwd", func() { ReLUBackward(ZerosAs(a, 2), a.MustTo(dev), a) }, "tensor: ReLUBackward: operands on cpu and fake:0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := panicOf(c.op); !strings.Contains(got, c.want) {
				t.Errorf("panic %q, want it to contain %q", got, c.want)
			}
		})
	}
}

func TestMissingKernelNamesOpAndDevice(t *testing.T) {
	dev := newHostDevice("fake:0")
	x := FromF32([]float32{1, 2}, 2).MustTo(dev)
	if got := panicOf(func() { Mul(x, x) }); !strings.Contains(got, "Mul has no kernel on fake:0") {
		t.Errorf("Mul on a device without a Mul kernel panicked %q", got)
	}
}
