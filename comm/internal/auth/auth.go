// Package auth is the mutual HMAC-SHA256 handshake that every TCP
// connection goddp accepts (the rendezvous store's and the tcp backend's
// peer mesh) starts with, and the rules on when a job may run without a
// token at all.
package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"github.com/goddp/goddp/comm/backend"
	"io"
	"net"
	"time"
)

// Every TCP connection goddp accepts (store and peer mesh) starts with the
// same mutual HMAC-SHA256 challenge-response over the job token:
//
//	client -> server  magic "GDDP", version, purpose, flags, nonceC[32], info (u16 length + bytes)
//	server -> client  magic "GDDP", version, status, nonceS[32]
//	client -> server  HMAC(token, "c"|purpose|nonceS|nonceC|info)
//	server -> client  status (0 accepted, else refused and closed)
//	server -> client  HMAC(token, "s"|purpose|nonceC|nonceS|info), only after status 0
//
// The token itself never crosses the wire. The connecting side proves the
// token first: the accepting side, which anyone who can reach its port may
// talk to, sends no MAC until the client's has checked out, so a stranger
// takes nothing away to guess the token from offline. The client then
// checks the server's MAC too, so a stranger cannot impersonate the store
// or a peer; the "s"/"c" domain bytes stop reflection. With no token both
// sides MAC with an empty key, so a client with a token and a server
// without one (or the reverse) refuse each other. info binds the
// connection to its purpose (a peer's rank and group), and a fixed-size,
// deadline-bound exchange means garbage or silence from a stranger costs
// one short read.
//
// Version 1 had the server send its MAC first; a version-1 peer is refused
// with a message naming both versions.

const (
	authMagic   = "GDDP"
	authVersion = 2
	authNonce   = 32
	authMAC     = sha256.Size
	maxAuthInfo = 1024
	// Timeout bounds a handshake when the caller gives no deadline.
	Timeout = 10 * time.Second
)

// Handshake purposes keep a store client from being taken for a peer.
const (
	PurposeStore byte = 1
	PurposePeer  byte = 2
)

const (
	flagHasToken byte = 1
)

// authError is a refused handshake; it wraps backend.ErrAuth and the I/O
// error that ended it, if any (net.ErrClosed when the listener's owner cut
// it off).
type authError struct {
	why string
	err error
}

func (e *authError) Error() string { return backend.ErrAuth.Error() + ": " + e.why }
func (e *authError) Unwrap() []error {
	if e.err == nil {
		return []error{backend.ErrAuth}
	}
	return []error{backend.ErrAuth, e.err}
}

func authMACOf(token string, dom byte, purpose byte, n1, n2, info []byte) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte{dom, purpose})
	m.Write(n1)
	m.Write(n2)
	m.Write(info)
	return m.Sum(nil)
}

// setAuthDeadline sets conn's deadline to the earlier of d and now+Timeout.
func setAuthDeadline(conn net.Conn, d time.Time) {
	lim := time.Now().Add(Timeout)
	if d.IsZero() || d.After(lim) {
		d = lim
	}
	conn.SetDeadline(d)
}

