//go:build !cuda

package gorgoniaddp

import "errors"

// Sentinel errors. Returned errors wrap them with %w and name the node.
var (
	// ErrGraph: the graph cannot be adapted (cost not a scalar, a learnable
	// without a value, an unsupported dtype, duplicate names, ...).
	ErrGraph = errors.New("gorgoniaddp: unsupported graph")
	// ErrRun: the TapeMachine failed while running the graph.
	ErrRun = errors.New("gorgoniaddp: running the graph failed")
	// ErrRebound: a learnable's value was replaced (e.g. by gorgonia.Let)
	// after New, so it no longer shares memory with its goddp parameter.
	ErrRebound = errors.New("gorgoniaddp: a learnable was rebound to new memory")
)
