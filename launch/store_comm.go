package launch

import (
	"context"
	"net"
	"time"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/store"
)

// commStores is the real store driver: comm's TCP store, every connection
// authenticated with the job token (HMAC challenge, never sent in clear).
type commStores struct {
	logf func(format string, args ...any)
}

func (d commStores) listen(ctx context.Context, addr, token string) (storeServer, error) {
	opts := []store.Option{store.WithToken(token)}
	if d.logf != nil {
		opts = append(opts, store.WithLogger(d.logf))
	}
	return store.Listen(ctx, addr, opts...)
}

func (d commStores) dial(ctx context.Context, addr, token string) (backend.Store, error) {
	// The store's own timeout bounds blocking gets; the rendezvous passes
	// its deadlines through ctx, so keep the store's out of the way.
	return store.Dial(ctx, addr, store.WithToken(token), store.WithTimeout(24*time.Hour))
}

// localAddrOf is the local end of a store connection, when the store
// exposes it (comm's TCP client does).
func localAddrOf(st backend.Store) string {
	if la, ok := st.(interface{ LocalAddr() net.Addr }); ok && la.LocalAddr() != nil {
		h, _, err := net.SplitHostPort(la.LocalAddr().String())
		if err == nil {
			return h
		}
	}
	return ""
}