// Client authenticates conn to a server as purpose, sending info.
func Client(conn net.Conn, token string, purpose byte, info []byte, deadline time.Time) error {
	if len(info) > maxAuthInfo {
		return fmt.Errorf("%w: handshake info too long", backend.ErrBadArgument)
	}
	setAuthDeadline(conn, deadline)
	defer conn.SetDeadline(time.Time{})
	nonceC := make([]byte, authNonce)
	if _, err := rand.Read(nonceC); err != nil {
		return err
	}
	var flags byte
	if token != "" {
		flags |= flagHasToken
	}
	msg := make([]byte, 0, 4+3+authNonce+2+len(info))
	msg = append(msg, authMagic...)
	msg = append(msg, authVersion, purpose, flags)
	msg = append(msg, nonceC...)
	msg = binary.BigEndian.AppendUint16(msg, uint16(len(info)))
	msg = append(msg, info...)
	if _, err := conn.Write(msg); err != nil {
		return err
	}
	resp := make([]byte, 4+2+authNonce)
	if _, err := io.ReadFull(conn, resp); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	if string(resp[:4]) != authMagic {
		return &authError{"the server is not a goddp endpoint", nil}
	}
	if resp[4] != authVersion {
		return &authError{fmt.Sprintf("the server speaks handshake version %d, this process %d (mixed goddp versions?)", resp[4], authVersion), nil}
	}
	if resp[5] != 0 {
		return &authError{"the server refused the handshake (wrong purpose)", nil}
	}
	nonceS := resp[6:]
	if _, err := conn.Write(authMACOf(token, 'c', purpose, nonceS, nonceC, info)); err != nil {
		return err
	}
	var st [1]byte
	if _, err := io.ReadFull(conn, st[:]); err != nil {
		// Not a refusal (that is status 1): an evicted or dropped
		// connection, which the caller may retry.
		return fmt.Errorf("handshake: the server closed the connection: %w", err)
	}
	if st[0] != 0 {
		return &authError{"the server refused our job token (check GODDP_TOKEN on both sides)", nil}
	}
	mac := make([]byte, authMAC)
	if _, err := io.ReadFull(conn, mac); err != nil {
		// Not a refusal (that is status 1): an evicted or dropped
		// connection, which the caller may retry.
		return fmt.Errorf("handshake: the server closed the connection: %w", err)
	}
	if !hmac.Equal(mac, authMACOf(token, 's', purpose, nonceC, nonceS, info)) {
		return &authError{"the server does not hold our job token (check GODDP_TOKEN on both sides)", nil}
	}
	return nil
}

// Server authenticates an accepted conn and returns the client's
// info. Errors wrap backend.ErrAuth for protocol or token failures; the
// message says why without revealing the token.
func Server(conn net.Conn, token string, purpose byte, deadline time.Time) ([]byte, error) {
	setAuthDeadline(conn, deadline)
	defer conn.SetDeadline(time.Time{})
	head := make([]byte, 4+3+authNonce+2)
	if _, err := io.ReadFull(conn, head); err != nil {
		return nil, &authError{fmt.Sprintf("no handshake (%v)", err), err}
	}
	if string(head[:4]) != authMagic {
		return nil, &authError{"bad handshake magic (not a goddp client)", nil}
	}
	nonceS := make([]byte, authNonce)
	if _, err := rand.Read(nonceS); err != nil {
		return nil, err
	}
	if head[4] != authVersion {
		// Answer in our version so the client can say what is wrong.
		conn.Write(append(append([]byte(authMagic), authVersion, 1), nonceS...))
		return nil, &authError{fmt.Sprintf("client speaks handshake version %d, this process %d (mixed goddp versions?)", head[4], authVersion), nil}
	}
	nonceC := head[7 : 7+authNonce]
	n := int(binary.BigEndian.Uint16(head[7+authNonce:]))
	if n > maxAuthInfo {
		return nil, &authError{"handshake info too long", nil}
	}
	info := make([]byte, n)
	if _, err := io.ReadFull(conn, info); err != nil {
		return nil, &authError{fmt.Sprintf("short handshake (%v)", err), err}
	}
	status := byte(0)
	if head[5] != purpose {
		status = 1
	}
	resp := make([]byte, 0, 4+2+authNonce)
	resp = append(resp, authMagic...)
	resp = append(resp, authVersion, status)
	resp = append(resp, nonceS...)
	if _, err := conn.Write(resp); err != nil {
		return nil, err
	}
	if status != 0 {
		return nil, &authError{fmt.Sprintf("client asked for purpose %d, this endpoint serves %d", head[5], purpose), nil}
	}
	mac := make([]byte, authMAC)
	if _, err := io.ReadFull(conn, mac); err != nil {
		return nil, &authError{fmt.Sprintf("client gave up during the handshake (%v)", err), err}
	}
	if !hmac.Equal(mac, authMACOf(token, 'c', purpose, nonceS, nonceC, info)) {
		conn.Write([]byte{1})
		why := "wrong job token"
		switch {
		case head[6]&flagHasToken == 0:
			why = "client has no job token (set GODDP_TOKEN)"
		case token == "":
			why = "client has a job token and this endpoint has none (set the same GODDP_TOKEN on both sides)"
		}
		return nil, &authError{why, nil}
	}
	ok := make([]byte, 0, 1+authMAC)
	ok = append(ok, 0)
	ok = append(ok, authMACOf(token, 's', purpose, nonceC, nonceS, info)...)
	if _, err := conn.Write(ok); err != nil {
		return nil, err
	}
	return info, nil
}
