// Package commtest is for testing code that communicates, as
// net/http/httptest is for HTTP: an in-memory ProcessGroup whose ranks are
// goroutines of one process (NewGroups), an in-memory rendezvous Store
// (NewStore), and the conformance table of collectives (Cases, RunCases)
// that every goddp backend (tcp, shm, mpi, nccl) runs in its tests, and
// that a third-party backend can run too.
//
// It imports only goddp/comm/backend, so a backend's own tests can use it
// without an import cycle; comm.ProcessGroup and backend.ProcessGroup are
// the same type.
package commtest
