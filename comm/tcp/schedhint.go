package tcp

import (
	"runtime"
	"time"
)

// tcpYieldEvery bounds how long an inline progress loop goes without
// passing through the Go scheduler.
//
// A loop that makes non-blocking socket syscalls back to back (the
// two-rank exchange copies up to a MiB per writev or read) never parks,
// so its goroutine keeps one scheduler tick. After 10 ms of that the
// runtime's sysmon retakes the P during every syscall longer than 20 us,
// hands it to another thread and polls every 20 us: at a 4 MiB all-reduce,
// 46% of the process's context switches were sysmon's. A Gosched every few
// ms resets the tick (tensor/schedhint.go does the same for BLAS calls).
const tcpYieldEvery = 4 * time.Millisecond

// schedHint yields the processor if this group's inline loops have not
// done so for tcpYieldEvery.
func (g *tcpGroup) schedHint() {
	now := time.Now().UnixNano()
	if last := g.lastYield.Load(); now-last >= int64(tcpYieldEvery) && g.lastYield.CompareAndSwap(last, now) {
		runtime.Gosched()
	}
}
