package comm

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goddp/goddp/internal/proctest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rawWorkers run in rank processes as they are, without runTestWorker.
var rawWorkers = map[string]func() error{
	"byhand": byHandWorker,
}

// byHandWorker is a rank of a job started by hand: it all-reduces
// scale·(rank+1), scale from its --scale argument, and prints the sum.
// With GODDP_TEST_GO_AHEAD set it first waits for that file to exist.
func byHandWorker() error {
	scale := 0.0
	for _, a := range os.Args[1:] {
		if v, ok := strings.CutPrefix(a, "--scale="); ok {
			scale, _ = strconv.ParseFloat(v, 64)
		}
	}
	if f := os.Getenv("GODDP_TEST_GO_AHEAD"); f != "" {
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(f); err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("no %s after 60s", f)
			}
		}
	}
	ctx := context.Background()
	pg, err := InitFromEnv(ctx)
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	defer pg.Close()
	x := []float64{scale * float64(pg.Rank()+1)}
	if err := pg.AllReduce(Float64s(x), Sum).Wait(ctx); err != nil {
		return err
	}
	fmt.Printf("RESULT %v\n", x[0])
	return nil
}

// TestInitByHandStranger: two jobs started by hand, with no launcher, no
// token and no run id, on one MASTER_PORT, each of 2 ranks that all-reduce
// scale·(rank+1): job A with --scale=1, job B with --scale=100. A's rank 0
// hosts the store; B's rank 0 finds the port taken and fails; B's rank 1
// reaches A's store before A's rank 1 has come. Before issue 43 it took
// A's rank 1's place and A's rank 0 printed 201 (1·1 + 100·2); A's own
// rank 1 was then refused as a second rank 1. Now B's rank 1 is refused
// at once, naming both jobs' fingerprints, and A, which waited for its own
// rank 1, sums its own data: 1·1 + 1·2 = 3.
func TestInitByHandStranger(t *testing.T) {
	port := strconv.Itoa(freePort(t))
	goAhead := filepath.Join(t.TempDir(), "go-ahead")
	// By hand: none of the harness's or a launcher's variables.
	env := []string{"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port, "GODDP_BACKEND=tcp", "GODDP_TIMEOUT=60s",
		"GODDP_STORE_HOSTED=", "GODDP_TOKEN=", "GODDP_RUN_ID=", "TORCHELASTIC_RUN_ID=", "SLURM_JOB_ID=",
		"GODDP_RESTART_COUNT=", "TORCHELASTIC_RESTART_COUNT=", "TORCHELASTIC_USE_AGENT_STORE="}
	job := func(scale string, rankEnv func(int) []string) proctest.Options {
		return proctest.Options{Worker: "byhand", World: 2, NoStore: true, KeepGoing: true, Timeout: 90 * time.Second,
			Args: []string{"-test.run=^$", "--scale=" + scale}, Env: env, RankEnv: rankEnv}
	}
	a := proctest.Start(t, job("1", func(r int) []string {
		if r == 1 {
			return []string{"GODDP_TEST_GO_AHEAD=" + goAhead}
		}
		return nil
	}))
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 30*time.Second, 10*time.Millisecond, "job A's rank 0 hosts the store")

	b := proctest.Run(t, job("100", nil))
	for _, r := range b {
		t.Logf("job B rank %d (exit %d): %s", r.Rank, r.Code, r.Output())
	}
	assert.Equal(t, 3, b[0].Code)
	assert.Contains(t, b[0].Stderr, "is another job using port "+port)
	assert.Equal(t, 3, b[1].Code, "job B's rank 1 is refused")
	assert.NotContains(t, b[1].Stdout, "RESULT")
	msg := b[1].Stderr
	for _, want := range []string{
		"rank 1: this rank was started for another job than the one at 127.0.0.1:" + port,
		"they differ in arguments; refusing to join it",
		`This rank: program comm.test (built by go run or go test), arguments ["-test.run=^$" "--scale=100"], cwd `,
		`Rank 0: program comm.test (built by go run or go test), arguments ["-test.run=^$" "--scale=1"], cwd `,
		"world 2, no run id (fingerprint ",
		"GODDP_RUN_ID",
	} {
		assert.Contains(t, msg, want)
	}

	require.NoError(t, os.WriteFile(goAhead, nil, 0o644))
	res := a.Wait()
	proctest.RequireSuccess(t, res)
	for _, r := range res {
		assert.Contains(t, r.Stdout, "RESULT 3\n", "job A's rank %d sums its own job's data", r.Rank)
	}
	assert.Contains(t, res[0].Stderr, "comm: rank 0: WARNING: a process started as rank 1: pid ")
	assert.Contains(t, res[0].Stderr, "of another job (program ")
}

