// Package store is goddp's rendezvous key-value store (torch's c10d
// Store): a TCP server and client (Listen, Dial), a store shared through a
// file (NewFile) and a key-prefixing wrapper (NewPrefix). All implement
// backend.Store, which comm re-exports as comm.Store.
//
// Launchers (goddp/launch, cmd/ddprun) import this package alone, so they
// link no comm backend.
//
// # Wire format
//
// Every TCP connection starts with the job-token handshake of
// goddp/comm/internal/auth. After it both directions carry frames of a
// big-endian u32 payload length and the payload:
//
//	request  = op u8 | id u64 | fields...
//	response = status u8 | id u64 | fields...
//
// Every length is checked against what remains of the frame before
// anything is allocated (FuzzStoreDecode).
package store
