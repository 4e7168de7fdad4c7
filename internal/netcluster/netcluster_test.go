package netcluster

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The test binary doubles as the program run on the nodes: with
// NETCLUSTER_HELPER set, TestMain runs it instead of the tests.
func TestMain(m *testing.M) {
	switch os.Getenv("NETCLUSTER_HELPER") {
	case "":
		os.Exit(m.Run())
	case "recv":
		os.Exit(helperRecv())
	case "send":
		os.Exit(helperSend())
	case "ring":
		os.Exit(helperRing())
	}
	os.Exit(2)
}

// helperRecv accepts one connection on :7000, reads it to the end and
// prints how long that took after the first byte, and the host name.
func helperRecv() int {
	l, err := net.Listen("tcp", ":7000")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("listening")
	c, err := l.Accept()
	if err != nil {
		return 1
	}
	one := make([]byte, 1)
	if _, err := io.ReadFull(c, one); err != nil {
		return 1
	}
	start := time.Now()
	n, _ := io.Copy(io.Discard, c)
	host, _ := os.Hostname()
	fmt.Printf("%d %d %s\n", n+1, time.Since(start).Nanoseconds(), host)
	return 0
}

func helperSend() int {
	var c net.Conn
	var err error
	for range 100 {
		if c, err = net.Dial("tcp", os.Getenv("NETCLUSTER_PEER")+":7000"); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		fmt.Println(err)
		return 1
	}
	n, _ := strconv.Atoi(os.Getenv("NETCLUSTER_BYTES"))
	_, err = c.Write(make([]byte, n))
	c.Close()
	if err != nil {
		return 1
	}
	return 0
}

func newCluster(t *testing.T, cfg Config) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("netcluster: makes network namespaces")
	}
	c, err := New(cfg)
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

// A node's link runs at the configured rate (give or take the bucket),
// nodes reach each other by host name, and each runs under its own. The
// shaper caps every transfer; a transfer below the rate can be a sender or
// receiver starved of CPU by other tests on a small machine, so up to
// three are made until one runs within 20% of the rate.
func TestShapedLink(t *testing.T) {
	c := newCluster(t, Config{Nodes: 2, Rate: "200mbit", Delay: 50 * time.Microsecond})
	t.Logf("shaping: %s", c.Shaping)
	if c.DelayErr != nil {
		t.Logf("delay: %v", c.DelayErr)
	}
	const bytes = 10 << 20
	transfer := func() float64 {
		recv := c.Command(1, append(os.Environ(), "NETCLUSTER_HELPER=recv"), os.Args[0])
		var out strings.Builder
		pr, pw := io.Pipe()
		recv.Stdout = pw
		require.NoError(t, recv.Start())
		defer func() { _ = recv.Process.Kill(); _ = recv.Wait() }()
		copied := make(chan struct{})
		go func() { _, _ = io.Copy(&out, pr); close(copied) }()
		send := c.Command(0, append(os.Environ(), "NETCLUSTER_HELPER=send", "NETCLUSTER_PEER=node1",
			"NETCLUSTER_BYTES="+strconv.Itoa(bytes)), os.Args[0])
		b, err := send.CombinedOutput()
		require.NoError(t, err, "%s", b)
		require.NoError(t, recv.Wait())
		pw.Close()
		<-copied
		var n, ns int64
		var host string
		_, err = fmt.Sscanf(strings.TrimPrefix(out.String(), "listening\n"), "%d %d %s", &n, &ns, &host)
		require.NoError(t, err, "receiver said %q", out.String())
		require.EqualValues(t, bytes, n)
		require.Equal(t, "node1", host)
		return float64(n*8) / float64(ns) * 1e3
	}
	for attempt := 1; ; attempt++ {
		mbit := transfer()
		t.Logf("10 MiB from node0 to node1 at %.0f Mbit/s (link 200 Mbit/s)", mbit)
		require.Less(t, mbit, 240.0, "the shaper caps the link at its rate")
		if mbit >= 160 {
			return
		}
		require.Less(t, attempt, 3, "no transfer of three reached the link's rate")
	}
}

// Close removes every namespace; a cluster of a dead process is swept.
func TestCleanupAndSweep(t *testing.T) {
	c := newCluster(t, Config{Nodes: 2, Rate: "1gbit"})
	names := append(c.namespaces(), c.Switch)
	for _, ns := range names {
		require.True(t, exists(ns), ns)
	}
	require.NoError(t, c.Close())
	for _, ns := range names {
		require.False(t, exists(ns), ns)
	}
	// A pid that has exited: a finished child's.
	child := exec.Command("true")
	require.NoError(t, child.Run())
	stale := fmt.Sprintf("%s%d_1_0", prefix, child.Process.Pid)
	require.NoError(t, run("ip", "netns", "add", stale))
	t.Cleanup(func() { _ = remove(stale) })
	require.Contains(t, SweepStale(), stale)
	require.False(t, exists(stale))
}

func TestParseRate(t *testing.T) {
	for s, want := range map[string]int64{"1gbit": 1e9, "10Gbit": 1e10, "500mbit": 5e8, "2.5gbit": 25e8} {
		got, err := parseRate(s)
		require.NoError(t, err, s)
		require.Equal(t, want, got, s)
	}
	_, err := parseRate("fast")
	require.Error(t, err)
}
