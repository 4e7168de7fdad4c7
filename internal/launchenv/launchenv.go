package launchenv

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ErrMalformed is wrapped by every error Parse returns.
var ErrMalformed = errors.New("launchenv: malformed launcher environment")

// Env is a process's place in the job.
type Env struct {
	// Rank and WorldSize are 0 and 1 when no launcher variable is set.
	Rank, WorldSize int
	// LocalRank and LocalWorldSize are meaningful only when HasLocal.
	LocalRank, LocalWorldSize int
	HasLocal                  bool
	// Launcher names the launcher whose variables gave Rank and WorldSize
	// ("torchrun", "OpenMPI", "MPICH", "Slurm"), or is empty when none did.
	Launcher string
	// RankKey and WorldSizeKey are the variables they came from.
	RankKey, WorldSizeKey string
}

// launcher is one launcher's pair of variables.
type launcher struct{ name, rank, world string }

func launchers() [4]launcher {
	return [...]launcher{
		{"torchrun", "RANK", "WORLD_SIZE"},
		{"OpenMPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
		{"MPICH", "PMI_RANK", "PMI_SIZE"},
		{"Slurm", "SLURM_PROCID", "SLURM_NTASKS"},
	}
}

// Parse reads the topology from lookup (os.LookupEnv, or a map in tests);
// see the package doc for the variables and rules. Errors wrap ErrMalformed.
func Parse(lookup func(key string) (string, bool)) (Env, error) {
	get := func(key string) (string, bool) {
		v, ok := lookup(key)
		v = strings.TrimSpace(v)
		return v, ok && v != ""
	}
	num := func(key, v string) (int, error) {
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, fmt.Errorf("%w: %s=%q is not an integer", ErrMalformed, key, v)
		}
		return n, nil
	}
	e := Env{WorldSize: 1}
	for _, l := range launchers() {
		rv, hasR := get(l.rank)
		wv, hasW := get(l.world)
		if !hasR && !hasW {
			continue
		}
		if hasR != hasW {
			set, unset := l.rank, l.world
			if hasW {
				set, unset = l.world, l.rank
			}
			return Env{}, fmt.Errorf("%w: %s is set but %s is not (%s sets both; set both, or neither for a single process)",
				ErrMalformed, set, unset, l.name)
		}
		var err error
		if e.Rank, err = num(l.rank, rv); err != nil {
			return Env{}, err
		}
		if e.WorldSize, err = num(l.world, wv); err != nil {
			return Env{}, err
		}
		if e.WorldSize < 1 {
			return Env{}, fmt.Errorf("%w: %s=%d: the world size must be at least 1", ErrMalformed, l.world, e.WorldSize)
		}
		if e.Rank < 0 || e.Rank >= e.WorldSize {
			return Env{}, fmt.Errorf("%w: %s=%d is outside [0, %d) given by %s=%d", ErrMalformed, l.rank, e.Rank, e.WorldSize, l.world, e.WorldSize)
		}
		e.Launcher, e.RankKey, e.WorldSizeKey = l.name, l.rank, l.world
		break
	}
	first := func(keys ...string) (int, string, bool, error) {
		for _, k := range keys {
			if v, ok := get(k); ok {
				n, err := num(k, v)
				return n, k, true, err
			}
		}
		return 0, "", false, nil
	}
	lr, lrKey, hasLR, err := first("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID")
	if err != nil {
		return Env{}, err
	}
	lws, lwsKey, hasLWS, err := first("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE")
	if err != nil {
		return Env{}, err
	}
	if !hasLWS {
		if lws, lwsKey, hasLWS, err = slurmTasksOnNode(get); err != nil {
			return Env{}, err
		}
	}
	if !hasLR || !hasLWS {
		return e, nil
	}
	if lws < 1 || lws > e.WorldSize {
		return Env{}, fmt.Errorf("%w: %s=%d: the local world size must be in [1, %d] (the world size)", ErrMalformed, lwsKey, lws, e.WorldSize)
	}
	if lr < 0 || lr >= lws {
		return Env{}, fmt.Errorf("%w: %s=%d is outside [0, %d) given by %s", ErrMalformed, lrKey, lr, lws, lwsKey)
	}
	e.LocalRank, e.LocalWorldSize, e.HasLocal = lr, lws, true
	return e, nil
}

// FromEnv is Parse over the process environment.
func FromEnv() (Env, error) { return Parse(os.LookupEnv) }

// slurmTasksOnNode reads this node's task count from Slurm's compressed
// per-node list ("2(x3),1": three nodes with 2 tasks, then one with 1) at
// index SLURM_NODEID. It reports nothing found unless both are set.
func slurmTasksOnNode(get func(string) (string, bool)) (int, string, bool, error) {
	node, hasNode := get("SLURM_NODEID")
	key := "SLURM_STEP_TASKS_PER_NODE"
	list, hasList := get(key)
	if !hasList {
		key = "SLURM_TASKS_PER_NODE"
		list, hasList = get(key)
	}
	if !hasNode || !hasList {
		return 0, "", false, nil
	}
	id, err := strconv.Atoi(node)
	if err != nil || id < 0 {
		return 0, "", false, fmt.Errorf("%w: SLURM_NODEID=%q is not a node index", ErrMalformed, node)
	}
	at := 0
	for _, item := range strings.Split(list, ",") {
		count, reps := item, "1"
		if i := strings.Index(item, "(x"); i >= 0 && strings.HasSuffix(item, ")") {
			count, reps = item[:i], item[i+2:len(item)-1]
		}
		n, err1 := strconv.Atoi(count)
		r, err2 := strconv.Atoi(reps)
		if err1 != nil || err2 != nil || n < 0 || r < 1 {
			return 0, "", false, fmt.Errorf("%w: %s=%q: bad item %q (want N or N(xR))", ErrMalformed, key, list, item)
		}
		if id-at < r { // at <= id here, so this cannot overflow
			return n, key + "[SLURM_NODEID=" + node + "]", true, nil
		}
		at += r
	}
	return 0, "", false, fmt.Errorf("%w: SLURM_NODEID=%d but %s=%q lists %d nodes", ErrMalformed, id, key, list, at)
}
