package auth

import (
	"context"
	"fmt"
	"github.com/goddp/goddp/comm/backend"
	"net"
	"strings"
	"time"
)

// When a job may run without a token. A process that listens on a routable
// address with no token lets anyone who reaches the port read and write the
// store, pose as a rank during mesh setup, or fill the host's memory, so
// goddp refuses to, unless the user says GODDP_INSECURE=1 (and every rank
// then warns). On loopback only this host's users can connect, which is
// the single-node default and needs no token. ddprun always hands its
// workers a token (the user's, or a random one for a single-node job).

// MinTokenLen is the shortest job token accepted: 16 bytes, 128 bits when
// random, too many to guess online.
const MinTokenLen = 16

// HowToSetToken tells the user how to make a token.
const HowToSetToken = "export GODDP_TOKEN=$(head -c 32 /dev/urandom | base64) on every node, the same value everywhere"

// CheckToken reports a token too short to protect anything; "" (no token)
// passes here and is judged by CheckListen.
func CheckToken(token string) error {
	if token != "" && len(token) < MinTokenLen {
		return fmt.Errorf("%w: GODDP_TOKEN is %d bytes; a job token needs at least %d (%s)",
			backend.ErrBadArgument, len(token), MinTokenLen, HowToSetToken)
	}
	return nil
}

// CheckListen reports why a process may not listen on (or run a job
// through) addr with token: a short token, or no token on an address that
// is not loopback unless insecure.
func CheckListen(addr, token string, insecure bool) error {
	if err := CheckToken(token); err != nil {
		return err
	}
	if token != "" || insecure || IsLoopback(addr) {
		return nil
	}
	return fmt.Errorf("%w: refusing to listen on %s with no job token: anyone who can reach it could read and write "+
		"the rendezvous store and pose as a rank. Set GODDP_TOKEN (%s), or GODDP_INSECURE=1 to run "+
		"unauthenticated on a network you trust", backend.ErrBadArgument, addr, HowToSetToken)
}

// InsecureWarning is what every rank prints when it runs with
// GODDP_INSECURE=1 and no token.
func InsecureWarning(rank int, addr string) string {
	return fmt.Sprintf("comm: WARNING: rank %d runs without a job token (GODDP_INSECURE=1): anyone who can reach %s "+
		"can read and write the rendezvous store and pose as a rank; set GODDP_TOKEN (%s)", rank, addr, HowToSetToken)
}

// IsLoopback reports whether addr ("host:port" or a bare host) names only
// loopback addresses. An empty or unspecified host (every interface) is
// not loopback, nor is a name that does not resolve within a second.
func IsLoopback(addr string) bool {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "" {
		return false
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil || len(ips) == 0 {
		return false
	}
	for _, ip := range ips {
		if !ip.IP.IsLoopback() {
			return false
		}
	}
	return true
}
