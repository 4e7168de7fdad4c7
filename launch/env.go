package launch

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/goddp/goddp/internal/threadenv"
)

// Environment variables set for every worker. The torch names are the
// contract (comm.ConfigFromEnv reads them); the GODDP_ ones are goddp's.
const (
	EnvRank           = "RANK"
	EnvLocalRank      = "LOCAL_RANK"
	EnvWorldSize      = "WORLD_SIZE"
	EnvLocalWorldSize = "LOCAL_WORLD_SIZE"
	EnvGroupRank      = "GROUP_RANK"
	EnvGroupWorldSize = "GROUP_WORLD_SIZE"
	EnvRoleRank       = "ROLE_RANK"
	EnvRoleName       = "ROLE_NAME"
	EnvRoleWorldSize  = "ROLE_WORLD_SIZE"
	EnvMasterAddr     = "MASTER_ADDR"
	EnvMasterPort     = "MASTER_PORT"
	EnvRestartCount   = "TORCHELASTIC_RESTART_COUNT"
	EnvMaxRestarts    = "TORCHELASTIC_MAX_RESTARTS"
	EnvRunID          = "TORCHELASTIC_RUN_ID"
	EnvUseAgentStore  = "TORCHELASTIC_USE_AGENT_STORE"
	EnvTorchErrorFile = "TORCHELASTIC_ERROR_FILE"

	// EnvToken carries the job token; the launcher uses the one in its own
	// environment or generates one. It is never printed.
	EnvToken = "GODDP_TOKEN"
	// EnvStoreHosted is "1" when the launcher hosts the workers' store at
	// MASTER_ADDR:MASTER_PORT, so every worker connects as a client.
	EnvStoreHosted = "GODDP_STORE_HOSTED"
	// EnvErrorFile is where RecordError writes (per worker, per attempt).
	EnvErrorFile = "GODDP_ERROR_FILE"
	// EnvNumThreads is set to cores/nproc when neither it nor
	// OMP_NUM_THREADS holds a positive count (tensor.ThreadsFromEnv reads
	// it).
	EnvNumThreads = threadenv.Key
	EnvOMPThreads = threadenv.OMPKey
	// EnvMaxProcs (Go's GOMAXPROCS) is set to that share plus one when the
	// launcher sets GODDP_NUM_THREADS below the core count and GOMAXPROCS
	// is unset: see maxProcsFor.
	EnvMaxProcs = "GOMAXPROCS"
	// EnvRequiresGPU=1 makes the launcher check with NVML that a GPU exists
	// before it starts PROGRAM, as it does for binaries that link
	// gorgonia.org/cu.
	EnvRequiresGPU = "GODDP_REQUIRES_GPU"
	// GODDP_ aliases of the torchelastic names.
	EnvGoddpRestartCount = "GODDP_RESTART_COUNT"
	EnvGoddpMaxRestarts  = "GODDP_MAX_RESTARTS"
	EnvGoddpRunID        = "GODDP_RUN_ID"

	// envSpawnFunc selects the child path of a binary started by Spawn.
	envSpawnFunc = "GODDP_SPAWN_FUNC"
)

// workerSpec is what one worker needs to know about its place in the job.
type workerSpec struct {
	Rank, LocalRank, WorldSize, LocalWorldSize int
	GroupRank, GroupWorldSize                  int
	MasterAddr                                 string
	MasterPort                                 int
	RestartCount, MaxRestarts                  int
	RunID, Token, ErrorFile                    string
	StoreHosted                                bool
	Threads                                    int // 0: leave the thread env alone
	MaxProcs                                   int // 0: leave GOMAXPROCS alone
}

