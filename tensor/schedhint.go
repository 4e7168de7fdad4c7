package tensor

import (
	"runtime"
	"time"
)

// Why a GEMM sometimes yields first.
//
// A cgo call is a syscall to the Go scheduler. sysmon, the runtime's
// monitor thread, normally leaves a P alone while its goroutine sits in a
// syscall, as long as an idle P exists and nothing else is runnable. But
// once a goroutine has not been through the scheduler for 10 ms
// (forcePreemptNS), sysmon retakes its P during every syscall longer than
// one sysmon tick, hands it off (waking another thread), and keeps polling
// every 20 µs. A loop that only calls BLAS never passes through the
// scheduler, so after its first 10 ms every GEMM pays for this. Measured
// with OpenBLAS on 2 threads, one per core, at n=256: 121k context switches
// in 6 s and 145 GFLOPS, against 431 switches and 180 GFLOPS for the same
// loop run inside one C call. With the yield below: 5k switches and the C
// loop's speed.
//
// runtime.Gosched resets that clock, but it also wakes an idle thread, so
// it must be rare. The rule is stateless (libraries hold no mutable package
// state): yield when the wall clock has just crossed a schedHintPeriod
// boundary, i.e. when now mod period falls inside this call's estimated
// duration (at most half a period). Back-to-back calls then yield about
// once per period, well inside the 10 ms limit; a missed boundary only
// costs speed, never correctness. Calls estimated past 10 ms do not yield:
// sysmon retakes them regardless, and yielding before every one of them
// cost n=1024 GEMMs a few percent.
//
// The estimate counts the engine's threads. With one rate for any thread
// count it ran at a third of the true length for 2-thread n=256 GEMMs, and
// two or three calls started inside each window: 1564 context switches in
// 3000 calls, against 552 with a per-thread rate and 177 with the loop in
// C. Interleaved with torch over 30 rounds (scripts/gemm_pingpong.py), the
// per-round Go/torch median went from 0.983 to 0.998.
const (
	schedHintPeriod = 4 * time.Millisecond
	// schedHintRate is the GEMM rate per engine thread (flop/ns, i.e.
	// GFLOPS) used to estimate a call's duration. It depends on the core's
	// GEMM rate (vector width, clock): 85 is a little below what one AVX2
	// core sustains on the shapes that matter here (n=256 on 2 threads:
	// 195-225 in all; the MLP's batch-64 shapes on 1 thread: 85-110). It
	// errs low on purpose: an estimate shorter than the call only narrows
	// the window, so that some boundaries are missed and the next one comes
	// a period later.
	schedHintRate = 85
	// schedHintMin is the estimated duration under which no yield is
	// needed: sysmon only retakes a P that stayed in one syscall across two
	// of its ticks (at least 20 µs).
	schedHintMin = 20 * time.Microsecond
	// schedHintMax is the estimated duration above which yielding is
	// pointless: sysmon retakes a P from any syscall older than 10 ms
	// anyway, and a yield would only wake a thread beside the GEMM's.
	schedHintMax = 10 * time.Millisecond
)

// schedHint yields the processor before a long engine call (flops floating
// point operations) when that keeps sysmon from retaking the P during it;
// see the comment above.
func schedHint(flops float64) { schedHintOn(flops, engineThreads()) }

// schedHintOn is schedHint for a call that runs on threads threads (the
// convolution kernels run on their caller's thread alone).
func schedHintOn(flops float64, threads int) {
	if !engineCgo {
		return
	}
	est := time.Duration(flops / schedHintRate)
	if est < schedHintMin {
		return
	}
	if t := threads; t > 1 {
		est /= time.Duration(t)
	}
	if est < schedHintMin || est > schedHintMax {
		return
	}
	// A window of at most half the period: calls shorter than that still
	// start inside it once per period; longer ones yield on about every
	// other boundary instead of on every call.
	if time.Duration(time.Now().UnixNano()%int64(schedHintPeriod)) < min(est, schedHintPeriod/2) {
		runtime.Gosched()
	}
}
