package nn

import (
	"fmt"
	"math"

	"github.com/goddp/goddp/tensor"
)

// torch.nn.init. Each function overwrites a contiguous tensor in place from
// rng, drawing exactly what torch draws: given a tensor.RNG seeded as torch
// was (tensor.NewRNG(s) for torch.manual_seed(s)) and the same sequence of
// calls, the values are bit-identical to torch 1.13's on the CPU. The bounds
// and standard deviations are computed with torch's float64 formulas,
// operation for operation, since a last-bit change in a bound changes every
// weight.

// FanMode selects which fan Kaiming initialisation preserves.
type FanMode string

// The fan modes of torch's kaiming_uniform_/kaiming_normal_.
const (
	FanIn  FanMode = "fan_in"
	FanOut FanMode = "fan_out"
)

// CalculateGain returns torch.nn.init.calculate_gain(nonlinearity, param):
// 1 for linear, conv*, sigmoid; 5/3 for tanh; √2 for relu;
// √(2/(1+slope²)) for leaky_relu (param is the slope, default 0.01); 3/4 for
// selu. An unknown name panics.
func CalculateGain(nonlinearity string, param ...float64) float64 {
	switch nonlinearity {
	case "linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "sigmoid":
		return 1
	case "tanh":
		return 5.0 / 3
	case "relu":
		return math.Sqrt(2.0)
	case "leaky_relu":
		slope := 0.01
		if len(param) > 0 {
			slope = param[0]
		}
		return math.Sqrt(2.0 / (1 + float64(slope*slope))) // no fused multiply-add: Python rounds slope**2 first
	case "selu":
		return 3.0 / 4
	}
	panic(fmt.Sprintf("nn: CalculateGain: unsupported nonlinearity %q", nonlinearity))
}

// CalculateFanInAndFanOut returns torch's fans for a weight of at least two
// dimensions: size(1)·receptive field and size(0)·receptive field, the
// receptive field being the product of the dimensions after the second (a
// Conv2d weight [out, in, kh, kw] has fan_in = in·kh·kw).
func CalculateFanInAndFanOut(t *tensor.Tensor) (fanIn, fanOut int) {
	if t.Dim() < 2 {
		panic(fmt.Sprintf("nn: fan in and fan out can not be computed for a tensor of shape %v (fewer than 2 dimensions)", t.Shape()))
	}
	rf := 1
	for _, s := range t.Shape()[2:] {
		rf *= s
	}
	return t.Size(1) * rf, t.Size(0) * rf
}

func correctFan(t *tensor.Tensor, mode FanMode) int {
	in, out := CalculateFanInAndFanOut(t)
	switch mode {
	case FanIn:
		return in
	case FanOut:
		return out
	}
	panic(fmt.Sprintf("nn: fan mode %q is neither fan_in nor fan_out", mode))
}

// Uniform_ fills t from U(a, b) (torch.nn.init.uniform_).
func Uniform_(rng *tensor.RNG, t *tensor.Tensor, a, b float64) { rng.FillUniform(t, a, b) }

// Normal_ fills t from N(mean, std²) (torch.nn.init.normal_).
func Normal_(rng *tensor.RNG, t *tensor.Tensor, mean, std float64) { rng.FillNormal(t, mean, std) }

// Constant_ fills t with v (torch.nn.init.constant_); it draws nothing.
func Constant_(t *tensor.Tensor, v float64) {
	if t.DType() == tensor.Float64 {
		for i, d := 0, t.F64(); i < len(d); i++ {
			d[i] = v
		}
		return
	}
	fill32(t.F32(), float32(v))
}

// Ones_ fills t with 1 (torch.nn.init.ones_).
func Ones_(t *tensor.Tensor) { Constant_(t, 1) }

// Zeros_ fills t with 0 (torch.nn.init.zeros_).
func Zeros_(t *tensor.Tensor) { Constant_(t, 0) }

// XavierUniform_ fills t from U(-a, a), a = gain·√(6/(fan_in+fan_out))
// (torch.nn.init.xavier_uniform_; torch's default gain is 1).
func XavierUniform_(rng *tensor.RNG, t *tensor.Tensor, gain float64) {
	in, out := CalculateFanInAndFanOut(t)
	std := gain * math.Sqrt(2.0/float64(in+out))
	a := math.Sqrt(3.0) * std
	rng.FillUniform(t, -a, a)
}

// XavierNormal_ fills t from N(0, std²), std = gain·√(2/(fan_in+fan_out))
// (torch.nn.init.xavier_normal_).
func XavierNormal_(rng *tensor.RNG, t *tensor.Tensor, gain float64) {
	in, out := CalculateFanInAndFanOut(t)
	std := gain * math.Sqrt(2.0/float64(in+out))
	rng.FillNormal(t, 0, std)
}

// KaimingUniform_ fills t from U(-bound, bound), bound = gain/√fan·√3 with
// gain = CalculateGain(nonlinearity, a) (torch.nn.init.kaiming_uniform_;
// torch's defaults are a=0, FanIn, "leaky_relu"). Linear and Conv2d weights
// use a=√5, FanIn, "leaky_relu".
func KaimingUniform_(rng *tensor.RNG, t *tensor.Tensor, a float64, mode FanMode, nonlinearity string) {
	fan := correctFan(t, mode)
	gain := CalculateGain(nonlinearity, a)
	std := gain / math.Sqrt(float64(fan))
	bound := math.Sqrt(3.0) * std
	rng.FillUniform(t, -bound, bound)
}

// KaimingNormal_ fills t from N(0, std²), std = gain/√fan
// (torch.nn.init.kaiming_normal_).
func KaimingNormal_(rng *tensor.RNG, t *tensor.Tensor, a float64, mode FanMode, nonlinearity string) {
	fan := correctFan(t, mode)
	gain := CalculateGain(nonlinearity, a)
	std := gain / math.Sqrt(float64(fan))
	rng.FillNormal(t, 0, std)
}

// ResetLinearParameters_ initialises a weight and an optional bias the way
// torch's Linear and ConvNd reset_parameters do: weight by
// KaimingUniform_(a=√5, FanIn, "leaky_relu"), then the bias (when not nil)
// from U(-1/√fan_in, 1/√fan_in), in that order.
func ResetLinearParameters_(rng *tensor.RNG, weight, bias *tensor.Tensor) {
	KaimingUniform_(rng, weight, math.Sqrt(5), FanIn, "leaky_relu")
	if bias == nil {
		return
	}
	fanIn, _ := CalculateFanInAndFanOut(weight)
	bound := 0.0
	if fanIn > 0 {
		bound = 1 / math.Sqrt(float64(fanIn))
	}
	rng.FillUniform(bias, -bound, bound)
}
