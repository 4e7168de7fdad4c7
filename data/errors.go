package data

import "errors"

// Sentinel errors. Functions wrap them with %w and add the detail (file,
// line, byte offset, sample index), e.g.
// "data: malformed input: train.csv: line 7, column 3: parsing "x": invalid syntax".
var (
	// ErrFormat marks malformed CSV, IDX or .npy input.
	ErrFormat = errors.New("data: malformed input")
	// ErrIndex marks a sample index outside a dataset.
	ErrIndex = errors.New("data: index out of range")
	// ErrShape marks samples or tensors whose shapes do not fit together.
	ErrShape = errors.New("data: shape mismatch")
	// ErrConfig marks an invalid loader or sampler configuration.
	ErrConfig = errors.New("data: invalid configuration")
	// ErrUnlabeled marks shards without the labels or targets the job
	// needs (a shard without them would otherwise train every sample as
	// class 0).
	ErrUnlabeled = errors.New("data: no labels")
	// ErrLabel marks a label outside the classes the model has.
	ErrLabel = errors.New("data: bad label")
	// ErrState marks a sampler state that does not fit the sampler it is loaded into.
	ErrState = errors.New("data: sampler state mismatch")
)
