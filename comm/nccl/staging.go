//go:build cgo

package nccl

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"math/bits"
	"sync"
	"unsafe"
)

// staging is one pair of equally sized buffers: device scratch and pinned
// host memory, used to run a host Buffer's collective on the GPU.
type staging struct {
	dev  C.gdn_devptr
	host unsafe.Pointer
	cap  int
}

// hostBytes views the pinned host half as a Go slice (C memory).
func (s *staging) hostBytes() []byte { return unsafe.Slice((*byte)(s.host), s.cap) }

// stagingPool keeps freed stagings by power-of-two size class, so that a
// training loop's repeated bucket sizes allocate once.
type stagingPool struct {
	lib     *library
	ctx     unsafe.Pointer
	mu      sync.Mutex
	byClass map[int][]*staging
}

func sizeClass(n int) int {
	if n <= 4096 {
		return 4096
	}
	return 1 << bits.Len(uint(n-1))
}

func (p *stagingPool) get(n int) (*staging, error) {
	c := sizeClass(n)
	p.mu.Lock()
	if l := p.byClass[c]; len(l) > 0 {
		s := l[len(l)-1]
		p.byClass[c] = l[:len(l)-1]
		p.mu.Unlock()
		return s, nil
	}
	p.mu.Unlock()
	s := &staging{cap: c}
	if rc := C.gdn_alloc(p.lib.l, p.ctx, C.size_t(c), &s.dev, &s.host); rc != 0 {
		return nil, p.lib.cuErr("allocating staging memory", rc)
	}
	return s, nil
}

func (p *stagingPool) put(s *staging) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byClass == nil {
		p.byClass = map[int][]*staging{}
	}
	p.byClass[s.cap] = append(p.byClass[s.cap], s)
}

// free releases every pooled staging (those of ops still in flight are
// not in the pool).
func (p *stagingPool) free() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for c, l := range p.byClass {
		for _, s := range l {
			if rc := C.gdn_free(p.lib.l, p.ctx, s.dev, s.host); rc != 0 {
				errs = append(errs, p.lib.cuErr("freeing staging memory", rc))
			}
		}
		delete(p.byClass, c)
	}
	return errors.Join(errs...)
}

// offsetPtr is the pinned host address off bytes into s.
func offsetPtr(s *staging, off int) unsafe.Pointer { return unsafe.Add(s.host, off) }
