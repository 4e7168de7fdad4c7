// Package auth is the mutual HMAC-SHA256 handshake that every TCP
// connection goddp accepts (the rendezvous store's and the tcp backend's
// peer mesh) starts with.
package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"goddp/comm/backend"
	"io"
	"net"
	"time"
)

// Every TCP connection goddp accepts (store and peer mesh) starts with the
// same mutual HMAC-SHA256 challenge-response over the job token:
//
//	client -> server  magic "GDDP", version, purpose, flags, nonceC[32], info (u16 length + bytes)
//	server -> client  magic "GDDP", version, status, nonceS[32], HMAC(token, "s"|purpose|nonceC|nonceS|info)
//	client -> server  HMAC(token, "c"|purpose|nonceS|nonceC|info)
//	server -> client  status (0 accepted, else refused)
//
// The token itself never crosses the wire. Both sides prove knowledge of it
// (the client checks the server too, so a stranger cannot impersonate the
// store), and the "s"/"c" domain bytes stop reflection. With no token both
// sides MAC with an empty key, so a client with a token and a server without
// one (or the reverse) still refuse each other. info binds the connection to
// its purpose (a peer's rank and group), and a fixed-size, deadline-bound
// exchange means garbage or silence from a stranger costs one short read.

const (
	authMagic   = "GDDP"
	authVersion = 1
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

// authError is a refused handshake; it wraps backend.ErrAuth.
type authError struct{ why string }

func (e *authError) Error() string { return backend.ErrAuth.Error() + ": " + e.why }
func (e *authError) Unwrap() error { return backend.ErrAuth }

func authMACOf(token string, dom byte, purpose byte, n1, n2, info []byte) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte{dom, purpose})
	m.Write(n1)
	m.Write(n2)
	m.Write(info)
	return m.Sum(nil)
}

// deadlineFor sets conn's deadline to the earlier of d and now+Timeout.
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
	resp := make([]byte, 4+2+authNonce+authMAC)
	if _, err := io.ReadFull(conn, resp); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	if string(resp[:4]) != authMagic {
		return &authError{"the server is not a goddp endpoint"}
	}
	if resp[4] != authVersion {
		return &authError{fmt.Sprintf("protocol version %d, want %d", resp[4], authVersion)}
	}
	if resp[5] != 0 {
		return &authError{"the server refused the handshake (wrong purpose)"}
	}
	nonceS := resp[6 : 6+authNonce]
	if !hmac.Equal(resp[6+authNonce:], authMACOf(token, 's', purpose, nonceC, nonceS, info)) {
		// Answer with a blank MAC rather than hanging up, so the server
		// can log why (no token or a different one) without us proving
		// anything to a stranger.
		conn.Write(make([]byte, authMAC))
		return &authError{"the server does not hold our job token (check GODDP_TOKEN on both sides)"}
	}
	if _, err := conn.Write(authMACOf(token, 'c', purpose, nonceS, nonceC, info)); err != nil {
		return err
	}
	var st [1]byte
	if _, err := io.ReadFull(conn, st[:]); err != nil {
		return &authError{fmt.Sprintf("the server closed the connection during the handshake (%v)", err)}
	}
	if st[0] != 0 {
		return &authError{"the server refused the token"}
	}
	return nil
}

// Server authenticates an accepted conn and returns the client's
// info. Errors wrap backend.ErrAuth for protocol or token failures; the message says
// why without revealing the token.
func Server(conn net.Conn, token string, purpose byte, deadline time.Time) ([]byte, error) {
	setAuthDeadline(conn, deadline)
	defer conn.SetDeadline(time.Time{})
	head := make([]byte, 4+3+authNonce+2)
	if _, err := io.ReadFull(conn, head); err != nil {
		return nil, &authError{fmt.Sprintf("no handshake (%v)", err)}
	}
	if string(head[:4]) != authMagic {
		return nil, &authError{"bad handshake magic (not a goddp client)"}
	}
	if head[4] != authVersion {
		return nil, &authError{fmt.Sprintf("protocol version %d, want %d", head[4], authVersion)}
	}
	nonceC := head[7 : 7+authNonce]
	n := int(binary.BigEndian.Uint16(head[7+authNonce:]))
	if n > maxAuthInfo {
		return nil, &authError{"handshake info too long"}
	}
	info := make([]byte, n)
	if _, err := io.ReadFull(conn, info); err != nil {
		return nil, &authError{fmt.Sprintf("short handshake (%v)", err)}
	}
	status := byte(0)
	if head[5] != purpose {
		status = 1
	}
	nonceS := make([]byte, authNonce)
	if _, err := rand.Read(nonceS); err != nil {
		return nil, err
	}
	resp := make([]byte, 0, 4+2+authNonce+authMAC)
	resp = append(resp, authMagic...)
	resp = append(resp, authVersion, status)
	resp = append(resp, nonceS...)
	resp = append(resp, authMACOf(token, 's', purpose, nonceC, nonceS, info)...)
	if _, err := conn.Write(resp); err != nil {
		return nil, err
	}
	if status != 0 {
		return nil, &authError{fmt.Sprintf("client asked for purpose %d, this endpoint serves %d", head[5], purpose)}
	}
	mac := make([]byte, authMAC)
	if _, err := io.ReadFull(conn, mac); err != nil {
		return nil, &authError{fmt.Sprintf("client gave up during the handshake (%v); it probably lacks the job token", err)}
	}
	if !hmac.Equal(mac, authMACOf(token, 'c', purpose, nonceS, nonceC, info)) {
		conn.Write([]byte{1})
		why := "wrong job token"
		if head[6]&flagHasToken == 0 {
			why = "client has no job token (set GODDP_TOKEN)"
		}
		return nil, &authError{why}
	}
	if _, err := conn.Write([]byte{0}); err != nil {
		return nil, err
	}
	return info, nil
}
