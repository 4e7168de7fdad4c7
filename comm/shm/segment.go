package shm

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/internal/procstat"
	"github.com/goddp/goddp/internal/shmfile"
)

// The shared segment is one file under /dev/shm, mapped MAP_SHARED by every
// rank. Its layout (all offsets fixed by the header, which rank 0 writes
// before it publishes the name):
//
//	[0, 4096)                      header: magic, version, world, slot size, slots per rank, nonce
//	[4096, 4096+world*1024)        one control block per rank, written only by that rank
//	[dataOff, ...)                 nbuf slots per rank, written only by that rank
//	[p2pCtlOff, ...)               per ordered pair (i, j): bytes i has written, bytes j has read
//	[p2pDataOff, ...)              per ordered pair (i, j): a byte ring for i's messages to j
//
// A control block keeps each hot counter on its own 128-byte pair of cache
// lines (the adjacent-line prefetcher pulls lines in pairs), so a rank that
// polls one counter is not disturbed by writes to another.

const (
	shmMagic   = 0x676f6464705f7368 // "goddp_sh"
	shmVersion = 2
	shmHdrSize = 4096
	shmCtrlLen = 1024

	// Header word offsets.
	shmHdrMagic   = 0
	shmHdrVersion = 8
	shmHdrWorld   = 16
	shmHdrSlot    = 24
	shmHdrNbuf    = 32
	shmHdrNonce   = 40
	shmHdrTotal   = 48
	shmHdrRing    = 56

	// Control block offsets. posted/reduced/consumed are step numbers (see
	// ops.go); status, pid, start time and pid namespace identify the
	// rank's process for the liveness check; desc describes the collective
	// the rank is running, so that mismatched calls are reported instead of
	// corrupting data; msg carries the reason of an abort to the peers.
	shmCtlPosted   = 0
	shmCtlReduced  = 128
	shmCtlConsumed = 256
	shmCtlStatus   = 384
	shmCtlPid      = 392
	shmCtlStart    = 400
	shmCtlPidNS    = 408
	shmCtlDescSeq  = 416
	shmCtlDescKind = 424
	shmCtlDescLen  = 432
	shmCtlBlame    = 440 // 1 + the rank an aborting rank blames, 0 if none
	shmCtlAddr     = 448 // user buffer address for a single-copy (CMA) op
	shmCtlProbe    = 456 // address of the rank's CMA probe word
	shmCtlDescOff  = 464 // descriptor: an all-reduce's offset in a shared buffer
	shmCtlMsgLen   = 512
	shmCtlMsg      = 520
	shmCtlMsgMax   = shmCtrlLen - shmCtlMsg

	// Rank status values.
	shmStatusEmpty   = 0
	shmStatusReady   = 1
	shmStatusClosed  = 2
	shmStatusAborted = 3
)

// shmDir is where segments live (shmfile.Dir: tmpfs, so pages never touch a disk).
const shmDir = shmfile.Dir

// shmSegment is one rank's mapping of the group's segment.
type shmSegment struct {
	path   string
	mem    []byte
	lockFd int // rank 0's: holds the creator's lock until unlink (internal/shmfile); -1 elsewhere
	shmLayout
}

// shmLayout is the geometry of a segment, derived from the parameters.
type shmLayout struct {
	world, slotBytes, nbuf, ringBytes int
	dataOff, p2pCtlOff, p2pDataOff    int
	total                             int
}

func newShmLayout(world, slotBytes, nbuf, ringBytes int) shmLayout {
	l := shmLayout{world: world, slotBytes: slotBytes, nbuf: nbuf, ringBytes: ringBytes}
	l.dataOff = shmAlign(shmHdrSize+world*shmCtrlLen, 4096)
	l.p2pCtlOff = l.dataOff + world*nbuf*slotBytes
	l.p2pDataOff = l.p2pCtlOff + shmAlign(world*world*shmP2PCtlLen, 4096)
	l.total = l.p2pDataOff + world*world*ringBytes
	return l
}

// Per-pair mailbox control: the sender's and the receiver's positions on
// separate line pairs.
const (
	shmP2PCtlLen   = 256
	shmP2PWritten  = 0
	shmP2PConsumed = 128
)

func shmAlign(n, a int) int { return (n + a - 1) / a * a }

// shmCreate creates, sizes and maps a new segment (rank 0). The segment
// holds the creator's lock (internal/shmfile) until unlink.
func shmCreate(name string, l shmLayout, nonce uint64) (*shmSegment, error) {
	path := shmDir + "/" + name
	fd, err := shmfile.Create(path, l.total)
	if err != nil {
		return nil, err
	}
	mem, err := syscall.Mmap(fd, 0, l.total, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		syscall.Unlink(path)
		syscall.Close(fd)
		return nil, fmt.Errorf("comm: shm: map %s: %w", path, err)
	}
	s := &shmSegment{path: path, mem: mem, lockFd: fd, shmLayout: l}
	s.word(shmHdrVersion).Store(shmVersion)
	s.word(shmHdrWorld).Store(uint64(l.world))
	s.word(shmHdrSlot).Store(uint64(l.slotBytes))
	s.word(shmHdrNbuf).Store(uint64(l.nbuf))
	s.word(shmHdrRing).Store(uint64(l.ringBytes))
	s.word(shmHdrNonce).Store(nonce)
	s.word(shmHdrTotal).Store(uint64(l.total))
	s.word(shmHdrMagic).Store(shmMagic) // last: marks the header complete
	return s, nil
}

