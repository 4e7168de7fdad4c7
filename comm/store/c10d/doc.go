// Package c10d is a client of torch's c10d TCPStore: the key-value store a
// torchrun agent hosts for its workers (TORCHELASTIC_USE_AGENT_STORE=True)
// at MASTER_ADDR:MASTER_PORT. It implements backend.Store, so goddp's
// rendezvous runs on top of it as on goddp's own store; comm uses it, under
// the prefix torch's workers use (AgentPrefix), when torchrun hosts the
// store.
//
// # Wire format
//
// torch's TCPStore has no framing and no request ids. A request is an op
// byte and its arguments; strings and byte vectors are a u64 length and the
// bytes; integers are in the host's byte order (little-endian on every
// platform torch ships). A connection carries one request at a time and the
// server answers in order, so this client keeps a small pool of
// connections: each call takes one for itself, a blocking get or wait
// holds its own, and a connection whose call ended any other way than by a
// complete answer (timeout, cancelled ctx, lost peer) is closed, never
// reused, since the server may still answer on it later. torch's own client
// also puts "/" before every key; this one does the same, so the keys it
// writes are the keys a torch worker's store writes.
//
// # Dialects
//
// Two generations of the protocol are in use, and they number their ops
// differently:
//
//   - legacy (torch 1.x and the 2.x releases before the validation
//     handshake): SET 0, COMPARE_SET 1, GET 2, ADD 3, CHECK 4, WAIT 5,
//     GETNUMKEYS 6, WATCH_KEY 7, DELETE_KEY 8, and no handshake;
//   - validated (later 2.x, both the classic server and the libuv one that
//     is the default from 2.4): VALIDATE 0 with the magic number 0x3C85F7CE
//     must be a connection's first request, then SET 1, COMPARE_SET 2,
//     GET 3, ADD 4, CHECK 5, WAIT 6, GETNUMKEYS 7, DELETE_KEY 8, ...,
//     PING 13 (an echoed u32 nonce). The libuv server bounds keys to
//     8 KiB and values to 8 MiB. A first request other than VALIDATE makes
//     the classic server close the connection and the libuv one ignore it
//     for good.
//
// The first connection tells them apart with one probe that is harmless to
// both: VALIDATE, GETNUMKEYS, PING. A validated server answers the key count
// and echoes the nonce (or closes after the count when it predates PING).
// A legacy server reads the same bytes as a SET whose key length has its
// top bit set; allocating that throws, and the server closes the
// connection without storing anything or disturbing its other clients.
// The client then asks a fresh connection for the key count in the legacy
// numbering, and gives up, naming the address, on anything else: a close,
// bytes that are not an answer, or silence past a 10 s deadline. Both
// probes are padded with more key counts past the 41 bytes goddp's own
// store reads before refusing a stranger, so that a goddp store on
// MASTER_PORT, too, fails Dial at once with an error that says so, not a
// rendezvous minutes later.
//
// # Semantics
//
// Get waits for the key, then reads it (torch's client does the same).
// torch's servers, but for the libuv one, wake no waiter when compare_set
// creates a key, so a wait also checks its keys every quarter second.
// Set is followed, on the same connection, by a CHECK of the key, so it
// returns only once the server has applied it: without it a later call on
// another pooled connection could overtake it. CompareSet maps torch's
// answer for a missing key with a non-empty expected value (it returns
// expected) to nil, goddp's "nothing stored"; with expected equal to
// desired the two cannot be told apart, and nil is returned. NumKeys counts
// every key of the store, the agent's included, as torch's does.
package c10d
