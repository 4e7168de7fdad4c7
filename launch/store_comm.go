package launch

import (
	"context"
	"errors"
	"net"

	"goddp/comm"
)

// commStores is the real store driver: comm's TCP store with token auth.
//
// Interim: until comm.ListenStore/DialStore land, listen only reserves the
// address (so port clashes are reported) and dial fails.
type commStores struct{}

type tcpHold struct{ l net.Listener }

func (h *tcpHold) Addr() string { return h.l.Addr().String() }
func (h *tcpHold) Close() error { return h.l.Close() }

func (commStores) listen(ctx context.Context, addr, token string) (storeServer, error) {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	return &tcpHold{l}, nil
}

func (commStores) dial(ctx context.Context, addr, token string) (comm.Store, error) {
	return nil, errors.New("comm store client not available yet")
}
