package launch

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// workerProc is one running worker of the local group.
type workerProc struct {
	localRank, rank int
	cmd             *exec.Cmd
	pid             int
	errTail         *tail
	errorFile       string
	readers         sync.WaitGroup // stdout/stderr pumps
	pipes           []*os.File     // read ends, closed when the pumps are done
	closers         []io.Closer    // line writers and log files
	exited          bool
	exit            exitInfo
}

type workerExit struct {
	idx  int
	info exitInfo
}

// group is the set of workers this node runs in one round.
type group struct {
	workers []*workerProc
	exits   chan workerExit
	alive   int
}

// groupSpec is what startGroup needs for one round.
type groupSpec struct {
	asg     *assignment
	attempt int
	dir     string // per-attempt log dir
}

// startGroup starts every local worker of the round. On error, the workers
// already started are killed and reaped.
func (a *agent) startGroup(gs groupSpec) (*group, error) {
	asg := gs.asg
	n := a.cfg.NProcPerNode
	g := &group{exits: make(chan workerExit, n)}
	base := append(os.Environ(), a.cfg.Env...)
	threads := threadsFor(base, n)
	maxProcs := maxProcsFor(base, threads, runtime.NumCPU())
	for lr := 0; lr < n; lr++ {
		w := &workerProc{localRank: lr, rank: asg.RankOffset + lr, errTail: newTail(a.cfg.TailLines)}
		wdir := filepath.Join(gs.dir, fmt.Sprint(lr))
		if err := os.MkdirAll(wdir, 0o755); err != nil {
			g.stop(syscall.SIGKILL, 0)
			return nil, fmt.Errorf("launch: log dir: %w", err)
		}
		w.errorFile = filepath.Join(wdir, "error.json")
		spec := workerSpec{
			Rank: w.rank, LocalRank: lr, WorldSize: asg.WorldSize, LocalWorldSize: n,
			GroupRank: asg.GroupRank, GroupWorldSize: asg.GroupWorldSize,
			MasterAddr: asg.MasterAddr, MasterPort: asg.MasterPort,
			RestartCount: gs.attempt, MaxRestarts: asg.MaxRestarts,
			RunID: a.cfg.RdzvID, Token: a.token, ErrorFile: w.errorFile,
			StoreHosted: true, Threads: threads, MaxProcs: maxProcs,
		}
		cmd := exec.Command(a.prog.path, a.cfg.Args...)
		cmd.Env = workerEnv(base, spec)
		if err := a.wireOutput(w, cmd, wdir); err != nil {
			a.closeWriteEnds(cmd)
			w.finishOutput()
			g.stop(syscall.SIGKILL, 0)
			return nil, err
		}
		err := a.spawner.start(cmd)
		a.closeWriteEnds(cmd) // the child has its own copies now
		if err != nil {
			w.finishOutput()
			g.stop(syscall.SIGKILL, 0)
			return nil, fmt.Errorf("%w: start %s: %w", ErrProgram, a.prog.path, err)
		}
		w.cmd, w.pid = cmd, cmd.Process.Pid
		g.workers = append(g.workers, w)
		g.alive++
		idx := len(g.workers) - 1
		go func() {
			// Kill the worker's process group while its zombie still holds
			// the pgid, so no child it started outlives it.
			_ = waitExited(w.pid)
			killGroup(w.pid, syscall.SIGKILL)
			_ = cmd.Wait() // the status is in cmd.ProcessState
			g.exits <- workerExit{idx, exitInfoOf(cmd.ProcessState)}
		}()
	}
	return g, nil
}

// closeWriteEnds closes the parent's copies of the pipes given to a worker
// (not the console files passed through directly).
func (a *agent) closeWriteEnds(cmd *exec.Cmd) {
	for _, w := range []io.Writer{cmd.Stdout, cmd.Stderr} {
		if f, ok := w.(*os.File); ok && f != os.Stdout && f != os.Stderr && w != a.cfg.Stdout && w != a.cfg.Stderr {
			_ = f.Close()
		}
	}
}

