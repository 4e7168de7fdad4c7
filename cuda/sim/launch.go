package sim

/*
#cgo CXXFLAGS: -std=c++14 -O2
#include <stdlib.h>
#include "launch.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"
)

//go:generate go run gen_kernels.go

type argKind uint8

const (
	argPtr argKind = iota
	argI64
	argF32
)

type kernelInfo struct {
	name    string
	args    []argKind
	barrier bool // uses __syncthreads: runs its threads as fibers
}

// ErrLaunch is a launch the device rejects (unknown kernel, wrong
// arguments or dimensions), as cuLaunchKernel would.
var ErrLaunch = errors.New("sim: invalid launch")

// Kernels lists the kernels the device runs: those of goddp/cuda/kernels.
func Kernels() []string {
	out := make([]string, len(kernelTable))
	for i, k := range kernelTable {
		out[i] = k.name
	}
	return out
}

// Launch arguments, 8 bytes each as cuLaunchKernel receives them from
// goddp/cuda: device pointers, 64-bit counts and float32 bits.
func Ptr(b *Buffer) uint64                { return b.Ptr() }
func PtrAt(b *Buffer, byteOff int) uint64 { return b.Ptr() + uint64(byteOff) }
func I64(v int) uint64                    { return uint64(int64(v)) }
func F32(v float32) uint64                { return uint64(math.Float32bits(v)) }

// Launch enqueues kernel on s over grid blocks of block threads (both
// x only, block at most 1024 as on CUDA). Blocks run concurrently on up to
// GOMAXPROCS host threads; each block's threads run on one. A launch the
// device rejects is reported now and also makes the stream's error sticky.
func (s *Stream) Launch(kernel string, grid, block int, args ...uint64) error {
	k := -1
	for i := range kernelTable {
		if kernelTable[i].name == kernel {
			k = i
			break
		}
	}
	var err error
	switch {
	case k < 0:
		err = fmt.Errorf("%w: no kernel %q", ErrLaunch, kernel)
	case len(args) != len(kernelTable[k].args):
		err = fmt.Errorf("%w: %s takes %d arguments, got %d", ErrLaunch, kernel, len(kernelTable[k].args), len(args))
	case grid < 1 || grid > math.MaxInt32 || block < 1 || block > 1024:
		err = fmt.Errorf("%w: %s with grid %d and block %d (grid 1..2^31-1, block 1..1024)", ErrLaunch, kernel, grid, block)
	}
	if err != nil {
		s.Enqueue("launch "+kernel, func() error { return err })
		return err
	}
	a := append([]uint64(nil), args...)
	s.Enqueue("launch "+kernel, func() error { return runKernel(k, grid, block, a) })
	return nil
}

func runKernel(k, grid, block int, args []uint64) error {
	// The arguments live in C memory for the duration of the launch: the
	// C side holds them across calls from several goroutines.
	ca := (*C.uint64_t)(C.malloc(C.size_t(8 * len(args))))
	if ca == nil {
		return fmt.Errorf("out of host memory for %d arguments", len(args))
	}
	defer C.free(unsafe.Pointer(ca))
	copy(unsafe.Slice((*uint64)(unsafe.Pointer(ca)), len(args)), args)
	workers := min(runtime.GOMAXPROCS(0), grid)
	var wg sync.WaitGroup
	errs := make([]C.int, workers)
	for w := range workers {
		lo, hi := grid*w/workers, grid*(w+1)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = C.sim_launch(C.int(k), C.uint32_t(lo), C.uint32_t(hi), C.uint32_t(grid), C.uint32_t(block), ca)
		}()
	}
	wg.Wait()
	for _, e := range errs {
		if e != 0 {
			return fmt.Errorf("%s: no host memory for %d fiber stacks", kernelTable[k].name, block)
		}
	}
	return nil
}

// GlobalIndex returns kernels.cu's global_index() and global_stride()
// for thread t of block b of a grid of grid blocks of block threads, as the
// compiled kernels compute them (the 64-bit index math, testable at grid
// sizes no test could allocate).
func GlobalIndex(b, grid, block, t uint32) (index, stride int64) {
	var i, s C.int64_t
	C.sim_index(C.uint32_t(b), C.uint32_t(grid), C.uint32_t(block), C.uint32_t(t), &i, &s)
	return int64(i), int64(s)
}