// TestInitChildOfRankZero: a program that is rank 0 itself and starts
// rank 1 as a child with other arguments (ddp's BenchmarkDDPStep does) is
// one job: rank 1 descends from rank 0's process, so its fingerprint is
// not held against it.
func TestInitChildOfRankZero(t *testing.T) {
	port := freePort(t)
	child := proctest.Start(t, proctest.Options{Worker: "byhand", World: 1, NoStore: true, Timeout: 90 * time.Second,
		Args: []string{"-test.run=^$", "--scale=1"},
		Env: []string{"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + strconv.Itoa(port), "GODDP_BACKEND=tcp", "GODDP_TIMEOUT=60s",
			"GODDP_STORE_HOSTED=", "GODDP_TOKEN=", "GODDP_RUN_ID=", "TORCHELASTIC_RUN_ID=", "SLURM_JOB_ID=",
			"GODDP_RESTART_COUNT=", "TORCHELASTIC_RESTART_COUNT=", "TORCHELASTIC_USE_AGENT_STORE="},
		RankEnv: func(int) []string { return []string{"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2"} }})
	r0 := goInit(t, "rank 0", Config{Backend: "tcp", Rank: 0, WorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: port,
		Timeout: 60 * time.Second}, allReduceRank)
	require.NoError(t, r0.wait(t))
	res := child.Wait()
	proctest.RequireSuccess(t, res)
	assert.Contains(t, res[0].Stdout, "RESULT 3\n")
}

// TestInitFingerprintStranger: a rank whose program, arguments, working
// directory or run id is another job's is refused at once, naming what
// differs and both fingerprints; the job it tried to join goes on waiting,
// and runs with its own rank 1 when that comes. With one run id on every
// rank the run id alone names the job, whatever the paths.
func TestInitFingerprintStranger(t *testing.T) {
	job := newJobPrint("/opt/train", []string{"--lr=0.1", "--rank", "0"}, "/home/a", 0, "")
	for _, tc := range []struct {
		name     string
		jobRun   string
		stranger jobPrint
		run      string
		differs  string // "" for a rank of this job
	}{
		{"program", "", newJobPrint("/opt/eval", []string{"--lr=0.1"}, "/home/a", 0, ""), "", "program"},
		{"arguments", "", newJobPrint("/opt/train", []string{"--lr=0.01"}, "/home/a", 0, ""), "", "arguments"},
		{"another working directory alone", "", newJobPrint("/opt/train", []string{"--lr=0.1"}, "/home/a/rank1", 0, ""), "", ""},
		{"no run id", "jobA", job, "", "run id"},
		{"same run id, other paths", "jobA", newJobPrint("/srv/train", []string{"--x"}, "/scratch", 0, ""), "jobA", ""},
		{"only the rank flag differs", "", newJobPrint("/opt/train", []string{"--lr=0.1", "--rank=1"}, "/home/a", 0, ""), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := freePort(t)
			var log logSink
			cfg := func(p jobPrint, run string, rank int) Config {
				return Config{Backend: "tcp", Rank: rank, WorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: port,
					Timeout: 20 * time.Second, Logf: log.logf, RunID: run, print: &p}
			}
			a0 := goInit(t, "A rank 0", cfg(job, tc.jobRun, 0), allReduceRank)
			if tc.differs == "" {
				r1 := goInit(t, "rank 1", cfg(tc.stranger, tc.run, 1), allReduceRank)
				require.NoError(t, r1.wait(t))
				require.NoError(t, a0.wait(t))
				return
			}
			s := goInit(t, "stranger", cfg(tc.stranger, tc.run, 1), nil)
			err := s.wait(t)
			require.Error(t, err)
			t.Logf("stranger after %v: %v", s.took.Round(time.Millisecond), err)
			assert.ErrorIs(t, err, ErrBadArgument)
			assert.Less(t, s.took, 5*time.Second, "refused at once")
			assert.Contains(t, err.Error(), "they differ in "+tc.differs+"; refusing to join it")
			mine, theirs := tc.stranger, job
			mine.World, mine.Run, theirs.World, theirs.Run = 2, tc.run, 2, tc.jobRun
			assert.Contains(t, err.Error(), "This rank: "+mine.String())
			assert.Contains(t, err.Error(), "Rank 0: "+theirs.String())
			require.Eventually(t, func() bool { return strings.Contains(log.text(), "WARNING: a process started as rank 1") },
				5*time.Second, 10*time.Millisecond, "the rank hosting the store reports the stranger")

			select {
			case <-a0.done:
				t.Fatalf("the job ended with the stranger refused and its rank 1 not come: %v", a0.err)
			default:
			}
			a1 := goInit(t, "A rank 1", cfg(job, tc.jobRun, 1), allReduceRank)
			require.NoError(t, a1.wait(t))
			require.NoError(t, a0.wait(t), "the job runs with its own rank 1")
		})
	}
}

