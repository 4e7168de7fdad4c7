package auth

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm/backend"
)

const tok = "0123456789abcdef-job"

// pair runs Server on one end of a pipe and Client on the other.
func pair(t *testing.T, serverTok, clientTok string, serverPurpose, clientPurpose byte) (info []byte, serr, cerr error) {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		info, serr = Server(a, serverTok, serverPurpose, time.Now().Add(5*time.Second))
		if serr != nil {
			a.Close()
		}
	}()
	cerr = Client(b, clientTok, clientPurpose, []byte("hello"), time.Now().Add(5*time.Second))
	if cerr != nil {
		b.Close()
	}
	<-done
	return info, serr, cerr
}

func TestHandshake(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		server, client       string
		sp, cp               byte
		ok                   bool
		serverWhy, clientWhy string
	}{
		{"same token", tok, tok, PurposeStore, PurposeStore, true, "", ""},
		{"no token on either side", "", "", PurposePeer, PurposePeer, true, "", ""},
		{"wrong token", tok, "another-token-0123456", PurposeStore, PurposeStore, false, "wrong job token", "refused our job token"},
		{"client has none", tok, "", PurposeStore, PurposeStore, false, "client has no job token (set GODDP_TOKEN)", "refused our job token"},
		{"server has none", "", tok, PurposeStore, PurposeStore, false, "this endpoint has none", "refused our job token"},
		{"wrong purpose", tok, tok, PurposePeer, PurposeStore, false, "purpose", "wrong purpose"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info, serr, cerr := pair(t, tc.server, tc.client, tc.sp, tc.cp)
			if tc.ok {
				require.NoError(t, serr)
				require.NoError(t, cerr)
				assert.Equal(t, "hello", string(info))
				return
			}
			require.ErrorIs(t, serr, backend.ErrAuth)
			require.ErrorIs(t, cerr, backend.ErrAuth)
			assert.Contains(t, serr.Error(), tc.serverWhy)
			assert.Contains(t, cerr.Error(), tc.clientWhy)
			for _, err := range []error{serr, cerr} {
				assert.NotContains(t, err.Error(), tok)
			}
		})
	}
}

// hello is a client's first message with a chosen nonce.
func hello(purpose byte, nonce []byte, info string) []byte {
	m := append([]byte(authMagic), authVersion, purpose, flagHasToken)
	m = append(m, nonce...)
	m = binary.BigEndian.AppendUint16(m, uint16(len(info)))
	return append(m, info...)
}

// TestServerRevealsNoMACBeforeClientProof plays a stranger who does not
// know the token: the server must send it its nonce and nothing it could
// test guesses of the token against offline. Before the handshake was
// reordered (version 1) the server's first answer carried
// HMAC(token, nonceC|nonceS|info), and a stranger had only to connect once
// to take it away.
func TestServerRevealsNoMACBeforeClientProof(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	serr := make(chan error, 1)
	go func() {
		_, err := Server(a, tok, PurposeStore, time.Now().Add(5*time.Second))
		a.Close()
		serr <- err
	}()
	b.SetDeadline(time.Now().Add(5 * time.Second))
	nonceC := bytes.Repeat([]byte{7}, authNonce)
	_, err := b.Write(hello(PurposeStore, nonceC, "x"))
	require.NoError(t, err)
	var got []byte
	buf := make([]byte, 256)
	// Everything the server sends before it hears our (wrong) proof.
	b.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	for {
		n, err := b.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			break
		}
	}
	require.Len(t, got, 4+2+authNonce, "the server's first answer is magic, version, status and its nonce, no MAC")
	nonceS := got[6:]
	for _, dom := range []byte{'s', 'c'} {
		for _, m := range [][]byte{authMACOf(tok, dom, PurposeStore, nonceC, nonceS, []byte("x")), authMACOf(tok, dom, PurposeStore, nonceS, nonceC, []byte("x"))} {
			assert.False(t, bytes.Contains(got, m[:8]), "a MAC over the token went out before the client proved it")
		}
	}
	// A wrong proof gets a bare refusal and a hang-up, again no MAC.
	b.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = b.Write(make([]byte, authMAC))
	require.NoError(t, err)
	rest, _ := io.ReadAll(b)
	assert.Equal(t, []byte{1}, rest)
	assert.ErrorIs(t, <-serr, backend.ErrAuth)
}

func TestOldVersionRefusedClearly(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	serr := make(chan error, 1)
	go func() {
		_, err := Server(a, tok, PurposeStore, time.Now().Add(5*time.Second))
		a.Close()
		serr <- err
	}()
	m := hello(PurposeStore, make([]byte, authNonce), "")
	m[4] = 1
	b.Write(m)
	io.ReadAll(b)
	err := <-serr
	require.ErrorIs(t, err, backend.ErrAuth)
	assert.Contains(t, err.Error(), "version 1")
}

func TestClosedServerIsRetryable(t *testing.T) {
	a, b := net.Pipe()
	go func() {
		io.ReadFull(a, make([]byte, 4+3+authNonce+2))
		a.Write(append(append([]byte(authMagic), authVersion, 0), make([]byte, authNonce)...))
		a.Close() // evicted mid-handshake
	}()
	err := Client(b, tok, PurposeStore, nil, time.Now().Add(5*time.Second))
	require.Error(t, err)
	assert.False(t, errors.Is(err, backend.ErrAuth), "a dropped connection is not a refusal: %v", err)
}

func TestCheckListen(t *testing.T) {
	for _, tc := range []struct {
		addr, token string
		insecure    bool
		want        string
	}{
		{"127.0.0.1:29500", "", false, ""},
		{"[::1]:29500", "", false, ""},
		{"localhost:29500", "", false, ""},
		{"127.0.0.1", "", false, ""},
		{"10.1.2.3:29500", tok, false, ""},
		{"10.1.2.3:29500", "", true, ""},
		{"10.1.2.3:29500", "", false, "GODDP_TOKEN"},
		{"0.0.0.0:29500", "", false, "GODDP_TOKEN"},
		{":29500", "", false, "GODDP_TOKEN"},
		{"127.0.0.1:29500", "short", false, "at least 16"},
		{"10.1.2.3:29500", "short", true, "at least 16"},
	} {
		err := CheckListen(tc.addr, tc.token, tc.insecure)
		if tc.want == "" {
			assert.NoError(t, err, "%+v", tc)
			continue
		}
		require.Error(t, err, "%+v", tc)
		assert.ErrorIs(t, err, backend.ErrBadArgument)
		assert.Contains(t, err.Error(), tc.want)
		assert.Contains(t, err.Error(), "head -c 32 /dev/urandom")
	}
	assert.True(t, strings.Contains(InsecureWarning(3, "10.1.2.3:29500"), "rank 3"))
}