// shmOpen maps an existing segment and checks that its header matches what
// rank 0 published (ranks > 0).
func shmOpen(name string, l shmLayout, nonce uint64) (*shmSegment, error) {
	path := shmDir + "/" + name
	fd, err := syscall.Open(path, syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("comm: shm: open %s (are all ranks on one host?): %w", path, err)
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("comm: shm: stat %s: %w", path, err)
	}
	if st.Size != int64(l.total) {
		return nil, fmt.Errorf("%w: shm: segment %s has %d bytes, want %d", backend.ErrBadArgument, path, st.Size, l.total)
	}
	mem, err := syscall.Mmap(fd, 0, l.total, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("comm: shm: map %s: %w", path, err)
	}
	s := &shmSegment{path: path, mem: mem, lockFd: -1, shmLayout: l}
	if s.word(shmHdrMagic).Load() != shmMagic || s.word(shmHdrVersion).Load() != shmVersion ||
		s.word(shmHdrWorld).Load() != uint64(l.world) || s.word(shmHdrSlot).Load() != uint64(l.slotBytes) ||
		s.word(shmHdrNbuf).Load() != uint64(l.nbuf) || s.word(shmHdrRing).Load() != uint64(l.ringBytes) ||
		s.word(shmHdrNonce).Load() != nonce {
		s.unmap()
		return nil, fmt.Errorf("%w: shm: segment %s header does not match the published one", backend.ErrBadArgument, path)
	}
	return s, nil
}

// unlink removes the name; the memory lives on until the last rank unmaps
// (or exits), so a crash after this point leaks nothing. Rank 0 then drops
// the creator's lock, which guarded only the name.
func (s *shmSegment) unlink() error {
	err := syscall.Unlink(s.path)
	s.unlock()
	if err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("comm: shm: unlink %s: %w", s.path, err)
	}
	return nil
}

func (s *shmSegment) unlock() {
	if s.lockFd >= 0 {
		syscall.Close(s.lockFd)
		s.lockFd = -1
	}
}

func (s *shmSegment) unmap() {
	s.unlock()
	if s.mem != nil {
		syscall.Munmap(s.mem)
		s.mem = nil
	}
}

// word returns the 8-byte-aligned word at off as an atomic.
func (s *shmSegment) word(off int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&s.mem[off]))
}

// ctl returns word off of rank k's control block.
func (s *shmSegment) ctl(k, off int) *atomic.Uint64 {
	return s.word(shmHdrSize + k*shmCtrlLen + off)
}

// slot returns rank k's slot for step (step mod nbuf).
func (s *shmSegment) slot(k int, step uint64) []byte {
	off := s.dataOff + (k*s.nbuf+int(step%uint64(s.nbuf)))*s.slotBytes
	return s.mem[off : off+s.slotBytes : off+s.slotBytes]
}

// p2pCtl returns word off of the mailbox control of messages from i to j.
func (s *shmSegment) p2pCtl(i, j, off int) *atomic.Uint64 {
	return s.word(s.p2pCtlOff + (i*s.world+j)*shmP2PCtlLen + off)
}

// ring returns the byte ring of messages from i to j.
func (s *shmSegment) ring(i, j int) []byte {
	off := s.p2pDataOff + (i*s.world+j)*s.ringBytes
	return s.mem[off : off+s.ringBytes : off+s.ringBytes]
}

// setMsg stores a short diagnostic for peers (an abort reason).
func (s *shmSegment) setMsg(k int, msg string) {
	if len(msg) > shmCtlMsgMax {
		msg = msg[:shmCtlMsgMax]
	}
	base := shmHdrSize + k*shmCtrlLen
	copy(s.mem[base+shmCtlMsg:base+shmCtlMsg+shmCtlMsgMax], msg)
	s.ctl(k, shmCtlMsgLen).Store(uint64(len(msg)))
}

func (s *shmSegment) msg(k int) string {
	n := int(s.ctl(k, shmCtlMsgLen).Load())
	if n <= 0 || n > shmCtlMsgMax {
		return ""
	}
	base := shmHdrSize + k*shmCtrlLen + shmCtlMsg
	return string(s.mem[base : base+n])
}

// shmProcIdentity returns this process's pid, its start time in clock ticks
// since boot (which tells a recycled pid from the original) and the inode
// of its pid namespace (pids are comparable only inside one namespace).
func shmProcIdentity() (pid int, start, ns uint64) {
	pid = os.Getpid()
	start = procstat.Start(pid)
	var st syscall.Stat_t
	if syscall.Stat("/proc/self/ns/pid", &st) == nil {
		ns = st.Ino
	}
	return pid, start, ns
}