// TestInitFingerprintTimeoutNote: the job waiting for a rank whose place
// a stranger tried to take names the stranger in its timeout.
func TestInitFingerprintTimeoutNote(t *testing.T) {
	port := freePort(t)
	cfg := func(p jobPrint, rank int, timeout time.Duration) Config {
		return Config{Backend: "tcp", Rank: rank, WorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: port, Timeout: timeout, print: &p,
			Logf: func(string, ...any) {}}
	}
	a0 := goInit(t, "A rank 0", cfg(newJobPrint("/opt/train", nil, "/a", 0, ""), 0, 2*time.Second), nil)
	s := goInit(t, "stranger", cfg(newJobPrint("/opt/eval", nil, "/b", 0, ""), 1, 20*time.Second), nil)
	require.Error(t, s.wait(t))
	err := a0.wait(t)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrTimeout)
	assert.Contains(t, err.Error(), "waiting for rank 1 to join")
	assert.Contains(t, err.Error(), "of another job (program /opt/eval, arguments [], cwd /b")
	assert.Contains(t, err.Error(), "it differs in program), was refused")
}

func TestJobArgs(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"--rank", "1", "--lr", "0.1"}, []string{"--lr", "0.1"}},
		{[]string{"--rank=1", "data.txt"}, []string{"data.txt"}},
		{[]string{"--local_rank=0", "cfg.yaml"}, []string{"cfg.yaml"}}, // torch.distributed.launch
		{[]string{"-local-rank", "3", "--epochs=2"}, []string{"--epochs=2"}},
		{[]string{"--localRank", "3", "--node-rank", "1"}, []string{}},
		{[]string{"--device", "cuda:1", "--bs", "32"}, []string{"--bs", "32"}},
		{[]string{"--gpu", "--verbose"}, []string{"--verbose"}}, // no value
		{[]string{"--rank", "-1"}, []string{}},                  // a negative number is a value
		{[]string{"--ranking=3", "-r", "1"}, []string{"--ranking=3", "-r", "1"}},
		{[]string{"--", "--rank", "1"}, []string{"--", "--rank", "1"}},
	} {
		assert.Equal(t, tc.want, jobArgs(tc.in), "%q", tc.in)
	}
}

func TestJobPrint(t *testing.T) {
	assert.Equal(t, "main (built by go run or go test)", programName("/tmp/go-build1234567/b001/exe/main"))
	assert.Equal(t, "/usr/local/bin/train", programName("/usr/local/bin/train"))

	p := newJobPrint("/opt/train", []string{"--lr=0.1"}, "/home/a", 2, "")
	withRun := p
	withRun.Run = "r1"
	for _, tc := range []struct {
		name     string
		q, p     jobPrint // q presents itself to the job of rank 0's p
		sameHost bool
		want     []string
	}{
		{"same", p, p, true, nil},
		{"program", newJobPrint("/opt/eval", []string{"--lr=0.1"}, "/home/a", 2, ""), p, true, []string{"program"}},
		{"paths elsewhere", newJobPrint("/srv/train", []string{"--lr=0.1"}, "/scratch", 2, ""), p, false, nil},
		{"program name elsewhere", newJobPrint("/srv/eval", []string{"--lr=0.1"}, "/home/a", 2, ""), p, false, []string{"program"}},
		{"cwd is not compared", newJobPrint("/opt/train", []string{"--lr=0.1"}, "/home/b", 2, ""), p, true, nil},
		{"args and world", newJobPrint("/opt/train", nil, "/home/a", 3, ""), p, true, []string{"arguments", "world size"}},
		{"world alone is this job's mistake", newJobPrint("/opt/train", []string{"--lr=0.1"}, "/home/a", 3, ""), p, true, nil},
		{"run id on one side", withRun, p, true, []string{"run id"}},
		{"run id on rank 0's side", p, withRun, true, []string{"run id"}},
		{"run id alone", newJobPrint("/x", nil, "/y", 2, "r1"), withRun, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.q.differs(tc.p, tc.sameHost))
		})
	}

	// A long command line is cut in the claim, and compared whole.
	long := make([]string, 40)
	for i := range long {
		long[i] = strings.Repeat("x", 100) + strconv.Itoa(i)
	}
	lp := newJobPrint("/opt/train", long, "/a", 2, "")
	require.Len(t, lp.Args, 8)
	assert.Equal(t, strings.Repeat("x", 80)+"...", lp.Args[0])
	assert.Equal(t, "... (33 more)", lp.Args[7])
	long[39] = "changed"
	assert.NotEqual(t, lp.ArgsSum, newJobPrint("/opt/train", long, "/a", 2, "").ArgsSum)
}
