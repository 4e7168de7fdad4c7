package checkpoint

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/goddp/goddp/data"
	"github.com/goddp/goddp/tensor"
)

// Checkpoint is everything needed to resume training. It is stored as one
// safetensors file: tensors under the prefixes "model.", "optimizer." and
// "scheduler.", everything else in the string metadata (keys "goddp.*"),
// plus the file checksum. A torch user loads the model weights by stripping
// "model." from the tensor names (scripts/check_safetensors_torch.py does).
type Checkpoint struct {
	Epoch int
	Step  int
	// Model is the model's state dict (parameters and buffers by their
	// torch-style dotted names); see StateDict and LoadStateDict.
	Model map[string]*tensor.Tensor
	// Optimizer and Scheduler are optional.
	Optimizer *OptimizerState
	Scheduler *OptimizerState
	// Sampler is the DistributedSampler's position, for a mid-epoch resume.
	Sampler *data.SamplerState
	// GradScaler is a float16 run's loss-scale state (amp.GradScaler), nil
	// when the run has none; checkpoints written before it existed load
	// with it nil.
	GradScaler *GradScalerState
	// RNG is an opaque random-generator state, e.g. tensor.RNG.State();
	// restore it with SetState. Stored base64-encoded.
	RNG []byte
	// Config is an arbitrary JSON document (e.g. the run's flags), stored
	// verbatim.
	Config json.RawMessage
	// Meta holds any other strings.
	Meta map[string]string
}

// OptimizerState is an optimizer's (or scheduler's) state dict: named
// tensors and named float64 scalars. Its fields are those of
// optim.StateDict, so a *optim.StateDict converts directly:
// (*checkpoint.OptimizerState)(sd), and back.
type OptimizerState struct {
	Kind    string
	Tensors map[string]*tensor.Tensor
	Scalars map[string]float64
}

// GradScalerState is torch's GradScaler.state_dict(), under its key names.
// Its fields are those of amp.State, so the two convert directly:
// (*checkpoint.GradScalerState)(&st), and back. It is a type of its own so
// that checkpoint does not import amp and what amp pulls in.
type GradScalerState struct {
	Scale          float32 `json:"scale"`
	GrowthFactor   float64 `json:"growth_factor"`
	BackoffFactor  float64 `json:"backoff_factor"`
	GrowthInterval int     `json:"growth_interval"`
	GrowthTracker  int     `json:"_growth_tracker"`
}

// Metadata keys.
const (
	FormatVersion = "1"
	keyVersion    = "goddp.checkpoint"
	keyEpoch      = "goddp.epoch"
	keyStep       = "goddp.step"
	keySampler    = "goddp.sampler"
	keyGradScaler = "goddp.grad_scaler"
	keyRNG        = "goddp.rng"
	keyConfig     = "goddp.config"
	keyMetaPrefix = "goddp.meta."
	prefixModel   = "model."
	prefixOptim   = "optimizer."
	prefixSched   = "scheduler."
)

func optKeys(prefix string) (kind, scalars string) {
	p := "goddp." + strings.TrimSuffix(prefix, ".")
	return p + ".kind", p + ".scalars"
}

// tensorsAndMeta flattens c into one tensor map and one metadata map.
func (c *Checkpoint) tensorsAndMeta() (map[string]*tensor.Tensor, map[string]string, error) {
	ts := make(map[string]*tensor.Tensor)
	meta := map[string]string{
		"format":   "pt", // the safetensors convention for torch state dicts
		keyVersion: FormatVersion,
		keyEpoch:   strconv.Itoa(c.Epoch),
		keyStep:    strconv.Itoa(c.Step),
	}
	for k, t := range c.Model {
		ts[prefixModel+k] = t
	}
	for _, o := range []struct {
		prefix string
		s      *OptimizerState
	}{{prefixOptim, c.Optimizer}, {prefixSched, c.Scheduler}} {
		if o.s == nil {
			continue
		}
		for k, t := range o.s.Tensors {
			ts[o.prefix+k] = t
		}
		// Scalars as strings: exact round trip, and NaN/Inf survive (JSON numbers cannot hold them).
		sc := make(map[string]string, len(o.s.Scalars))
		for k, v := range o.s.Scalars {
			sc[k] = strconv.FormatFloat(v, 'g', -1, 64)
		}
		js, err := json.Marshal(sc)
		if err != nil {
			return nil, nil, fmt.Errorf("checkpoint: encode %sscalars: %w", o.prefix, err)
		}
		kk, ks := optKeys(o.prefix)
		meta[kk], meta[ks] = o.s.Kind, string(js)
	}
	if c.Sampler != nil {
		js, err := json.Marshal(c.Sampler)
		if err != nil {
			return nil, nil, fmt.Errorf("checkpoint: encode sampler state: %w", err)
		}
		meta[keySampler] = string(js)
	}
	if c.GradScaler != nil {
		// JSON keeps torch's names, and a float32 scale round-trips exactly
		// (encoding/json writes the shortest float32 form).
		js, err := json.Marshal(c.GradScaler)
		if err != nil {
			return nil, nil, fmt.Errorf("checkpoint: encode GradScaler state: %w", err)
		}
		meta[keyGradScaler] = string(js)
	}
	if c.RNG != nil {
		meta[keyRNG] = base64.StdEncoding.EncodeToString(c.RNG)
	}
	if len(c.Config) > 0 {
		if !json.Valid(c.Config) {
			return nil, nil, fmt.Errorf("checkpoint: Config is not valid JSON")
		}
		meta[keyConfig] = string(c.Config)
	}
	for k, v := range c.Meta {
		meta[keyMetaPrefix+k] = v
	}
	return ts, meta, nil
}

