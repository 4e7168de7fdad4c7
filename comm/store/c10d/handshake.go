package c10d

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/goddp/goddp/comm/backend"
)

// ErrProtocol is what Dial returns, wrapped with the address and what the
// server did, when the server at the address is not a torch TCPStore.
var ErrProtocol = errors.New("comm: c10d store: the server does not speak torch's TCPStore protocol")

// plausibleKeys bounds the key count a real store can answer; anything
// larger is some other protocol's bytes read as a count.
const plausibleKeys = 1 << 40

// probeLen is the least length of a handshake request, padded with more
// key counts: longer than goddp's own store reads before it can refuse a
// stranger (its 41-byte token handshake header), so that a goddp store on
// MASTER_PORT closes the connection at once instead of waiting for more.
const probeLen = 48

// detect finds the dialect of the server at addr (see the package doc),
// returning the local address its connection used. A refused connection
// is retried until ctx ends: the agent may not be listening yet. The
// handshake connections are closed; the client opens its own.
func detect(ctx context.Context, addr string) (*dialect, net.Addr, error) {
	c, err := dialRetry(ctx, addr)
	if err != nil {
		return nil, nil, err
	}
	defer c.close()
	local := c.nc.LocalAddr()
	var nb [4]byte
	_, _ = rand.Read(nb[:])
	// nonce[1] is byte 8 of the probe, the top byte of the key length a
	// legacy server reads: with its top bit set the length cannot be
	// allocated, and the server drops the connection having stored nothing.
	nb[1] |= 0x80
	nonce := binary.LittleEndian.Uint32(nb[:])
	probe := validation().op(validated.numKeys).op(validated.ping).u32(nonce)
	extra := 0
	for ; len(probe) < probeLen; extra++ {
		probe = probe.op(validated.numKeys)
	}

	stop := handshakeDeadline(ctx, c)
	defer stop()
	if _, err := c.nc.Write(probe); err != nil {
		return nil, nil, handshakeErr(ctx, addr, 0, err)
	}
	got, err := readCount(c)
	switch {
	case err != nil && got == 0 && closedEarly(err):
		// Nothing answered and the connection is gone: a legacy server
		// refusing the probe as an impossible SET.
		return verify(ctx, addr, &legacy, local)
	case err != nil:
		return nil, nil, handshakeErr(ctx, addr, got, err)
	}
	var e [4]byte
	got, err = io.ReadFull(c.r, e[:])
	switch {
	case err == nil && binary.LittleEndian.Uint32(e[:]) != nonce:
		return nil, nil, fmt.Errorf("%w at %s: it answered ping %08x with % x", ErrProtocol, addr, nonce, e[:])
	case err == nil:
		for range extra {
			if got, err := readCount(c); err != nil {
				return nil, nil, handshakeErr(ctx, addr, got, err)
			}
		}
		return &validated, local, nil
	case got == 0 && closedEarly(err):
		// A validated server from before PING closes on the op it does
		// not know, after answering the key count.
		return verify(ctx, addr, &validated, local)
	}
	return nil, nil, handshakeErr(ctx, addr, got, err)
}

// verify checks, on a new connection, that the server answers key counts
// in d's numbering.
func verify(ctx context.Context, addr string, d *dialect, local net.Addr) (*dialect, net.Addr, error) {
	c, err := dialRetry(ctx, addr)
	if err != nil {
		return nil, nil, err
	}
	defer c.close()
	stop := handshakeDeadline(ctx, c)
	defer stop()
	var req request
	if d.validated {
		req = validation()
	}
	n := 0
	for ; n == 0 || len(req) < probeLen; n++ {
		req = req.op(d.numKeys)
	}
	if _, err := c.nc.Write(req); err != nil {
		return nil, nil, handshakeErr(ctx, addr, 0, err)
	}
	for range n {
		got, err := readCount(c)
		switch {
		case err != nil && got == 0 && closedEarly(err):
			return nil, nil, fmt.Errorf("%w at %s: it closed the connection on torch's handshake, in both numberings", ErrProtocol, addr)
		case err != nil:
			return nil, nil, handshakeErr(ctx, addr, got, err)
		}
	}
	return d, local, nil
}

// readCount reads a key count, refusing one no store can have: some other
// protocol's bytes.
func readCount(c *conn) (int, error) {
	var b [8]byte
	got, err := io.ReadFull(c.r, b[:])
	if err == nil && binary.LittleEndian.Uint64(b[:]) > plausibleKeys {
		err = fmt.Errorf("%w: it answered torch's handshake with % x", ErrProtocol, b[:])
	}
	return got, err
}

// handshakeDeadline bounds the handshake on c by handshakeTimeout and ctx;
// the returned func undoes it.
func handshakeDeadline(ctx context.Context, c *conn) (stop func()) {
	dl := time.Now().Add(handshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	c.nc.SetDeadline(dl)
	after := context.AfterFunc(ctx, func() { c.nc.SetDeadline(time.Now()) })
	return func() {
		after()
		c.nc.SetDeadline(time.Time{})
	}
}

// handshakeErr names what went wrong in a handshake exchange, got bytes
// into an answer.
func handshakeErr(ctx context.Context, addr string, got int, err error) error {
	switch {
	case ctx.Err() == context.Canceled:
		return fmt.Errorf("comm: c10d store %s: handshake: %w", addr, ctx.Err())
	case isTimeout(err) || ctx.Err() != nil:
		// Silence: torch's store answers in a round trip.
		return fmt.Errorf("%w at %s: no answer to torch's handshake in time (%w)", ErrProtocol, addr, backend.ErrTimeout)
	case errors.Is(err, ErrProtocol):
		return fmt.Errorf("%w at %s%s", ErrProtocol, addr, strings.TrimPrefix(err.Error(), ErrProtocol.Error()))
	case got > 0:
		return fmt.Errorf("%w at %s: it closed the connection %d bytes into an answer (%v)", ErrProtocol, addr, got, err)
	}
	return fmt.Errorf("%w at %s: %v", ErrProtocol, addr, err)
}

// closedEarly: the server closed (or reset) the connection.
func closedEarly(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
