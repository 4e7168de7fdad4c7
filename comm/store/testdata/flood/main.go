// Command flood measures what a store host spends on blocking gets that
// never complete (issue 24, item 5). Run the host under /usr/bin/time -v
// and point the clients at it from another process:
//
//	go build -o /tmp/flood ./comm/store/testdata/flood
//	/usr/bin/time -v /tmp/flood -serve -addr-file /tmp/flood.addr &
//	/tmp/flood -addr-file /tmp/flood.addr -conns 4 -gets 4096 -key 65536
//
// The host prints its peak goroutine count; the clients print how many gets
// the store refused and how many it left pending.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/goddp/goddp/comm/backend"
	"github.com/goddp/goddp/comm/store"
)

func main() {
	serve := flag.Bool("serve", false, "host the store (else: flood it)")
	addrFile := flag.String("addr-file", "", "where the host writes its address and the clients read it")
	hold := flag.Duration("hold", 2*time.Minute, "how long the host serves at most")
	conns := flag.Int("conns", 4, "client connections")
	gets := flag.Int("gets", 4096, "blocking gets per connection")
	keyLen := flag.Int("key", 64<<10, "key length in bytes")
	settle := flag.Duration("settle", 15*time.Second, "how long the clients keep their gets pending")
	flag.Parse()
	var err error
	if *serve {
		err = host(*addrFile, *hold)
	} else {
		err = flood(*addrFile, *conns, *gets, *keyLen, *settle)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "flood:", err)
		os.Exit(1)
	}
}

func host(addrFile string, hold time.Duration) error {
	srv, err := store.Listen(context.Background(), "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer srv.Close()
	if err := os.WriteFile(addrFile+".tmp", []byte(srv.Addr()), 0o644); err != nil {
		return err
	}
	if err := os.Rename(addrFile+".tmp", addrFile); err != nil {
		return err
	}
	peak := 0
	for end := time.Now().Add(hold); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		peak = max(peak, runtime.NumGoroutine())
		if _, err := os.Stat(addrFile + ".done"); err == nil {
			break
		}
	}
	fmt.Printf("host: peak goroutines %d\n", peak)
	return nil
}

func flood(addrFile string, conns, gets, keyLen int, settle time.Duration) error {
	var addr []byte
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var err error
		if addr, err = os.ReadFile(addrFile); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return err
		}
	}
	ctx := context.Background()
	var refused, pending atomic.Int64
	var firstRefusal atomic.Value
	for c := range conns {
		s, err := store.Dial(ctx, string(addr), store.WithTimeout(time.Minute))
		if err != nil {
			return err
		}
		defer s.Close()
		for g := range gets {
			key := fmt.Sprintf("%d/%d/", c, g)
			key += strings.Repeat("k", keyLen-len(key))
			pending.Add(1)
			go func() {
				gctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				_, err := s.Get(gctx, key)
				if err != nil && !errors.Is(err, backend.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
					refused.Add(1)
					firstRefusal.CompareAndSwap(nil, err.Error())
				}
				pending.Add(-1)
			}()
		}
	}
	time.Sleep(settle)
	fmt.Printf("clients: %d gets sent, %d refused, %d still pending after %v\n", conns*gets, refused.Load(), pending.Load(), settle)
	if v := firstRefusal.Load(); v != nil {
		msg := v.(string)
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		fmt.Printf("first refusal: %s\n", msg)
	}
	// The host stops when this file appears; the pending gets end with it.
	return os.WriteFile(addrFile+".done", nil, 0o644)
}
