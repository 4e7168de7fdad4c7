// Command worker is the test worker of package launch and cmd/ddprun: each
// -mode exercises one launcher behaviour. It prints "WORKER {json}" lines
// that the tests parse. It never prints the job token, only a hash of it.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/launch"
)

func main() {
	mode := flag.String("mode", "env", "env | fail | sleep | restart | child | recorderr | panic | store | until-nodes | allreduce")
	failRank := flag.Int("fail-rank", 0, "rank that fails (fail, restart)")
	code := flag.Int("code", 3, "exit code of the failing rank (store: 0 = nobody fails)")
	delay := flag.Duration("delay", 300*time.Millisecond, "wait before failing")
	until := flag.Int("until", 1, "restart: fail while TORCHELASTIC_RESTART_COUNT < until")
	nodes := flag.Int("nodes", 2, "until-nodes: succeed once GROUP_WORLD_SIZE reaches this")
	ignoreTerm := flag.Bool("ignore-term", false, "sleep: ignore SIGTERM (needs SIGKILL)")
	flag.Parse()
	defer launch.RecordPanic()

	rank, _ := strconv.Atoi(os.Getenv("RANK"))
	if *mode == "sleep" {
		// Catch the signals before saying "start": a test signals the job
		// once every worker has started, and a SIGINT that came between
		// the two would kill the worker before it could report it.
		signals = make(chan os.Signal, 1)
		signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	}
	report(map[string]any{"event": "start"})
	switch *mode {
	case "env":
		return
	case "fail":
		if rank == *failRank {
			time.Sleep(*delay)
			fmt.Fprintf(os.Stderr, "worker: rank %d: boom, exiting with %d\n", rank, *code)
			os.Exit(*code)
		}
		sleep(*ignoreTerm)
	case "sleep":
		sleep(*ignoreTerm)
	case "restart":
		rc, _ := strconv.Atoi(os.Getenv("TORCHELASTIC_RESTART_COUNT"))
		if rc < *until && rank == *failRank {
			time.Sleep(*delay)
			fmt.Fprintf(os.Stderr, "worker: rank %d fails in attempt %d\n", rank, rc)
			os.Exit(*code)
		}
		if rc < *until {
			sleep(false)
		}
	case "child":
		c := exec.Command("sleep", "1000")
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		report(map[string]any{"event": "child", "child_pid": c.Process.Pid})
		if rank == *failRank {
			time.Sleep(*delay)
			fmt.Fprintf(os.Stderr, "worker: rank %d: exiting with %d, leaving child %d behind\n", rank, *code, c.Process.Pid)
			os.Exit(*code)
		}
		sleep(false)
	case "recorderr":
		if rank == *failRank {
			time.Sleep(*delay)
			_ = launch.RecordError(errors.New("loss is NaN at step 7 (recorded)"))
			fmt.Fprintln(os.Stderr, "worker: giving up")
			os.Exit(1)
		}
		sleep(false)
	case "store":
		if err := storeExchange(rank); err != nil {
			fmt.Fprintf(os.Stderr, "worker: rank %d: store: %v\n", rank, err)
			os.Exit(1)
		}
		report(map[string]any{"event": "store-ok"})
		if rank == *failRank && *code != 0 {
			time.Sleep(*delay)
			fmt.Fprintf(os.Stderr, "worker: rank %d: boom after the store exchange, exiting with %d\n", rank, *code)
			os.Exit(*code)
		}
		if *code != 0 {
			sleep(false)
		}
	case "allreduce":
		backend, err := allReduce(rank)
		if err != nil {
			fmt.Fprintf(os.Stderr, "worker: rank %d: %v\n", rank, err)
			os.Exit(1)
		}
		report(map[string]any{"event": "allreduce-ok", "backend": backend})
	case "until-nodes":
		// Elastic scale-up: wait (until stopped) for a group of -nodes nodes.
		if n, _ := strconv.Atoi(os.Getenv("GROUP_WORLD_SIZE")); n < *nodes {
			sleep(false)
		}
	case "panic":
		if rank == *failRank {
			time.Sleep(*delay)
			panic("worker panics on purpose")
		}
		sleep(false)
	default:
		fmt.Fprintf(os.Stderr, "worker: unknown mode %q\n", *mode)
		os.Exit(2)
	}
}

func report(extra map[string]any) {
	m := map[string]any{"pid": os.Getpid()}
	for _, k := range []string{"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
		"GROUP_WORLD_SIZE", "ROLE_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
		"TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID", "GODDP_NUM_THREADS", "GODDP_STORE_HOSTED",
		"GODDP_ERROR_FILE", "OMP_NUM_THREADS", "GOMAXPROCS"} {
		m[k] = os.Getenv(k)
	}
	if t := os.Getenv("GODDP_TOKEN"); t != "" {
		h := sha256.Sum256([]byte(t))
		m["token_hash"] = hex.EncodeToString(h[:8])
	}
	for k, v := range extra {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	fmt.Printf("WORKER %s\n", b)
}

// sleep waits for a signal; SIGTERM ends it (exit 143) unless ignored.
// signals is set before "start" is reported in sleep mode.
var signals chan os.Signal

func sleep(ignoreTerm bool) {
	ch := signals
	if ch == nil {
		ch = make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	}
	deadline := time.After(10 * time.Minute)
	for {
		select {
		case s := <-ch:
			report(map[string]any{"event": "signal", "signal": s.String()})
			if s == syscall.SIGTERM && ignoreTerm {
				continue
			}
			if s == syscall.SIGINT {
				os.Exit(130)
			}
			os.Exit(143)
		case <-deadline:
			os.Exit(0)
		}
	}
}

// storeExchange connects to the launcher-hosted store at MASTER_ADDR:
// MASTER_PORT with the job token, publishes this rank's key and reads every
// other rank's: proof that every worker, on every node, reaches the store.
func storeExchange(rank int) error {
	world, _ := strconv.Atoi(os.Getenv("WORLD_SIZE"))
	if os.Getenv("GODDP_STORE_HOSTED") != "1" {
		return errors.New("GODDP_STORE_HOSTED is not 1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr := net.JoinHostPort(os.Getenv("MASTER_ADDR"), os.Getenv("MASTER_PORT"))
	st, err := comm.DialStore(ctx, addr, comm.WithToken(os.Getenv("GODDP_TOKEN")))
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.Set(ctx, fmt.Sprintf("worker/%d", rank), []byte(os.Getenv("GROUP_RANK"))); err != nil {
		return err
	}
	for r := 0; r < world; r++ {
		if _, err := st.Get(ctx, fmt.Sprintf("worker/%d", r)); err != nil {
			return fmt.Errorf("rank %d's key: %w", r, err)
		}
	}
	return nil
}

// allReduce joins the process group with comm.InitFromEnv (as a real
// trainer does under ddprun) and checks a sum over all ranks.
func allReduce(rank int) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pg, err := comm.InitFromEnv(ctx)
	if err != nil {
		return "", err
	}
	defer pg.Close()
	buf := []float64{float64(rank + 1)}
	if err := pg.AllReduce(comm.Float64s(buf), comm.Sum).Wait(ctx); err != nil {
		return "", err
	}
	n := float64(pg.Size())
	if want := n * (n + 1) / 2; buf[0] != want {
		return "", fmt.Errorf("allreduce sum is %v, want %v", buf[0], want)
	}
	return pg.Backend(), nil
}
