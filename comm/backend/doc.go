// Package backend is the contract between goddp's comm package, its users
// and its backends, as database/sql/driver is for database/sql: the
// ProcessGroup interface and its optional capabilities, Buffer, DType,
// ReduceOp, Work and Future, the sentinel errors and OpError, the Store
// interface, the Options a backend is created with, and the registry that
// backends join by name.
//
// Programs need not import it: package comm re-exports every name here
// with type aliases (comm.ProcessGroup is backend.ProcessGroup). Backends
// (goddp/comm/tcp, shm, mpi, nccl, hier) import it, never comm and never
// each other; comm imports the backends, so comm.Init finds them all
// without a blank import. Libraries that are handed a group (nn, ddp, amp,
// metrics, checkpoint, optim/zero, cuda/sim) import this package, not
// comm, so that they link none of the drivers: only a program that calls
// comm.Init does. The argument checks every backend makes (CheckBuffer,
// CheckReduceOp, CheckRoot) and the one Work implementation they share
// (Future) live here too.
package backend
