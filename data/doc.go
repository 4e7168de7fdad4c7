// Package data is goddp's input pipeline: datasets, a DataLoader and a
// DistributedSampler with PyTorch's semantics, and readers for CSV, IDX
// (MNIST) and NumPy .npy files.
//
// # Model
//
// A Dataset is map-style: Len samples addressed by index, each a Sample
// holding an Input tensor and either a float Target tensor (regression) or
// an int Label (classification). TensorDataset keeps all samples as the rows
// of tensors; Subset and ConcatDataset compose datasets.
//
// A DataLoader turns a Dataset into Batches. A Sampler decides the index
// order of a pass (SequentialSampler, RandomSampler, DistributedSampler);
// the loader cuts it into batches of BatchSize (or takes whole batches from a
// BatchSampler) and collates each batch: DefaultCollate stacks inputs into
// Batch.Inputs [B, ...], stacks targets into Batch.Targets or gathers labels
// into Batch.Labels. A dataset that implements BatchGetter (TensorDataset,
// and Subset over one) assembles whole batches directly, with one copy per
// row and no per-sample tensors; that is the fast path the loader takes when
// no custom CollateFunc is set.
//
// Iteration uses Go's range-over-func:
//
//	loader, err := data.NewDataLoader(ds, data.BatchSize(32), data.WithSampler(sampler))
//	for epoch := range epochs {
//		loader.SetEpoch(epoch) // sampler.set_epoch(epoch)
//		for b, err := range loader.All(ctx) {
//			if err != nil {
//				return err
//			}
//			step(b.Inputs, b.Labels)
//		}
//	}
//
// NumWorkers > 0 loads batches on that many goroutines, at most
// NumWorkers*PrefetchFactor ahead of the consumer; batches are yielded in
// sampler order whatever the number of workers, so results do not depend on
// it. A failed Get or collate is yielded as an error (never dropped) and ends
// the loop; so does ctx ending. Breaking out of the loop stops the workers.
//
// # DistributedSampler
//
// DistributedSampler reproduces torch's partition exactly: pad by wrapping
// around to a multiple of the replica count (or truncate with DropLast),
// then give rank r the positions r, r+R, r+2R, ... With shuffling off the
// per-rank lists equal PyTorch's (a test checks them against fixtures made by
// scripts/gen_fixtures_sampler.py). With shuffling on they equal PyTorch's
// too: the permutation is torch.randperm(N) from a generator seeded with
// seed+epoch, drawn by tensor.RNG, which is torch's CPU generator bit for bit
// (checked against scripts/gen_fixtures_rng.py's fixtures for N up to 60000).
// Without SamplerGroup, the rank and replica count come from the launcher's
// environment as comm reads it (torchrun's RANK/WORLD_SIZE, or mpirun's or
// srun's variables; see internal/launchenv), so the two cannot disagree.
//
// Two additions to torch: SamplerEval gives uneven, unpadded shares so that
// evaluation counts every sample once; and the sampler records how far into
// the epoch the loader got (Position), so that State/LoadState, saved in a
// checkpoint, let a restarted run continue mid-epoch with exactly the batches
// the interrupted run had not yet seen.
//
// # Shards: data that does not fit in memory
//
// OpenShards indexes a list of shard files, each an .npy array of inputs
// (with X.labels.npy or X.targets.npy beside it) or a tar of samples in
// webdataset's layout (KEY.npy plus KEY.cls or KEY.target.npy), and a
// StreamLoader iterates them (torch's IterableDataset in a DataLoader).
// Each epoch the shard order is reshuffled from seed+epoch, identically on
// every rank, and shard j goes to the (rank, worker) slot j mod
// (ranks × workers); the samples inside a shard are shuffled too. So every
// sample is seen exactly once per epoch across all ranks and workers, with
// memory bounded by PrefetchFactor batches per worker (and a tar shard's
// shuffle buffer). Ranks may get different numbers of batches; train inside
// ddp's Join so that the rank that runs out first does not hang the others.
// WriteShards turns any Dataset into shards. Shards are checked when opened
// and as they are read: a tar must end with its end-of-archive marker and
// hold the sample count WriteShards recorded, sparse members and members
// larger than the file are refused, an .npy row of zero bytes is refused,
// labels are required unless ShardUnlabeled says the data have none, and
// ShardLabels, ShardInputShape and ShardTargets bound what each sample may
// hold; every error names the file and the sample.
//
// # Token files: language-model corpora
//
// OpenTokens and OpenTokenSplits map GPT-2 token files, llm.c's shards
// (a 256-int32 header: magic 20240520, version 1, token count; then uint16
// tokens; shard 0, *_val_*.bin, is validation) or nanoGPT's headerless
// train.bin and val.bin, read-only and shared between the processes of a
// machine. A TokenDataset is a Dataset of the (n-1)/T windows of T+1 tokens
// at stride T in each file (input ids [T], targets shifted by one), so the
// DistributedSampler deals them to the ranks, every window once an epoch,
// and a checkpoint resumes mid-epoch. Headers are checked at open; tokens
// not below the vocabulary are reported when their window is read, naming
// the file and offset (Validate scans everything). Close unmaps the files.
// cmd/tokenize writes the shards from text with GPT-2's BPE.
//
// # Files
//
// ReadCSV reads numeric CSV with an optional header and target column;
// ReadIDX and LoadMNIST read the MNIST IDX format, gzipped or not; ReadNPY
// and WriteNPY handle NumPy's .npy (versions 1-3; <f4 <f8 <i4 <i8 u1 and a
// few more, C order). Malformed input yields an error wrapping ErrFormat that
// names the file and the line (CSV) or byte offset (IDX, npy). The parsers
// check every header-declared size against the bytes actually present before
// allocating, and are fuzzed (FuzzCSV, FuzzIDX, FuzzNPY). A gzipped IDX file
// is inflated only as far as its header declares, so a gzip bomb costs
// neither memory nor time; the size an IDX header may declare is capped
// (IDXMaxBytes, default 2 GiB), and decoding holds that size plus a 64 KiB
// staging buffer, whatever the element type.
package data
