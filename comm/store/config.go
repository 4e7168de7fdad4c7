package store

import (
	"fmt"
	"os"
	"time"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/internal/auth"
	"github.com/goddp/goddp/comm/internal/envcfg"
)

// Config bounds what the store server spends on its clients, so that
// whoever can reach its port cannot exhaust the hosting rank: connections
// still in the token handshake, stored bytes, the blocking requests waiting
// for keys, and how long a connection may sit half way through something. The zero value picks every default;
// Listen reads it from the environment (ConfigFromEnv) unless WithConfig
// gives one. Sizes in the environment accept K, M and G suffixes, and
// durations are Go durations ("0s" turns a timeout off).
type Config struct {
	// MaxHandshakes is how many accepted connections may be in the token
	// handshake at once. One more evicts the oldest, so a flood of silent
	// connections costs the server a bounded number of sockets, and a real
	// client, whose handshake takes a round trip, is only pushed out by a
	// flood faster than MaxHandshakes per round trip (it then retries).
	// GODDP_STORE_MAX_HANDSHAKES, default 64.
	MaxHandshakes int
	// HandshakeTimeout is how long a connection has to complete the
	// handshake. GODDP_STORE_HANDSHAKE_TIMEOUT, default 10s.
	HandshakeTimeout time.Duration
	// RequestTimeout is how long a request may take to arrive once its
	// first byte has: a client that stops in the middle of one is dropped.
	// GODDP_STORE_REQUEST_TIMEOUT, default 1m.
	RequestTimeout time.Duration
	// IdleTimeout drops an authenticated client that sends nothing and has
	// no blocking get or wait pending for this long. Off by default: ranks
	// keep their store connection open and idle through a whole training
	// run (and TCP keepalive finds dead hosts). GODDP_STORE_IDLE_TIMEOUT.
	IdleTimeout time.Duration
	// MaxClientBytes caps the keys and values one client connection holds
	// in the store (a key counts its length, its value's and 64 bytes of
	// bookkeeping); a set past it fails with an error naming the limit.
	// GODDP_STORE_MAX_CLIENT_BYTES, default 256 MiB.
	MaxClientBytes int
	// MaxBytes caps what all remote clients together hold, so that many
	// connections cannot add up past it; the hosting process's own writes
	// count towards it but are never refused. GODDP_STORE_MAX_BYTES,
	// default 1 GiB.
	MaxBytes int
	// MaxPendingBytes caps what the blocking gets and waits of all remote
	// clients hold while they wait: each counts its keys and 4 KiB for the
	// goroutine, timer and channels that serve it (and counts, the same way,
	// against its client's MaxClientBytes). One more is refused at once
	// with an error naming the limit. Rendezvous keys are short, so the
	// default allows some 16,000 waiting requests, while keys of 64 KiB,
	// the protocol's most, cannot pin more than the limit.
	// GODDP_STORE_MAX_PENDING_BYTES, default 64 MiB.
	MaxPendingBytes int
}

// The defaults, in one place.
const (
	DefaultMaxHandshakes    = 64
	DefaultHandshakeTimeout = auth.Timeout
	DefaultRequestTimeout   = time.Minute
	DefaultMaxClientBytes   = 256 << 20
	DefaultMaxBytes         = 1 << 30
	DefaultMaxPendingBytes  = 64 << 20
)

// entryOverhead is what a key costs beyond its bytes.
const entryOverhead = 64

// pendingOverhead is what a blocking get or wait costs while it waits,
// beyond its keys: a parked goroutine's stack, its timer and channels.
const pendingOverhead = 4 << 10

// ConfigFromEnv reads the GODDP_STORE_* limits; one that does not parse is
// an error wrapping backend.ErrBadArgument that names it.
func ConfigFromEnv() (Config, error) { return configFrom(os.LookupEnv) }

func configFrom(lookup envcfg.Lookup) (Config, error) {
	var c Config
	r := envcfg.Reader{Lookup: lookup}
	r.Int("GODDP_STORE_MAX_HANDSHAKES", &c.MaxHandshakes)
	r.Duration("GODDP_STORE_HANDSHAKE_TIMEOUT", &c.HandshakeTimeout)
	r.Duration("GODDP_STORE_REQUEST_TIMEOUT", &c.RequestTimeout)
	r.Duration("GODDP_STORE_IDLE_TIMEOUT", &c.IdleTimeout)
	r.Bytes("GODDP_STORE_MAX_CLIENT_BYTES", &c.MaxClientBytes)
	r.Bytes("GODDP_STORE_MAX_BYTES", &c.MaxBytes)
	r.Bytes("GODDP_STORE_MAX_PENDING_BYTES", &c.MaxPendingBytes)
	if r.Err != nil {
		return c, fmt.Errorf("store: %w", r.Err)
	}
	return c, c.Validate()
}

// Validate reports the first field out of range, naming it and its
// environment variable. A negative duration means off, except for the
// handshake, which must always end.
func (c Config) Validate() error {
	maxBytes := c.MaxBytes
	if maxBytes == 0 {
		maxBytes = DefaultMaxBytes
	}
	bad := func(name, env string, v any, want string) error {
		return fmt.Errorf("%w: store: %s (%s) = %v: want %s", backend.ErrBadArgument, name, env, v, want)
	}
	switch {
	case c.MaxHandshakes < 0:
		return bad("MaxHandshakes", "GODDP_STORE_MAX_HANDSHAKES", c.MaxHandshakes, "0 (the default) or a positive count")
	case c.HandshakeTimeout < 0:
		return bad("HandshakeTimeout", "GODDP_STORE_HANDSHAKE_TIMEOUT", c.HandshakeTimeout, "0 (the default) or a positive duration; a handshake must end")
	case c.MaxClientBytes < 0:
		return bad("MaxClientBytes", "GODDP_STORE_MAX_CLIENT_BYTES", c.MaxClientBytes, "0 (the default) or a positive size")
	case c.MaxBytes < 0:
		return bad("MaxBytes", "GODDP_STORE_MAX_BYTES", c.MaxBytes, "0 (the default) or a positive size")
	case c.MaxPendingBytes < 0:
		return bad("MaxPendingBytes", "GODDP_STORE_MAX_PENDING_BYTES", c.MaxPendingBytes, "0 (the default) or a positive size")
	case c.MaxClientBytes > maxBytes:
		return bad("MaxClientBytes", "GODDP_STORE_MAX_CLIENT_BYTES", c.MaxClientBytes, fmt.Sprintf("at most MaxBytes (%d)", maxBytes))
	}
	return nil
}

// resolve fills in the defaults: the one place they are applied. Off
// (negative) durations become 0, "no deadline".
func (c Config) resolve() Config {
	if c.MaxHandshakes == 0 {
		c.MaxHandshakes = DefaultMaxHandshakes
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	switch {
	case c.RequestTimeout == 0:
		c.RequestTimeout = DefaultRequestTimeout
	case c.RequestTimeout < 0:
		c.RequestTimeout = 0
	}
	c.IdleTimeout = max(c.IdleTimeout, 0)
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.MaxClientBytes == 0 {
		c.MaxClientBytes = min(DefaultMaxClientBytes, c.MaxBytes)
	}
	if c.MaxPendingBytes == 0 {
		c.MaxPendingBytes = DefaultMaxPendingBytes
	}
	return c
}
