package launch

import (
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// spawner starts processes from one locked OS thread. Linux delivers
// Pdeathsig when the thread that forked the child exits, not the process,
// and the Go runtime may retire threads; starting every worker from one
// thread that lives as long as the launcher's Run makes "the launcher died,
// so its workers die" hold, even for kill -9 of the launcher.
type spawner struct {
	reqs chan spawnReq
	done chan struct{}
}

type spawnReq struct {
	cmd   *exec.Cmd
	reply chan error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnReq), done: make(chan struct{})}
	go func() {
		// Never unlocked: when this goroutine returns its thread exits,
		// which kills any child still alive (all have been stopped by then).
		runtime.LockOSThread()
		defer close(s.done)
		for r := range s.reqs {
			r.reply <- r.cmd.Start()
		}
	}()
	return s
}

func (s *spawner) start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// Own process group: a stop reaches the worker's children too.
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	reply := make(chan error, 1)
	s.reqs <- spawnReq{cmd, reply}
	return <-reply
}

func (s *spawner) close() {
	close(s.reqs)
	<-s.done
}

// exitInfo is how a worker ended.
type exitInfo struct {
	code   int            // -1 when killed by a signal
	signal syscall.Signal // 0 when it exited
	time   time.Time
}

func (e exitInfo) ok() bool { return e.code == 0 && e.signal == 0 }

func exitInfoOf(state *os.ProcessState) exitInfo {
	info := exitInfo{code: -1, time: time.Now()}
	if state == nil {
		return info
	}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		info.signal = ws.Signal()
		return info
	}
	info.code = state.ExitCode()
	return info
}

// killGroup signals a worker's whole process group (its pgid is its pid).
func killGroup(pid int, sig syscall.Signal) {
	if pid > 0 {
		_ = syscall.Kill(-pid, sig)
	}
}

// waitExited blocks until pid has exited but leaves it unreaped (a zombie).
// While the zombie exists its pid, and so its process group id, cannot be
// reused, so killing the group right after is safe on a busy machine.
func waitExited(pid int) error {
	const (
		pPID    = 1
		wExited = 4
		wNoWait = 0x1000000
	)
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), wExited|wNoWait, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return errno
		}
		return nil
	}
}
