package netcluster

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// helperRing accepts NETCLUSTER_FLOWS connections on :7000 and drains
// them, while sending NETCLUSTER_BYTES on as many connections to
// NETCLUSTER_PEER; it prints the seconds both directions took.
func helperRing() int {
	flows, _ := strconv.Atoi(os.Getenv("NETCLUSTER_FLOWS"))
	n, _ := strconv.Atoi(os.Getenv("NETCLUSTER_BYTES"))
	l, err := net.Listen("tcp", ":7000")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	var wg sync.WaitGroup
	start := time.Now()
	for range flows {
		wg.Go(func() {
			c, err := l.Accept()
			if err == nil {
				_, _ = io.Copy(io.Discard, c)
			}
		})
	}
	for range flows {
		wg.Go(func() {
			var c net.Conn
			var err error
			for range 200 {
				if c, err = net.Dial("tcp", os.Getenv("NETCLUSTER_PEER")+":7000"); err == nil {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil {
				return
			}
			_, _ = c.Write(make([]byte, n))
			c.Close()
		})
	}
	wg.Wait()
	fmt.Printf("%.3f\n", time.Since(start).Seconds())
	return 0
}

// Every node sends to the next and receives from the previous at once, on
// two connections each way, as a ring all-reduce's inter-node step does:
// what the shaped links (and this host's CPUs) carry. Opt-in
// (NETCLUSTER_PROBE=1): a measurement, not a check.
func TestRingThroughput(t *testing.T) {
	if os.Getenv("NETCLUSTER_PROBE") == "" {
		t.Skip("set NETCLUSTER_PROBE=1 to measure")
	}
	rate := os.Getenv("NETCLUSTER_RATE")
	if rate == "" {
		rate = "1gbit"
	}
	if rate == "none" {
		rate = ""
	}
	c := newCluster(t, Config{Nodes: 4, Rate: rate})
	const bytes = 48 << 20
	var cmds []*exec.Cmd
	outs := make([]*strings.Builder, 4)
	for i := range 4 {
		cmd := c.Command(i, append(os.Environ(), "NETCLUSTER_HELPER=ring", "NETCLUSTER_FLOWS=2",
			"NETCLUSTER_PEER=node"+strconv.Itoa((i+1)%4), "NETCLUSTER_BYTES="+strconv.Itoa(bytes)), os.Args[0])
		outs[i] = &strings.Builder{}
		cmd.Stdout = outs[i]
		require.NoError(t, cmd.Start())
		cmds = append(cmds, cmd)
	}
	for i, cmd := range cmds {
		require.NoError(t, cmd.Wait(), outs[i].String())
		s, err := strconv.ParseFloat(strings.TrimSpace(outs[i].String()), 64)
		require.NoError(t, err, outs[i].String())
		t.Logf("node%d: 2 x %d MiB out and in: %.2f s = %.0f Mbit/s each way (link %s)", i, bytes>>20, s, 2*bytes*8/s/1e6, rate)
	}
}
