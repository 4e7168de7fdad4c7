package trainer

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/goddp/goddp/tensor"
)

// FlopsPerToken is nanoGPT's estimate of a decoder-only transformer's
// training work per token (model.estimate_mfu, after the PaLM paper's
// appendix B): 6N for the forward and backward products with the N
// parameters (2N forward, 4N backward), plus 12·L·H·Q·T for attention's
// scores and weighted values over a context of T tokens (L layers, H heads
// of Q dimensions). nanoGPT counts N without the position embeddings
// (get_num_params(non_embedding=True)), whose lookup does no product.
func FlopsPerToken(params int64, layers, heads, headDim, seqLen int) float64 {
	return 6*float64(params) + 12*float64(layers)*float64(heads)*float64(headDim)*float64(seqLen)
}

// MFU is the model FLOPs utilisation of devices devices, each of peak
// FLOP/s, training tokensPerS tokens a second in all at flopsPerToken
// (nanoGPT's flops_achieved / flops_promised, summed over the devices).
func MFU(tokensPerS, flopsPerToken, peak float64, devices int) float64 {
	if peak <= 0 || devices <= 0 {
		return 0
	}
	return tokensPerS * flopsPerToken / (peak * float64(devices))
}

// peakTable holds the dense (no sparsity) bfloat16 tensor-core peaks of
// known GPUs, in FLOP/s, from NVIDIA's data sheets; the first entry whose
// key the device's name contains wins, so the more specific come first.
// MFU is quoted against the bf16 peak whatever the run's precision, as
// nanoGPT quotes the A100's 312 TFLOPS.
var peakTable = []struct {
	key  string
	peak float64
}{
	{"H200 NVL", 835e12},
	{"H200", 989e12}, // H200 SXM, and GH200's GPU
	{"H100 NVL", 835e12},
	{"H100 PCIe", 756e12},
	{"H100", 989e12}, // H100 SXM ("NVIDIA H100 80GB HBM3")
	{"A100", 312e12},
}

// PeakFLOPS is the dense bf16 peak of a GPU by the name its driver gives
// (nvidia-smi's, e.g. "NVIDIA H200"), from the trainer's table; ok is
// false for a device it does not know, CPUs included (a CPU's peak
// depends on its cores, clock and vector units: give it with -peak-tflops).
func PeakFLOPS(name string) (peak float64, ok bool) {
	for _, e := range peakTable {
		if strings.Contains(strings.ToLower(name), strings.ToLower(e.key)) {
			return e.peak, true
		}
	}
	return 0, false
}

// peakFor is the per-device peak MFU is quoted against: -peak-tflops when
// given, else the table's entry for this rank's GPU; 0 when neither, with
// what to say about it.
func peakFor(tflops float64, dev tensor.Device) (float64, string) {
	if tflops > 0 {
		return tflops * 1e12, fmt.Sprintf("%g TFLOPS per device (-peak-tflops)", tflops)
	}
	name := deviceName(dev)
	if p, ok := PeakFLOPS(name); ok {
		return p, fmt.Sprintf("%g TFLOPS per device (%s: dense bf16, the trainer's table)", p/1e12, name)
	}
	what := "the CPU"
	if !tensor.IsCPU(dev) {
		what = dev.String()
		if name != "" {
			what += " (" + name + ")"
		}
	}
	return 0, fmt.Sprintf("no peak known for %s: give -peak-tflops", what)
}

// gpu is one GPU as NVML lists it.
type gpu struct {
	index      int
	name, uuid string
}

// pickGPU names the GPU that CUDA ordinal ordinal is, given NVML's list
// and CUDA_VISIBLE_DEVICES (visible): the ordinal indexes the visible
// list, whose entries are NVML indices or UUID prefixes; without it,
// NVML's own order. "" when it cannot tell.
func pickGPU(gpus []gpu, ordinal int, visible string) string {
	if visible == "" {
		if ordinal >= 0 && ordinal < len(gpus) {
			return gpus[ordinal].name
		}
		return ""
	}
	ids := strings.Split(visible, ",")
	if ordinal < 0 || ordinal >= len(ids) {
		return ""
	}
	id := strings.TrimSpace(ids[ordinal])
	for _, g := range gpus {
		if id == strconv.Itoa(g.index) || (strings.HasPrefix(id, "GPU-") && strings.HasPrefix(g.uuid, id)) {
			return g.name
		}
	}
	return ""
}
