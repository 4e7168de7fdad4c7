package comm

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A job's fingerprint: what a rank can see of the job it was started for.
// Rank 0 publishes its own in the job record, and every other rank compares
// its own with it before it claims a slot (rendezvous.go), so that a rank
// of another job is refused before it takes anyone's place.
//
// Two jobs started by hand (no launcher, no token, no run id) on one
// MASTER_PORT meet in one store: the second job's rank 0 cannot listen and
// fails, but its rank 1 reaches the first job's store. Before issue 43 it
// took the first job's rank 1's place, and the first job's rank 0
// all-reduced the stranger's data (1·1 + 100·2 = 201) without a word. torch
// does the same. A token or a run id tells the jobs apart; the fingerprint
// does it without either, from what differs between two jobs on one host:
// the program and its arguments (and the world size, which is also checked
// on its own). Two jobs of the same program with the same arguments still
// look alike, even when started from different directories: they need a
// token, a run id or ports of their own.
//
// The working directory is shown in the messages but not compared: the
// ranks of one job started by hand may each run in a directory of their
// own, to keep their files apart (this repository's end-to-end harness
// starts them so), and refusing those would break jobs that ran before.
//
// With a run id (GODDP_RUN_ID, TORCHELASTIC_RUN_ID, SLURM_JOB_ID) on either
// side, the run id alone is the fingerprint. A launcher gives one to every
// rank of a job and to no other job (ddprun's and torchrun's rendezvous
// id, Slurm's job id), so it names the job better than anything a rank
// sees of itself; and the ranks a launcher starts may legitimately differ
// in exactly those things: srun --chdir or a checkout at another path on
// each node, the program installed in different places, arguments the
// launcher adds per rank. A run id on one side only is a mismatch.
//
// Without a run id, the program's path is compared only between ranks on
// one host: a job whose ranks were started by hand on several hosts (which
// takes a token, as the store is then reachable from the network) may have
// its checkout at another path on each; the program's file name and the
// arguments must still match.
//
// A rank that rank 0's process started (its parent, or an ancestor, on
// this host) is of rank 0's job whatever its fingerprint: a program that
// re-executes itself as the job's other ranks may pass them other
// arguments (ddp's BenchmarkDDPStep runs rank 0 in the benchmark and rank
// 1 as a child with arguments of its own).

// jobPrint is a rank's fingerprint, as it presents it in its claim.
type jobPrint struct {
	// Program is os.Executable(), or os.Args[0] where that fails. A binary
	// that go run or go test built lives in a fresh go-build directory per
	// process, so for those it is the file name alone (programName).
	Program string `json:"program"`
	// Args are os.Args[1:] less the flags that differ per rank (rankArgs),
	// cut for messages (showArgs); ArgsSum is the hash of them uncut,
	// which is what is compared.
	Args    []string `json:"args,omitempty"`
	ArgsSum string   `json:"args_sum"`
	Cwd     string   `json:"cwd"` // shown, not compared
	World   int      `json:"world"`
	Run     string   `json:"run,omitempty"` // the run id given, "" when none
}

// thisJob is the fingerprint of the job this process was started for.
func thisJob(cfg Config) jobPrint {
	if cfg.print != nil {
		p := *cfg.print
		p.World, p.Run = cfg.WorldSize, cfg.RunID
		return p
	}
	exe, err := os.Executable()
	if err != nil || exe == "" {
		exe = os.Args[0]
	}
	cwd, _ := os.Getwd()
	return newJobPrint(programName(exe), os.Args[1:], cwd, cfg.WorldSize, cfg.RunID)
}

func newJobPrint(program string, args []string, cwd string, world int, run string) jobPrint {
	args = jobArgs(args)
	h := sha256.New()
	for _, a := range args {
		fmt.Fprintf(h, "%d:%s", len(a), a)
	}
	return jobPrint{Program: program, Args: showArgs(args), ArgsSum: hex.EncodeToString(h.Sum(nil)[:8]),
		Cwd: cwd, World: world, Run: run}
}

// programName is exe, or its file name when go run or go test built it
// into a go-build work directory ($GOTMPDIR/go-build<random>/b001/...),
// which differs from one process to the next.
func programName(exe string) string {
	for _, dir := range strings.Split(filepath.Dir(exe), string(filepath.Separator)) {
		if strings.HasPrefix(dir, "go-build") {
			return filepath.Base(exe) + " (built by go run or go test)"
		}
	}
	return exe
}

