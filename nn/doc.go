// Package nn holds goddp's neural-network modules: layers (Linear, ReLU,
// GELU, Tanh, Sigmoid, Dropout, LayerNorm, Embedding, BatchNorm1d,
// Sequential; for images Conv2d, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d,
// BatchNorm2d, SyncBatchNorm with ConvertSyncBatchNorm, and Flatten, whose
// geometry options are WindowOptions such as Stride and Padding), losses (MSELoss, CrossEntropyLoss, BCEWithLogitsLoss) and
// state dicts, with PyTorch's semantics and names.
//
// # Modules and names
//
// A Module exposes its parameters and buffers with torch-style dotted names
// ("0.weight", "net.2.bias") in registration order, which is the order of
// torch's named_parameters(): a module's own parameters, then each child's.
// DDP buckets parameters in the reverse of this order, and optimizers and
// checkpoints key their state by it, so it is stable. A Layer is a Module with
// a single-input Forward. Custom models embed Container and register their
// parts:
//
//	type Net struct {
//		nn.Container
//		fc1, fc2 *nn.Linear
//	}
//
// Container, and Sequential which is built on it, implement Parent
// (NamedChildren), which StateDict uses to order keys exactly as torch does:
// own parameters, own buffers, then each child's keys.
//
// # Initialisation and randomness
//
// Layers that draw random numbers take an explicit *tensor.RNG: Linear uses
// torch's default init (kaiming_uniform with a=√5, i.e. U(-1/√in, 1/√in), for
// the weight, then U(-1/√in, 1/√in) for the bias), Embedding N(0, 1), Dropout
// its masks. Same seed, same model; there is no global generator. Values do
// not match torch's generator bit for bit; load a state dict for that.
//
// # Modes and gradients
//
// Train(on) switches Dropout and BatchNorm1d between training and evaluation
// recursively (Eval(m) is Train(false)); a new module is in training mode.
// NoGrad(m, fn) runs fn without recording gradients for m's parameters, and
// ZeroGrad(m) zeroes their gradients in place.
//
// # State dicts
//
// StateDict(m) returns an ordered TensorDict of parameters and buffers that
// aliases the module's storage. LoadStateDict copies into the existing
// tensors (so optimizers and DDP keep their references) and is strict: every
// missing, unexpected or mis-shaped key is named in a *StateDictError, which
// wraps ErrStateDict, and nothing is changed. BatchNorm1d's
// num_batches_tracked is a 0-d float64 buffer, since goddp tensors have no
// integer dtype.
//
// # Errors
//
// Shape mismatches in forward passes are programmer errors and panic with the
// op's name and the shapes (see package autograd); constructors panic on
// non-positive sizes for the same reason. Loading a state dict is runtime
// input and returns an error.
package nn