// workerEnv returns base with the worker's variables set (replacing any
// inherited value, e.g. from an outer launcher).
func workerEnv(base []string, s workerSpec) []string {
	set := map[string]string{
		EnvRank:              strconv.Itoa(s.Rank),
		EnvLocalRank:         strconv.Itoa(s.LocalRank),
		EnvWorldSize:         strconv.Itoa(s.WorldSize),
		EnvLocalWorldSize:    strconv.Itoa(s.LocalWorldSize),
		EnvGroupRank:         strconv.Itoa(s.GroupRank),
		EnvGroupWorldSize:    strconv.Itoa(s.GroupWorldSize),
		EnvRoleRank:          strconv.Itoa(s.Rank),
		EnvRoleName:          "default",
		EnvRoleWorldSize:     strconv.Itoa(s.WorldSize),
		EnvMasterAddr:        s.MasterAddr,
		EnvMasterPort:        strconv.Itoa(s.MasterPort),
		EnvRestartCount:      strconv.Itoa(s.RestartCount),
		EnvMaxRestarts:       strconv.Itoa(s.MaxRestarts),
		EnvRunID:             s.RunID,
		EnvGoddpRestartCount: strconv.Itoa(s.RestartCount),
		EnvGoddpMaxRestarts:  strconv.Itoa(s.MaxRestarts),
		EnvGoddpRunID:        s.RunID,
		EnvToken:             s.Token,
		EnvErrorFile:         s.ErrorFile,
		EnvTorchErrorFile:    s.ErrorFile,
	}
	drop := map[string]bool{EnvStoreHosted: true, EnvUseAgentStore: true}
	if s.StoreHosted {
		set[EnvStoreHosted] = "1"
		set[EnvUseAgentStore] = "True"
	}
	if s.Threads > 0 {
		set[EnvNumThreads] = strconv.Itoa(s.Threads)
	}
	if s.MaxProcs > 0 {
		set[EnvMaxProcs] = strconv.Itoa(s.MaxProcs)
	}
	out := make([]string, 0, len(base)+len(set))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, over := set[k]; over || drop[k] {
			continue
		}
		out = append(out, kv)
	}
	for k, v := range set {
		out = append(out, k+"="+v)
	}
	return out
}

// threadsFor is cores/nproc (at least 1) when the environment asks for no
// thread count (neither GODDP_NUM_THREADS nor OMP_NUM_THREADS holds a
// positive integer, as the workers' tensor.ThreadsFromEnv reads them), and 0
// (leave alone) otherwise.
func threadsFor(env []string, nproc int) int {
	lookup := func(key string) (string, bool) { v := lookupEnv(env, key); return v, v != "" }
	if threadenv.Parse(lookup) > 0 {
		return 0
	}
	return max(1, runtime.NumCPU()/max(1, nproc))
}

// maxProcsFor is the GOMAXPROCS to give each worker: threads (the share of
// cores threadsFor picked) plus one, at most ncpu, when threads is below
// ncpu and the environment does not set GOMAXPROCS, else 0 (leave alone).
// It is torchrun's OMP_NUM_THREADS=1 rule carried over to the Go runtime,
// with one P to spare. A worker's runtime otherwise sizes itself to the
// whole node, and its GC workers, timers and communication goroutines run
// on the cores the other ranks compute on.
//
// The spare P is for the compute goroutine's long C calls (oneDNN and
// OpenBLAS products, tens of microseconds to milliseconds each). With one
// P, the runtime's monitor takes the P from a goroutine that has been in C
// for 20 µs, wakes every 20 µs while such calls go on, and hands the P to
// whatever goroutine is queued (the communication and loader goroutines),
// so the compute goroutine, back from C, can wait a scheduling slice for
// it. With a second P idle the monitor leaves the first alone for 10 ms,
// and a goroutine back from C finds a P. 2 ranks on 2 cores (Zen 4, world
// 2, interleaved rounds, samples/s): examples/gpt 851-933 with GOMAXPROCS=1
// against 956-959 with 2, cnn 2152-2187 against 2222-2274, gpt under
// -amp bf16 1338-1372 against 1416-1429; examples/mlp, whose work is
// mostly Go, the same with either (medians 32.9k), where an earlier
// machine had measured 33.2k with the default and 39.0k with 1.
func maxProcsFor(env []string, threads, ncpu int) int {
	if threads <= 0 || threads >= ncpu || lookupEnv(env, EnvMaxProcs) != "" {
		return 0
	}
	return min(threads+1, ncpu)
}

// lookupEnv reads key from an environment list; the last value wins, as in exec.
func lookupEnv(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// newToken returns 32 random bytes, hex encoded.
func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// newRunID is a short random id for --standalone and Spawn.
func newRunID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "localhost"
	}
	return h
}
