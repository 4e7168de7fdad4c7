package checkpoint

import "errors"

// Sentinel errors, wrapped with %w together with the file or rank involved.
var (
	// ErrCorrupt marks a file that is not a well-formed safetensors file, is
	// truncated, or fails its checksum.
	ErrCorrupt = errors.New("checkpoint: corrupt or truncated file")
	// ErrNotFound is returned when a directory holds no valid checkpoint.
	ErrNotFound = errors.New("checkpoint: no valid checkpoint")
	// ErrShadowed is returned by Manager.Save when the directory holds
	// valid checkpoints named after the one just saved (a rollback, or
	// another run's files): the new file is kept, nothing is pruned.
	ErrShadowed = errors.New("checkpoint: newer checkpoints shadow this save")
	// ErrLocked is returned by Manager.Lock and Manager.Save when another
	// Manager (another job, as a rule) holds the directory's lock.
	ErrLocked = errors.New("checkpoint: directory locked by another job")
	// ErrMismatch marks a state that does not fit the model it is loaded into.
	ErrMismatch = errors.New("checkpoint: state does not match the model")
	// ErrUnsupported marks a tensor dtype this package cannot represent.
	ErrUnsupported = errors.New("checkpoint: unsupported")
	// ErrRemote is returned on the other ranks when rank 0 failed to save or
	// load a checkpoint; the message carries rank 0's error text.
	ErrRemote = errors.New("checkpoint: failed on rank 0")
)
