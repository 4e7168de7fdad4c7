// Package backend is the contract between goddp's comm package, its users
// and its backends, as database/sql/driver is for database/sql: the
// ProcessGroup interface and its optional capabilities, Buffer, DType,
// ReduceOp, Work and Future, the sentinel errors and OpError, the Store
// interface, the Options a backend is created with, and the registry that
// backends join by name.
//
// Users never need to import it: package comm re-exports every name here
// with type aliases (comm.ProcessGroup is backend.ProcessGroup). Backends
// (goddp/comm/tcp, shm, mpi, nccl) import it, never comm and never each
// other; comm imports the backends, so comm.Init finds them all without a
// blank import.
package backend
