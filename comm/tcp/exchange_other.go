//go:build !linux

package tcp

// exchangeFast is the Linux-only progress loop of exchange_linux.go.
func (g *tcpGroup) exchangeFast(o *tcpOp, peer int, step uint32, buf Buffer, scratch []byte, np int, op ReduceOp) (bool, error) {
	return false, nil
}
