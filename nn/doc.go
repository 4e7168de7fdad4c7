// Package nn holds goddp's neural-network modules: layers (Linear, ReLU,
// GELU, Tanh, Sigmoid, Dropout, LayerNorm, Embedding, BatchNorm1d,
// MultiheadAttention, Sequential; for images Conv2d, MaxPool2d, AvgPool2d,
// AdaptiveAvgPool2d, BatchNorm2d, SyncBatchNorm with ConvertSyncBatchNorm,
// and Flatten, whose geometry options are WindowOptions such as Stride and
// Padding), losses (MSELoss, CrossEntropyLoss, BCEWithLogitsLoss) and
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
// Layers that draw random numbers take an explicit *tensor.RNG, which is
// torch's CPU generator: Linear uses torch's default init (kaiming_uniform_
// with a=√5 for the weight, then U(-1/√in, 1/√in) for the bias), Embedding
// N(0, 1), Dropout its masks (bernoulli_(1-p), as torch's CPU dropout).
// tensor.NewRNG(s) plays the part of torch.manual_seed(s): building the same
// layers in the same order gives torch's weights bit for bit, and passing the
// same RNG to Dropout continues the stream as torch's global generator does.
// The torch.nn.init functions (KaimingUniform_, XavierNormal_, Normal_, ...)
// are in init.go. There is no global generator. See docs/reproducibility.md.
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
// wraps ErrStateDict, and nothing is changed. BatchNorm's
// num_batches_tracked is a 0-d int64 buffer, as torch's; a float64 one
// (saved by an older goddp) loads into it.
//
// # Errors
//
// Shape mismatches in forward passes are programmer errors and panic with the
// op's name and the shapes (see package autograd); constructors panic on
// non-positive sizes for the same reason. Loading a state dict is runtime
// input and returns an error.
package nn
