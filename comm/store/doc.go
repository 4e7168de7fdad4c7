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
//
// # Limits
//
// Whoever reaches the server's port can connect, so the server bounds what
// a client costs it (Config; Listen reads the environment unless
// WithConfig is given):
//
//	GODDP_STORE_MAX_HANDSHAKES     64    connections in the handshake at once; one more evicts the oldest
//	GODDP_STORE_HANDSHAKE_TIMEOUT  10s   time to complete the handshake
//	GODDP_STORE_REQUEST_TIMEOUT    1m    time for a request to arrive once begun, and for a reply to leave
//	GODDP_STORE_IDLE_TIMEOUT       off   drop a client silent this long with nothing pending
//	GODDP_STORE_MAX_CLIENT_BYTES   256M  keys and values one client holds
//	GODDP_STORE_MAX_BYTES          1G    keys and values all remote clients hold
//	GODDP_STORE_MAX_PENDING_BYTES  64M   what all waiting gets and waits hold: keys plus 4 KiB each
//
// A waiting get or wait also counts against its client's
// GODDP_STORE_MAX_CLIENT_BYTES. A set, get or wait past a limit fails at
// once with an error naming the variable; the hosting process's own client
// is never refused. Listen refuses an address
// that is not loopback without a token unless WithInsecure.
package store
