package tcp

import (
	"fmt"
	"os"
	"time"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/internal/envcfg"
)

// Config tunes the tcp backend. The zero value picks every default; New
// reads it from the environment (ConfigFromEnv), NewWithConfig takes it
// from the caller. Sizes in the environment accept K, M and G suffixes
// ("64K", "4M").
type Config struct {
	// SmallBytes: collectives up to this size take the latency-bound
	// paths (recursive doubling, binomial trees). GODDP_TCP_SMALL_BYTES,
	// default 64 KiB.
	SmallBytes int
	// ExchangeBytes: two ranks all-reduce up to this size in one pipelined
	// exchange (it needs a scratch buffer as large as the message), above
	// it over the ring. GODDP_TCP_EXCHANGE_BYTES, default 64 MiB.
	ExchangeBytes int
	// PieceBytes is the largest piece of a pipelined collective.
	// GODDP_TCP_PIECE_BYTES, default 1 MiB.
	PieceBytes int
	// WriteBatch is how many bytes a writev sends beyond its first frame.
	// GODDP_TCP_WRITE_BATCH, default 256 KiB.
	WriteBatch int
	// SocketBuffer is the send and receive buffer of every peer
	// connection. GODDP_TCP_BUFFER, default 4 MiB.
	SocketBuffer int
	// Congestion is the congestion control of peer connections: "auto"
	// (default: reno for peers on this host, whose connections bbr would
	// pace), "system" (leave every connection alone) or an algorithm name
	// for all. GODDP_TCP_CONGESTION.
	Congestion string
	// Spin is how long a small collective polls for its reply before
	// sleeping: zero picks 200 µs when the host has a core per local rank
	// and none otherwise; negative disables it. GODDP_TCP_SPIN_US (whole
	// microseconds; 0 disables).
	Spin time.Duration
}

// The defaults, in one place.
const (
	DefaultSmallBytes    = 64 << 10
	DefaultExchangeBytes = 64 << 20
	DefaultPieceBytes    = 1 << 20
	DefaultWriteBatch    = 256 << 10
	DefaultSocketBuffer  = 4 << 20
	defaultSpin          = 200 * time.Microsecond
)

// ConfigFromEnv reads the GODDP_TCP_* variables; one that does not parse is
// an error wrapping backend.ErrBadArgument that names it.
func ConfigFromEnv() (Config, error) { return configFrom(os.LookupEnv) }

func configFrom(lookup envcfg.Lookup) (Config, error) {
	var c Config
	r := envcfg.Reader{Lookup: lookup}
	r.Bytes("GODDP_TCP_SMALL_BYTES", &c.SmallBytes)
	r.Bytes("GODDP_TCP_EXCHANGE_BYTES", &c.ExchangeBytes)
	r.Bytes("GODDP_TCP_PIECE_BYTES", &c.PieceBytes)
	r.Bytes("GODDP_TCP_WRITE_BATCH", &c.WriteBatch)
	r.Bytes("GODDP_TCP_BUFFER", &c.SocketBuffer)
	r.String("GODDP_TCP_CONGESTION", &c.Congestion)
	r.Micros("GODDP_TCP_SPIN_US", &c.Spin)
	if r.Err != nil {
		return c, fmt.Errorf("tcp: %w", r.Err)
	}
	return c, c.Validate()
}

// Validate reports the first field out of range, naming it and its
// environment variable.
func (c Config) Validate() error {
	for _, f := range []struct {
		name, env string
		v, lo     int
	}{
		{"SmallBytes", "GODDP_TCP_SMALL_BYTES", c.SmallBytes, 0},
		{"ExchangeBytes", "GODDP_TCP_EXCHANGE_BYTES", c.ExchangeBytes, 0},
		{"PieceBytes", "GODDP_TCP_PIECE_BYTES", c.PieceBytes, 64},
		{"WriteBatch", "GODDP_TCP_WRITE_BATCH", c.WriteBatch, 0},
		{"SocketBuffer", "GODDP_TCP_BUFFER", c.SocketBuffer, 4096},
	} {
		if f.v < 0 || (f.v != 0 && f.v < f.lo) || f.v > 1<<30 {
			return fmt.Errorf("%w: tcp: %s (%s) = %d: want 0 (the default) or %d bytes to 1 GiB",
				backend.ErrBadArgument, f.name, f.env, f.v, max(f.lo, 1))
		}
	}
	for _, r := range c.Congestion {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return fmt.Errorf("%w: tcp: Congestion (GODDP_TCP_CONGESTION) = %q: want auto, system or an algorithm name",
				backend.ErrBadArgument, c.Congestion)
		}
	}
	return nil
}

// resolve fills in the defaults: the one place they are applied.
func (c Config) resolve(opts backend.Options) Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.SmallBytes, DefaultSmallBytes)
	def(&c.ExchangeBytes, DefaultExchangeBytes)
	def(&c.PieceBytes, DefaultPieceBytes)
	def(&c.WriteBatch, DefaultWriteBatch)
	def(&c.SocketBuffer, DefaultSocketBuffer)
	if c.Congestion == "" {
		c.Congestion = "auto"
	}
	switch {
	case c.Spin < 0:
		c.Spin = 0
	case c.Spin == 0:
		// Like MPI's busy polling but bounded, when every local rank can
		// have a core of its own; none when ranks outnumber the cores,
		// where a spinning rank would take the CPU from the peer it
		// waits for.
		local := opts.LocalSize
		if local <= 0 {
			local = opts.Size
		}
		if local <= hostCPUs() {
			c.Spin = defaultSpin
		}
	}
	return c
}
