// Command ddpbench measures collective throughput of goddp's comm backends,
// in the manner of nccl-tests: for every message size from -min to -max
// (doubling) it times the collective and prints time, algorithm bandwidth
// and bus bandwidth.
//
// Usage:
//
//	ddpbench allreduce|broadcast|allgather|reducescatter [flags]
//
//	-backend B    tcp, shm, auto, nccl or any registered backend name
//	              (default: $GODDP_BACKEND, else auto)
//	-nproc N      ranks to spawn on this host (default 2)
//	-dtype T      float32 (default), float64, int32, int64, float16, bfloat16
//	-op O         sum (default), avg, max, min, product
//	-min S -max S sizes in bytes, with K/M/G suffixes (default 4K..64M)
//	-iters N      timed iterations per size (default 256 MiB/size, clamped to 5..200)
//	-warmup N     untimed iterations per size (default 3)
//	-format F     table (default) or csv
//	-plot F.png   also draw busbw against size
//	-stat S       mean (default, as nccl-tests) or median of individually
//	              timed calls, which a busy host disturbs far less
//	-mem M        host (default): host buffers (the nccl backend stages them
//	              through pinned memory); device: GPU buffers straight to
//	              NCCL, as nccl-tests (nccl backend only)
//	-bind B       auto (default): core for host backends, none for nccl;
//	              core: pin rank i to the i-th usable CPU when the ranks fit,
//	              as mpirun does by default (with GOMAXPROCS 1, except for
//	              nccl, whose proxy threads inherit the mask); none: let the
//	              kernel place them
//
// Exit codes: 0 success, 1 a failed run, 2 usage, 5 no usable GPU (the
// nccl backend found no driver, device or NCCL; the message says which).
//
// Started by hand (RANK unset) ddpbench spawns its own -nproc ranks: it
// re-executes itself with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR=127.0.0.1 and a free MASTER_PORT, and rank 0 prints the
// results. Started by a launcher (RANK set, e.g. by ddprun or torchrun-style
// tools, or mpirun) it joins that job through comm.Init and -nproc is ignored.
//
// Example: shared memory against TCP on two ranks, as CSV for a script:
//
//	$ ddpbench allreduce -backend shm -nproc 2 -max 64K -format csv
//	bytes,count,dtype,time_us,algbw_gbps,busbw_gbps,iters,op,backend,nproc,collective
//	4096,1024,float32,1.52,2.695,2.695,200,sum,shm,2,allreduce
//	...
//	$ ddpbench allreduce -backend tcp -nproc 2 -plot tcp.png
//
// Conventions (nccl-tests): bytes is the size of the whole buffer (the
// output of allgather, the input of reducescatter); time is the slowest
// rank's mean per call; algbw = bytes/time; busbw = algbw x 2(n-1)/n for
// allreduce, (n-1)/n for allgather and reducescatter, 1 for broadcast, so
// that busbw is comparable to the link's bandwidth whatever the world size.
//
// # Gradient sync through DDP
//
//	ddpbench sync [-profile resnet50|gpt2|FILE.json] [flags]
//
// runs the real ddp.Wrap Reducer on a model that holds exactly a real
// model's parameters (ResNet-50: torchvision's 161 tensors, 25.6M
// parameters; GPT-2 small: 148 tensors, 124M; embedded from profiles/,
// written by scripts/gen_profiles.py) and reports, per configuration, the
// gradient bytes, the median iteration with DDP (iter_ms, slowest rank),
// the same loop without DDP on rank 0 (local_ms), sync_ms = iter_ms -
// local_ms, sync_gbps = grad bytes / sync_ms, the share of all-reduce time
// hidden behind backward and the all-reduce time per iteration (both from
// DDP's Stats). The model computes sum_i (p_i * x).sum(), as
// ../shared/anchors/torch_grad_sync.py does for torch DDP, so gradients
// become ready in reverse order after one cheap pass each.
//
//	-profile P          resnet50 (default), gpt2, or a JSON file in the anchors' format
//	-bucket-cap-mb L    bucket caps in MiB, comma-separated (default 25; e.g. 1,5,25,100)
//	-backend L          backends, comma-separated (one job each)
//	-nproc L            rank counts, comma-separated (one job each)
//	-hook L             none, fp16, bf16 (DDP comm hooks), comma-separated
//	-static-graph L     false, true, comma-separated
//	-bucket-view L      gradient_as_bucket_view: false, true, comma-separated
//	-overlap L          true (all-reduce beside backward) or false (ddp.OverlapComm(false):
//	                    each bucket reduced at once, backward waits), comma-separated
//	-procs N            GOMAXPROCS of a rank pinned by -bind core (default 1)
//	-compute C          none (default: pure sync) or flops: before each
//	                    parameter's gradient becomes ready, spin for its
//	                    layer's backward FLOPs x -batch / -gflops (default 100)
//	-iters, -warmup     timed and untimed iterations per configuration (20, 3)
//	-format, -plot      table or csv; -plot F.png draws sync GB/s against
//	                    bucket cap, one line per backend
//	-cpuprofile F       each rank's CPU profile of the timed DDP iterations
//	-timeline F         a Chrome trace of each configuration (F.cap25.none.json, ...)
//
// The CSV starts with torch_grad_sync.py's columns:
//
//	profile,backend,bucket_cap_mb,grad_bytes,iter_ms,local_ms,sync_ms,sync_gbps,hidden_pct,...
//
// Put `ddpbench allreduce -min 16M -max 16M` beside it: the raw collective
// at the bucket size shows what bucketing and copying cost.
package main
