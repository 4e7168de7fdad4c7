package launch_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/goddp/goddp/launch"
)

// ddprun's command line, torchrun-style: both spellings of each flag work,
// and everything after PROGRAM belongs to PROGRAM.
func ExampleParseArgs() {
	cfg, err := launch.ParseArgs([]string{
		"--nnodes=2", "--node_rank", "1", "--nproc-per-node", "4",
		"--master-addr", "10.0.0.1", "--max-restarts", "3",
		"./train", "-epochs", "10",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.MaxNodes, cfg.NodeRank, cfg.NProcPerNode, cfg.MasterAddr, cfg.MaxRestarts)
	fmt.Println(cfg.Program, cfg.Args)

	_, err = launch.ParseArgs([]string{"--nproc-per-node", "0", "./train"})
	fmt.Println(err, "-> exit", launch.ExitCode(err))
	// Output:
	// 2 1 4 10.0.0.1 3
	// ./train [-epochs 10]
	// launch: usage error: --nproc-per-node must be at least 1, got 0 -> exit 2
}

// A worker records why it fails; the launcher shows it as the root cause.
func ExampleRecordError() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "error.json")
	os.Setenv("GODDP_ERROR_FILE", path) // ddprun sets this for every worker
	defer os.Unsetenv("GODDP_ERROR_FILE")

	_ = launch.RecordError(errors.New("loss is NaN at step 1200"))

	rec, _ := launch.ReadErrorFile(path)
	fmt.Println(rec.Message)
	// Output: loss is NaN at step 1200
}

// Run is ddprun as a library: here, 4 workers of ./train on this machine,
// restarted up to twice.
func ExampleRun() {
	err := launch.Run(context.Background(), launch.Config{
		Program: "./train", NProcPerNode: 4, Standalone: true, MaxRestarts: 2,
	})
	var fe *launch.FailureError
	if errors.As(err, &fe) {
		fmt.Println("rank", fe.Root.Rank, "failed:", fe.Root.Cause())
	}
	os.Exit(launch.ExitCode(err))
}

func worker(ctx context.Context, rank, worldSize int) error {
	// comm.InitFromEnv(ctx) would join the process group here.
	fmt.Printf("hello from rank %d of %d\n", rank, worldSize)
	return nil
}

// Spawn runs worker in 4 processes. The program's main (or TestMain) must
// start with the child check, as below.
func ExampleSpawn() {
	if launch.IsChild() {
		os.Exit(launch.RunChild(context.Background(), worker))
	}
	if err := launch.Spawn(context.Background(), worker, 4); err != nil {
		fmt.Println(err)
	}
}
