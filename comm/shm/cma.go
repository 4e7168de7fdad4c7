package shm

import (
	"errors"
	"fmt"
	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/internal/reduce"
	"runtime"
	"syscall"
	"unsafe"
)

// Single-copy transfers (cross-memory attach, as OpenMPI's vader uses for
// large messages): process_vm_readv copies straight from a peer's user
// buffer into ours, so a large all-reduce needs neither the copy into the
// slots nor the write-back of the result, and, more important on a busy
// host, a rank only needs its peers to have entered the collective to do
// its whole share of the work: it no longer advances in lock-step with them
// chunk by chunk, so a peer that the kernel deschedules for a few
// milliseconds stalls it once per op instead of once per chunk.
//
// The kernel allows it between processes of one user unless a hardened
// setup forbids ptrace access (Yama ptrace_scope >= 2, non-dumpable
// processes, seccomp, gVisor). Set-up probes it between every pair of ranks
// and the group uses it only if every probe succeeded; otherwise it keeps
// copying through the slots.

// shmCMAPiece is how much of a peer's slice one process_vm_readv fetches
// before it is reduced: large enough to amortise the syscall and the page
// pinning, small enough to stay in L2/L3.
const shmCMAPiece = 1 << 20

// shmIovec mirrors struct iovec with the base as an address, since the
// remote one is not a pointer in this process.
type shmIovec struct {
	base uintptr
	len  uint64
}

// shmReadRemote copies len(local) bytes at address remote of process pid
// into local.
func shmReadRemote(pid int, local []byte, remote uintptr) error {
	if shmSysProcessVMReadv == 0 {
		return syscall.ENOSYS
	}
	for len(local) > 0 {
		liov := shmIovec{uintptr(unsafe.Pointer(&local[0])), uint64(len(local))}
		riov := shmIovec{remote, uint64(len(local))}
		n, _, e := syscall.Syscall6(shmSysProcessVMReadv, uintptr(pid),
			uintptr(unsafe.Pointer(&liov)), 1, uintptr(unsafe.Pointer(&riov)), 1, 0)
		runtime.KeepAlive(local)
		if e != 0 {
			if e == syscall.EINTR {
				continue
			}
			return e
		}
		if n == 0 {
			return syscall.EFAULT
		}
		local = local[n:]
		remote += n
	}
	return nil
}

// shmAddrOf is the address of b's first byte, for a peer to read.
func shmAddrOf(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(&b[0])))
}

// shmProbeValue is what every rank's probe buffer holds.
const shmProbeValue = 0x676f6464705f636d // "goddp_cm"

// probeCMA reads every peer's probe buffer and reports whether all reads
// returned the expected value.
func (g *shmGroup) probeCMA() error {
	if shmSysProcessVMReadv == 0 {
		return errors.New("process_vm_readv unknown on " + runtime.GOARCH)
	}
	var got [8]byte
	for k := 0; k < g.size; k++ {
		if k == g.rank {
			continue
		}
		if !g.pidUsable[k] {
			return fmt.Errorf("rank %d is in another pid namespace", k)
		}
		addr := g.seg.ctl(k, shmCtlProbe).Load()
		if err := shmReadRemote(g.pids[k], got[:], uintptr(addr)); err != nil {
			return fmt.Errorf("read rank %d: %w", k, err)
		}
		if *(*uint64)(unsafe.Pointer(&got[0])) != shmProbeValue {
			return fmt.Errorf("read rank %d: wrong value", k)
		}
	}
	return nil
}

// remoteErr wraps a failed remote read as the op's error.
func (g *shmGroup) remoteErr(op *shmOp, k int, err error) error {
	// A peer that aborted (and then exited) is reported with its reason and
	// the rank it blames, not as the culprit.
	if perr := g.peerStatusErr(op, k); perr != nil {
		return perr
	}
	if errors.Is(err, syscall.ESRCH) {
		return g.opError(op, backend.ErrPeerFailed, []int{k}, fmt.Sprintf("rank %d (pid %d) died", k, g.pids[k]), nil)
	}
	return g.opError(op, backend.ErrPeerFailed, []int{k}, fmt.Sprintf("reading rank %d's buffer", k), err)
}

// allReduceDirect is the large all-reduce over CMA, in one step s:
//
//	publish our buffer's address, post           (posted = s)
//	reduce slice r, reading the peers' slice r from their buffers in
//	cache-sized pieces, in rank order                (reduced = s)
//	read every other slice k from rank k's buffer    (consumed = s)
//	wait until every peer has consumed: only then may our buffer change
func (g *shmGroup) allReduceDirect(op *shmOp, buf backend.Buffer) error {
	r, n := g.rank, g.size
	es := buf.DType.Size()
	s := g.next()
	g.seg.ctl(r, shmCtlAddr).Store(shmAddrOf(buf.Bytes))
	g.post(shmCtlPosted, s)
	if err := g.awaitAll(op, shmCtlPosted, s); err != nil {
		return err
	}
	addrs := make([]uintptr, n)
	for k := range addrs {
		addrs[k] = uintptr(g.seg.ctl(k, shmCtlAddr).Load())
	}
	lo, hi := shmSliceBounds(buf.Len(), es, n, r)
	piece := shmCMAPiece / es * es
	tmp := g.scratch[:piece]
	own := g.scratch2[:piece]
	for a := lo; a < hi; a += piece {
		b := min(a+piece, hi)
		dst := backend.Buffer{DType: buf.DType, Bytes: buf.Bytes[a:b]}
		read := func(k int, into []byte) error {
			if err := shmReadRemote(g.pids[k], into, addrs[k]+uintptr(a)); err != nil {
				return g.remoteErr(op, k, err)
			}
			return nil
		}
		first := 2
		if r <= 1 {
			if err := read(1-r, tmp[:b-a]); err != nil {
				return err
			}
			g.combine(dst, backend.Buffer{DType: buf.DType, Bytes: tmp[:b-a]}, op.rop)
		} else {
			// Combine in rank order: start from x0, our own value comes back at k = r.
			copy(own, dst.Bytes)
			if err := read(0, dst.Bytes); err != nil {
				return err
			}
			first = 1
		}
		for k := first; k < n; k++ {
			src := tmp[:b-a]
			if k == r {
				src = own[:b-a]
			} else if err := read(k, src); err != nil {
				return err
			}
			g.combine(dst, backend.Buffer{DType: buf.DType, Bytes: src}, op.rop)
		}
		if op.rop == backend.Avg {
			reduce.Divide(dst, n)
		}
	}
	g.post(shmCtlReduced, s)
	if err := g.eachReduced(op, s, buf.Len(), es, func(k, lo, hi int) error {
		if hi > lo {
			if err := shmReadRemote(g.pids[k], buf.Bytes[lo:hi], addrs[k]+uintptr(lo)); err != nil {
				return g.remoteErr(op, k, err)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	g.post(shmCtlConsumed, s)
	// Our buffer must not change (the caller may reuse it as soon as Wait
	// returns) while a peer may still be reading it.
	for k := 0; k < n; k++ {
		if k != r {
			if err := g.await(op, k, shmCtlConsumed, s); err != nil {
				return err
			}
		}
	}
	return nil
}