// wireOutput connects the worker's stdout and stderr: to the console
// (filtered by --local-ranks-filter), to log files (--redirects, --tee), and
// stderr always to the tail kept for the failure report.
func (a *agent) wireOutput(w *workerProc, cmd *exec.Cmd, wdir string) error {
	shown := a.shown(w.localRank)
	redir, tee := a.cfg.Redirects.For(w.localRank), a.cfg.Tee.For(w.localRank)
	streams := []struct {
		bit     Std
		name    string
		console io.Writer
		dst     *io.Writer
	}{
		{StdOut, "stdout", a.cfg.Stdout, &cmd.Stdout},
		{StdErr, "stderr", a.cfg.Stderr, &cmd.Stderr},
	}
	for _, s := range streams {
		toFile := redir&s.bit != 0 || tee&s.bit != 0
		toConsole := shown && redir&s.bit == 0
		keepTail := s.bit == StdErr
		if !toFile && !keepTail {
			if !toConsole {
				continue // nil: /dev/null
			}
			if f, ok := s.console.(*os.File); ok {
				*s.dst = f // straight to the child: no copy, a tty stays a tty
				continue
			}
		}
		lw := &lineWriter{}
		if toConsole {
			lw.console = a.consoleFor(s.console)
			if tee&s.bit != 0 {
				lw.prefix = fmt.Sprintf("[rank%d]:", w.rank)
			}
		}
		if keepTail {
			lw.tail = w.errTail
		}
		if toFile {
			f, err := os.Create(filepath.Join(wdir, s.name+".log"))
			if err != nil {
				return fmt.Errorf("launch: log file: %w", err)
			}
			lw.file = f
			w.closers = append(w.closers, f)
		}
		w.closers = append([]io.Closer{lw}, w.closers...) // flush before the file closes
		r, wr, err := os.Pipe()
		if err != nil {
			return fmt.Errorf("launch: pipe: %w", err)
		}
		*s.dst = wr
		w.pipes = append(w.pipes, r)
		w.readers.Add(1)
		go func() {
			defer w.readers.Done()
			_, _ = io.Copy(lw, r)
		}()
	}
	return nil
}

func (a *agent) shown(localRank int) bool {
	if a.cfg.LocalRanksFilter == nil {
		return true
	}
	for _, r := range a.cfg.LocalRanksFilter {
		if r == localRank {
			return true
		}
	}
	return false
}

// consoleFor returns the line serialiser of a console writer.
func (a *agent) consoleFor(w io.Writer) *console {
	if w == a.cfg.Stdout {
		return a.stdout
	}
	return a.stderr
}

// finishOutput waits (briefly) for the output pumps, then closes everything.
func (w *workerProc) finishOutput() {
	done := make(chan struct{})
	go func() { w.readers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		// Something outside the worker's process group still holds the
		// pipe; stop reading rather than hang.
		for _, p := range w.pipes {
			_ = p.Close()
		}
		<-done
	}
	for _, p := range w.pipes {
		_ = p.Close()
	}
	for _, c := range w.closers {
		_ = c.Close()
	}
	w.pipes, w.closers = nil, nil
}

// record marks an exit, finishes the worker's output and returns it.
func (g *group) record(e workerExit) *workerProc {
	w := g.workers[e.idx]
	if !w.exited {
		w.exited = true
		w.exit = e.info
		g.alive--
		w.finishOutput()
	}
	return w
}

// stop sends sig to every live worker's process group, waits up to grace
// for them to exit, then SIGKILLs the rest and reaps everything.
func (g *group) stop(sig syscall.Signal, grace time.Duration) {
	for _, w := range g.workers {
		if !w.exited {
			killGroup(w.pid, sig)
		}
	}
	killed := sig == syscall.SIGKILL
	timer := time.NewTimer(grace)
	defer timer.Stop()
	hard := time.NewTimer(grace + 30*time.Second)
	defer hard.Stop()
	for g.alive > 0 {
		select {
		case e := <-g.exits:
			g.record(e)
		case <-timer.C:
			if !killed {
				killed = true
				for _, w := range g.workers {
					if !w.exited {
						killGroup(w.pid, syscall.SIGKILL)
					}
				}
			}
		case <-hard.C:
			// A process stuck in the kernel (D state) ignores SIGKILL; do
			// not hang the launcher on it.
			return
		}
	}
}

// failureOf builds the report of a worker that exited badly.
func (a *agent) failureOf(w *workerProc, asg *assignment, attempt int) WorkerFailure {
	f := WorkerFailure{
		Rank: w.rank, LocalRank: w.localRank, GroupRank: asg.GroupRank, Host: a.host,
		PID: w.pid, ExitCode: w.exit.code, Signal: w.exit.signal, Time: w.exit.time,
		StderrTail: w.errTail.get(), Attempt: attempt,
	}
	if rec, err := ReadErrorFile(w.errorFile); err == nil && rec != nil {
		f.Record, f.ErrorFile = rec, w.errorFile
	}
	return f
}
