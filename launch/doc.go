// Package launch starts and supervises the worker processes of a goddp job:
// it is the library behind cmd/ddprun (goddp's torchrun) and provides Spawn,
// the torch.multiprocessing.spawn analog for tests and small programs.
//
// # Model
//
// One launcher runs per node. Run (ddprun) builds PROGRAM if it is a Go
// package, meets the other nodes, and starts Config.NProcPerNode workers,
// each in its own process group, with the environment torchrun gives:
//
//	RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE GROUP_RANK GROUP_WORLD_SIZE
//	ROLE_RANK ROLE_NAME ROLE_WORLD_SIZE MASTER_ADDR MASTER_PORT
//	TORCHELASTIC_RESTART_COUNT TORCHELASTIC_MAX_RESTARTS TORCHELASTIC_RUN_ID
//	TORCHELASTIC_ERROR_FILE TORCHELASTIC_USE_AGENT_STORE
//
// plus goddp's own: GODDP_TOKEN (the job secret; $GODDP_TOKEN or a random
// one, never printed), GODDP_STORE_HOSTED=1, GODDP_ERROR_FILE,
// GODDP_RESTART_COUNT, GODDP_MAX_RESTARTS, GODDP_RUN_ID, and
// GODDP_NUM_THREADS=cores/nproc when neither it nor OMP_NUM_THREADS holds a
// positive count (torchrun's OMP_NUM_THREADS rule), with GOMAXPROCS set to
// that share plus one when the share is below the core count and GOMAXPROCS
// is unset, so that each worker's Go runtime (GC, timers, communication
// goroutines) stays off the cores the other ranks compute on, and a
// goroutine coming back from a long C call (a product) finds a P free.
//
// The launcher hosts the workers' store (comm's TCP store, token
// authenticated) at MASTER_ADDR:MASTER_PORT, so comm.InitFromEnv connects
// every worker as a client. Each round (attempt) gets a fresh store, so a
// restarted group never sees keys of the failed one. Single node: the store
// binds --master-addr:--master-port (--standalone: a free loopback port).
// Several nodes: node 0's launcher also hosts a rendezvous store
// (--master-addr:--master-port for the static backend, --rdzv-endpoint for
// the store backend); the launchers register there, node 0 waits for
// --nnodes of them (up to --rdzv-timeout; MIN:MAX waits a last call once MIN
// joined), assigns GROUP_RANK and global ranks, and publishes the workers'
// store address. Launchers then exchange heartbeats and failures through it.
//
// # Failures
//
// When a worker exits non-zero or dies by a signal, its launcher publishes
// the failure, every launcher stops its workers (SIGTERM to each process
// group, SIGKILL after Config.StopGrace) and prints the root cause: rank,
// local rank, node, exit code or signal, the last lines of its stderr, and
// the error file the worker wrote with RecordError (or RecordPanic). The
// group then restarts, all nodes together, up to MaxRestarts times; workers
// resume from their own checkpoints (TORCHELASTIC_RESTART_COUNT tells them
// it is a restart). A launcher killed with SIGKILL takes its workers along
// (Pdeathsig), and the next launcher on the host removes the temp dirs and
// shared-memory files it left (owned_dir.go says how a dead owner is told
// from a live one); the other nodes notice its missing heartbeat. SIGINT, SIGTERM,
// SIGHUP and SIGQUIT given to ddprun are forwarded to the workers, and the
// other nodes are told the job is over.
//
// Errors match ErrUsage, ErrWorkerFailed, ErrRendezvous, ErrProgram,
// ErrNoGPU or ErrInterrupted; ExitCode maps them to ddprun's exit codes
// (0 ok, 1 worker failed, 2 usage, 3 rendezvous, 4 program, 5 no GPU,
// 128+N signal N).
//
// # Workers
//
// A worker needs nothing from this package: comm.InitFromEnv reads the
// environment. To have its error shown as the root cause it can call
//
//	if err := train(); err != nil {
//		launch.RecordError(err)
//		os.Exit(1)
//	}
//
// and `defer launch.RecordPanic()` at the top of main records panics.
//
// # Spawn
//
// Spawn(ctx, fn, n) re-executes the current binary n times with the same
// environment; the child path is selected by an environment marker, so
// main (or TestMain) must call IsChild and RunChild before anything else:
//
//	func TestMain(m *testing.M) {
//		if launch.IsChild() {
//			os.Exit(launch.RunChild(context.Background(), worker))
//		}
//		os.Exit(m.Run())
//	}
//
// This package is Linux-only (process groups, Pdeathsig, waitid).
package launch
