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
// examples/ is built this way. -device opens a device by torch's name
// through goddp/tensor's registry (OpenDevice): the program links the
// drivers it wants, as database/sql's, and the examples import
// goddp/devices, which links cuda and sim.
//
// New builds a Trainer from parts you made yourself (a ddp.DDP, a
// DataLoader over a DistributedSampler, an optimizer); Train runs the
// epochs, and RunEpoch, Evaluate and SaveCheckpoint are there for a loop of
// your own. Every rank builds its Trainer and calls the same methods in the
// same order: they meet in the model's process group.
//
// # The step
//
// The built-in step is torch's loop: loss = Loss(model(x), batch), the
// backward (BackwardAndFree, which gives each activation and what its op
// saved back to the allocator's cache as soon as the backward has passed
// it, so a step peaks at its forward's activations, not those plus the
// backward's gradients), then the optimizer's step. Config.ForwardLoss
// (Job.ForwardLoss) is the model's forward taking the targets, nanoGPT's
// model(idx, targets): the trainer calls it in place of Forward then Loss,
// inside DDP's ForwardFunc (the same collectives, no_sync and
// unused-parameter bookkeeping as Forward's), so that a model can fuse its
// head with the loss; it must equal Forward then Loss, and evaluation
// keeps those. examples/gpt2 sets it to gpt2.Model.ForwardLoss, whose tied
// head and cross-entropy run as one op that reuses the logits' buffer for
// the softmax and the gradient.
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
// # The live page and its clients
//
// The page runs inside rank 0, so nothing a client does may reach
// training: it keeps at most 64 connections (more are closed as they
// arrive, so its file descriptors stay far below the process's limit and
// checkpoints always find one), cuts off a client that is slow to send
// its request (5 s for the headers, 10 s in all), to read the answer
// (30 s) or idle between requests (15 s), and encodes each record once
// into a buffer that every answer is sliced from, so a client that never
// reads pins no copy of the run's records. It answers only requests whose
// Host names it (localhost, 127.0.0.1, [::1] at any port, the host it was
// bound to, or for 0.0.0.0 the machine's addresses and host name) and
// refuses others with 421, which stops a page on another site from
// reading the metrics through DNS rebinding; its answers carry a
// Content-Security-Policy (its own script, style and data only),
// X-Content-Type-Options: nosniff, X-Frame-Options: DENY,
// Referrer-Policy: no-referrer, and data.json Cache-Control: no-store.
//
// # NaN and infinite losses
//
// JSON has no NaN or infinity, so the metrics log and the page's data.json
// write them as the strings "NaN", "Infinity" and "-Infinity"
// (JavaScript's spellings, which Python's float and pandas read too);
// ReadJSONLines reads them back as numbers, CSV writes the same words, and
// the page leaves them out of its curves and names the first record that
// holds one. On the first step whose loss is NaN or infinite, rank 0
// prints "loss is NaN at step N (epoch E)" to stderr, once, and training
// goes on. TerminateOnNaN (-terminate-on-nan) fails the run there instead,
// on every rank at the same step, with a *NonFiniteLossError naming the
// step, epoch, rank and value; it costs one small all-reduce per step,
// which a run without it does not pay.
//
// # The training recipe
//
// Every model gets nanoGPT's recipe through Config, or through Main's
// flags (defaults in Defaults.Recipe, see Recipe):
//
//   - Gradient accumulation (GradAccum, -grad-accum N): an optimizer step
//     takes N batches; the first N-1 backward passes run under ddp's
//     NoSync, the last all-reduces the sum once, and each loss is divided
//     by N (torch's no_sync, nanoGPT's require_backward_grad_sync). An
//     epoch's short last group steps with the mean loss's gradient; under
//     Join a rank's short last group is dropped, so that every rank keeps
//     the same cadence. Steps, -max-steps, -metrics-every, -eval-every and
//     the schedule count optimizer steps; samples_per_s every batch.
//   - Clipping (ClipNorm, -clip): clip_grad_norm_ after the all-reduce (and
//     the GradScaler's unscale), so the norm is the one across ranks
//     without a collective; printed as grad_norm and recorded.
//   - The optimizer (-optim adamw): AdamW with weight decay on parameters
//     of two or more dimensions only (optim.DecayGroups), -lr, -beta1,
//     -beta2, -eps, -weight-decay; without -optim, the Job's own, -lr
//     setting its groups' learning rate.
//   - The schedule (Scheduler, -lr-schedule cosine): optim.WarmupCosineLR,
//     nanoGPT's get_lr, stepped after each optimizer step, saved in
//     checkpoints and restored on resume; -warmup-steps, -min-lr,
//     -lr-decay-steps (default: the run's planned steps).
//   - Evaluation every N steps (EvalEvery, -eval-every) on the evaluation
//     set, at most EvalBatches batches per rank (-eval-batches, the set's
//     first ones each time), logged and passed to the EvalHooks.
//   - Tokens and MFU: a Job with TokensPerSample prints tokens_per_s after
//     samples_per_s and in the step lines ("step=S loss=L lr=X grad_norm=G
//     tokens_per_s=T mfu=M", rank 0, every -progress-every); with
//     FlopsPerToken (FlopsPerToken's 6N + 12·L·H·Q·T for a transformer)
//     also mfu, against -peak-tflops or the dense bf16 peak of a known GPU
//     (PeakFLOPS), as nanoGPT's estimate_mfu. Rank 0 prints which peak.
//
// Without those flags an example trains and prints as it did before.
//
// # Throughput
//
// samples_per_s counts every rank's samples after the first few steps of
// the run (the warm-up: empty allocator caches, DDP's bucket rebuild after
// the first iteration, the backend's first connections), over the slowest
// rank's time: counting from the first step understates the steady rate,
// and skipping a whole first epoch left a one-epoch run with no figure.
//
// # Memory
//
// Main, like a program's main, sets the Go runtime's soft memory limit
// once when the user has not (GOMEMLIMIT): 90% of the machine's (or the
// cgroup's) memory shared by the machine's ranks. A step frees gigabytes
// of activations at once; with GOGC alone that garbage piles up to the
// live heap's size again before a collection, which took GPT-2 124M past
// 12 GB a rank at T=1024 and had the kernel kill a rank on a 23 GB
// machine. GOMEMLIMIT=off restores Go's default.
//
// The package holds no mutable package state and never exits: Main returns
// the exit code for the caller's os.Exit.
package trainer
