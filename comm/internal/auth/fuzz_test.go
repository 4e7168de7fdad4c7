package auth

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// FuzzHandshake plays both sides of the handshake against arbitrary bytes:
// a server fed a stranger's messages, and a client fed a stranger's
// answers. Neither may panic, hang past its deadline, allocate more than
// the protocol's limits, or, since a stranger cannot know the token or
// predict the other side's nonce, ever accept.
func FuzzHandshake(f *testing.F) {
	nonce := make([]byte, authNonce)
	valid := hello(PurposeStore, nonce, "goddp-peer|p|2|1|0")
	answer := append(append([]byte(authMagic), authVersion, 0), nonce...)
	f.Add(valid, answer)
	f.Add(append(valid, make([]byte, authMAC)...), append(answer, 0))
	f.Add(append(valid, make([]byte, authMAC)...), append(append(answer, 0), make([]byte, authMAC)...))
	old := hello(PurposeStore, nonce, "")
	old[4] = 1
	f.Add(old, append(append([]byte(authMagic), 1, 0), make([]byte, authNonce+authMAC)...))
	huge := append(append([]byte(authMagic), authVersion, PurposePeer, 0), nonce...)
	f.Add(binary.BigEndian.AppendUint16(huge, 0xffff), []byte("GDDP"))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"), []byte("HTTP/1.1 200 OK\r\n\r\n"))
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, fromClient, fromServer []byte) {
		// The server against a stranger.
		a, b := net.Pipe()
		go func() { b.Write(fromClient); b.Close() }()
		go io.Copy(io.Discard, b)
		if info, err := Server(a, tok, PurposeStore, time.Now().Add(2*time.Second)); err == nil {
			t.Fatalf("the server accepted a stranger (info %q)", info)
		} else if len(info) > maxAuthInfo {
			t.Fatalf("info of %d bytes", len(info))
		}
		a.Close()

		// The client against a stranger posing as the server.
		c, d := net.Pipe()
		go func() { d.Write(fromServer); d.Close() }()
		go io.Copy(io.Discard, d)
		if err := Client(c, tok, PurposeStore, []byte("info"), time.Now().Add(2*time.Second)); err == nil {
			t.Fatal("the client accepted a server that does not hold the token")
		}
		c.Close()
	})
}
