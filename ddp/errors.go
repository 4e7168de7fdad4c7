package ddp

import "errors"

// Sentinel errors. Returned errors wrap them with %w and add the details
// (parameter names, ranks, bucket, iteration).
var (
	// ErrParamMismatch: ranks disagree on the model's parameters or buffers
	// (count, shape or dtype) at Wrap.
	ErrParamMismatch = errors.New("ddp: parameters differ across ranks")
	// ErrUnusedParameters: some parameters got no gradient in a backward pass
	// and FindUnusedParameters was not set.
	ErrUnusedParameters = errors.New("ddp: parameters did not receive a gradient")
	// ErrReduction: the reducer's protocol was violated (a gradient arrived
	// after its bucket was reduced, a static graph changed, ...).
	ErrReduction = errors.New("ddp: reduction error")
	// ErrTimeout: waiting for a bucket's all-reduce took longer than the timeout.
	ErrTimeout = errors.New("ddp: timeout")
	// ErrJoinedEarly: under Join with ThrowOnEarlyTermination, a rank ran out of inputs.
	ErrJoinedEarly = errors.New("ddp: a rank ran out of inputs (Join with ThrowOnEarlyTermination)")
	// ErrInvalidOption: an option has an invalid value.
	ErrInvalidOption = errors.New("ddp: invalid option")
	// ErrClosed: the DDP wrapper was closed.
	ErrClosed = errors.New("ddp: closed")
)