// rankFlags are the flags that legitimately differ between the ranks of
// one job started by hand, named without dashes, underscores or case: the
// rank itself (--rank, torch.distributed.launch's --local_rank, a
// --node-rank) and the device a rank drives (--device cuda:1, --gpu 1).
// RANK, LOCAL_RANK and the other launcher variables are in the
// environment, which the fingerprint does not read. A per-rank argument
// of another form (a positional rank, say) makes the ranks look like
// different jobs: set one GODDP_RUN_ID on every rank, which then alone is
// the fingerprint.
var rankFlags = map[string]bool{
	"rank": true, "localrank": true, "noderank": true, "globalrank": true, "grouprank": true,
	"device": true, "gpu": true, "gpuid": true,
}

// jobArgs is args less the per-rank flags, in either form: --rank=1, or
// --rank 1 when the next argument is not itself a flag. Nothing after "--"
// is a flag.
func jobArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if !isFlag(a) {
			out = append(out, a)
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		name = strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(name))
		if !rankFlags[name] {
			out = append(out, a)
			continue
		}
		if !hasValue && i+1 < len(args) && !isFlag(args[i+1]) {
			i++ // the flag's value
		}
	}
	return out
}

// isFlag reports whether a looks like a flag (-x, --x), not a value (a
// negative number, "-" for stdin).
func isFlag(a string) bool {
	if len(a) < 2 || a[0] != '-' {
		return false
	}
	_, err := strconv.ParseFloat(a, 64)
	return err != nil
}

// Bounds of the arguments a claim carries for messages; ArgsSum covers
// them all.
const (
	showArgsMax   = 16
	showArgBytes  = 80
	showArgsBytes = 512
)

// showArgs cuts args for a message: a long command line would bloat every
// claim in the store and every error.
func showArgs(args []string) []string {
	out := make([]string, 0, min(len(args), showArgsMax+1))
	total := 0
	for i, a := range args {
		if i == showArgsMax || total >= showArgsBytes {
			return append(out, fmt.Sprintf("... (%d more)", len(args)-i))
		}
		if len(a) > showArgBytes {
			a = a[:showArgBytes] + "..."
		}
		total += len(a)
		out = append(out, a)
	}
	return out
}

// sum is the fingerprint as one short hash, for messages: of the parts
// that can be compared (not the working directory).
func (p jobPrint) sum() string {
	h := sha256.New()
	fmt.Fprintf(h, "%q %q %d %q", p.Program, p.ArgsSum, p.World, p.Run)
	return hex.EncodeToString(h.Sum(nil)[:6])
}

// String shows every part, so that an error names what differs.
func (p jobPrint) String() string {
	run := "no run id"
	if p.Run != "" {
		run = fmt.Sprintf("run id %q", p.Run)
	}
	return fmt.Sprintf("program %s, arguments %q, cwd %s, world %d, %s (fingerprint %s)",
		p.Program, p.Args, p.Cwd, p.World, run, p.sum())
}

// startedBy reports whether this process descends from m's: m runs on
// this host, in this pid namespace, and is this process's parent or an
// ancestor of it.
func startedBy(m member) bool {
	me := newMember(Config{})
	if m.Host != me.Host || m.PidNS != me.PidNS || m.Pid <= 1 {
		return false
	}
	pid := os.Getppid()
	for range 64 { // a bound on the walk; process trees are not that deep
		if pid == m.Pid {
			return true
		}
		if pid <= 1 {
			return false
		}
		pid = parentOf(pid)
	}
	return false
}

// parentOf is pid's parent (field 4 of /proc/<pid>/stat), 0 when unknown.
func parentOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name may hold spaces and parentheses: the fields resume
	// after the last ')': state ppid ...
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// differs names the parts of the job in which p and rank 0's q differ
// (nil when they are the same job); sameHost says the two ranks run on
// one host, where paths can be compared.
func (p jobPrint) differs(q jobPrint, sameHost bool) []string {
	var d []string
	if p.Run != "" || q.Run != "" {
		if p.Run != q.Run {
			d = append(d, "run id")
		}
	} else {
		program := p.Program != q.Program
		if !sameHost {
			program = filepath.Base(p.Program) != filepath.Base(q.Program)
		}
		if program {
			d = append(d, "program")
		}
		if p.ArgsSum != q.ArgsSum {
			d = append(d, "arguments")
		}
	}
	// The world size alone is a mistake in this job's settings, which the
	// rendezvous fails for every rank; beside another difference it is
	// one more sign of another job.
	if len(d) > 0 && p.World != q.World {
		d = append(d, "world size")
	}
	return d
}
