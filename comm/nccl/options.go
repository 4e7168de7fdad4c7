package nccl

import (
	"time"

	"github.com/goddp/goddp/comm/backend"
)

// DefaultLibrary is NCCL's soname, which Candidates looks for.
const DefaultLibrary = "libnccl.so.2"

// DefaultDriverLibrary is the CUDA driver library, installed with the NVIDIA driver.
const DefaultDriverLibrary = "libcuda.so.1"

// Options configure New. comm.Init fills them from its Config: Rank,
// WorldSize, the rendezvous store, LocalRank as the device, the timeout.
type Options struct {
	Rank, Size int
	// Store is the rendezvous store: rank 0 publishes NCCL's unique id there.
	Store backend.Store
	// Prefix namespaces the store key (backend.Options.Prefix).
	Prefix string
	// Device is the CUDA device ordinal this rank uses, usually its local rank.
	Device int
	// Timeout bounds setup and every op; 0 means backend.DefaultTimeout. An op
	// that times out aborts the communicator (ncclCommAbort), so the group
	// is unusable afterwards.
	Timeout time.Duration
	// LibraryPath is the NCCL library to load, and only it; "" searches
	// Candidates() ($GODDP_NCCL_LIBRARY, libnccl.so.2 through the system
	// loader, then in Python environments' nvidia/*/lib).
	LibraryPath string
	// Logf receives diagnostics (aborts, their causes); nil means stderr
	// on rank 0 and silence elsewhere, as comm's tcp and shm backends.
	Logf func(format string, args ...any)
}