// Write encodes c as a safetensors file.
func (c *Checkpoint) Write(w io.Writer) error {
	ts, meta, err := c.tensorsAndMeta()
	if err != nil {
		return err
	}
	return WriteSafetensors(w, ts, meta)
}

// Save writes c to path atomically: a crash or SIGKILL at any point leaves
// either the previous file or the complete new one.
func Save(path string, c *Checkpoint) error {
	ts, meta, err := c.tensorsAndMeta()
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, func(w io.Writer) error { return WriteSafetensors(w, ts, meta) })
}

// Load reads and verifies the checkpoint at path. A corrupt, truncated or
// foreign file gives an error wrapping ErrCorrupt that names path.
func Load(path string) (*Checkpoint, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return Decode(b, path)
}

// Decode parses a checkpoint file held in b; name labels errors. Unlike
// DecodeSafetensors it requires the goddp checksum.
func Decode(b []byte, name string) (*Checkpoint, error) {
	ts, meta, err := DecodeSafetensors(b, name)
	if err != nil {
		return nil, err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrCorrupt, name, fmt.Sprintf(format, args...))
	}
	if meta[keyVersion] != FormatVersion {
		return nil, bad("not a goddp checkpoint (metadata %s=%q, want %q)", keyVersion, meta[keyVersion], FormatVersion)
	}
	if !hasChecksum(meta) {
		return nil, bad("no checksum")
	}
	c := &Checkpoint{Model: map[string]*tensor.Tensor{}}
	if c.Epoch, err = strconv.Atoi(meta[keyEpoch]); err != nil {
		return nil, bad("epoch: %v", err)
	}
	if c.Step, err = strconv.Atoi(meta[keyStep]); err != nil {
		return nil, bad("step: %v", err)
	}
	for _, o := range []struct {
		prefix string
		dst    **OptimizerState
	}{{prefixOptim, &c.Optimizer}, {prefixSched, &c.Scheduler}} {
		kk, ks := optKeys(o.prefix)
		kind, hasKind := meta[kk]
		if !hasKind {
			continue
		}
		s := &OptimizerState{Kind: kind, Tensors: map[string]*tensor.Tensor{}, Scalars: map[string]float64{}}
		var sc map[string]string
		if err := json.Unmarshal([]byte(meta[ks]), &sc); err != nil {
			return nil, bad("%s: %v", ks, err)
		}
		for k, v := range sc {
			if s.Scalars[k], err = strconv.ParseFloat(v, 64); err != nil {
				return nil, bad("%s[%q]: %v", ks, k, err)
			}
		}
		*o.dst = s
	}
	for k, t := range ts {
		switch {
		case strings.HasPrefix(k, prefixModel):
			c.Model[strings.TrimPrefix(k, prefixModel)] = t
		case strings.HasPrefix(k, prefixOptim) && c.Optimizer != nil:
			c.Optimizer.Tensors[strings.TrimPrefix(k, prefixOptim)] = t
		case strings.HasPrefix(k, prefixSched) && c.Scheduler != nil:
			c.Scheduler.Tensors[strings.TrimPrefix(k, prefixSched)] = t
		default:
			return nil, bad("unexpected tensor %q", k)
		}
	}
	if js, ok := meta[keySampler]; ok {
		c.Sampler = new(data.SamplerState)
		if err := json.Unmarshal([]byte(js), c.Sampler); err != nil {
			return nil, bad("sampler state: %v", err)
		}
	}
	if js, ok := meta[keyGradScaler]; ok {
		c.GradScaler = new(GradScalerState)
		if err := json.Unmarshal([]byte(js), c.GradScaler); err != nil {
			return nil, bad("GradScaler state: %v", err)
		}
	}
	if b64, ok := meta[keyRNG]; ok {
		if c.RNG, err = base64.StdEncoding.DecodeString(b64); err != nil {
			return nil, bad("RNG state: %v", err)
		}
	}
	if js, ok := meta[keyConfig]; ok {
		c.Config = json.RawMessage(js)
	}
	for k, v := range meta {
		if strings.HasPrefix(k, keyMetaPrefix) {
			if c.Meta == nil {
				c.Meta = map[string]string{}
			}
			c.Meta[strings.TrimPrefix(k, keyMetaPrefix)] = v
		}
	}
	return c, nil
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
