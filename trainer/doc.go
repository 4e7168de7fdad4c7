// Package trainer is a training loop for goddp's data-parallel models: the
// Trainer of PyTorch's DDP tutorial (run a batch, run an epoch, save a
// checkpoint, train, resume), with evaluation, callbacks, metrics loggers,
// a progress bar and a live training page.
//
// # Two ways in
//
// Main is a whole program's main: give it the dataset, model, optimizer and
// loss (a Job, built from the run's seed) and it parses the common flags
// (-epochs, -batch-size, -ckpt-dir, -device, -metrics, -dashboard, ...),
// joins the process group that ddprun, torchrun, srun or mpirun describe
// in the environment (or runs one process when there is none), wraps the
// model in DDP, trains and prints samples_per_s. Every program under
// examples/ is built this way.
//
// New builds a Trainer from parts you made yourself (a ddp.DDP, a
// DataLoader over a DistributedSampler, an optimizer); Train runs the
// epochs, and RunEpoch, Evaluate and SaveCheckpoint are there for a loop of
// your own. Every rank builds its Trainer and calls the same methods in the
// same order: they meet in the model's process group.
//
// # Checkpoints
//
// With Config.CkptDir, rank 0 locks the directory for the run, saves every
// SaveEvery epochs (safetensors, atomically, the newest KeepLast kept) and
// every rank resumes from the newest valid checkpoint when it starts;
// damaged files are skipped and named. Done says whether a resumed run has
// anything left to train; Config.Fresh starts over, moving the old files
// into a previous-<time> subdirectory rather than deleting them. A
// checkpoint holds the model, the optimizer, the sampler's position and,
// with Config.Scaler (-amp fp16), the GradScaler's scale and growth
// tracker, so a resumed float16 run goes on with the scale it had.
//
// # Callbacks
//
// A Callback implements any of StepHook, EpochEndHook and EvalHook
// (optional interfaces: see Callback for why). EarlyStopping stops when an
// evaluation metric stops improving, KeepBest keeps the best model by a
// metric, Progress draws the progress bar, and Funcs turns closures into a
// callback. A callback stops training with Trainer.Stop; the ranks agree at
// the epoch's end, so all leave together.
//
// # Loggers
//
// Rank 0 sends a Record to each Logger every LogEvery steps, at each
// epoch's end (with every rank's communication figures from ddp.Stats) and
// after each evaluation. JSONLines and CSV write files that ReadJSONLines
// and any CSV reader parse back, Plot draws the loss and throughput curves
// to a PNG at the end, Memory keeps them, and Dashboard serves them as a
// live page (-dashboard ADDR; loopback only unless a host is named).
//
// # Throughput
//
// samples_per_s counts every rank's samples after the first few steps of
// the run (the warm-up: empty allocator caches, DDP's bucket rebuild after
// the first iteration, the backend's first connections), over the slowest
// rank's time: counting from the first step understates the steady rate,
// and skipping a whole first epoch left a one-epoch run with no figure.
//
// The package holds no mutable package state and never exits: Main returns
// the exit code for the caller's os.Exit.
package trainer
