package main

import (
	"embed"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// The built-in profiles, written by scripts/gen_profiles.py in the format of
// ../shared/anchors/profiles (which torch_grad_sync.py reads) plus the
// per-parameter backward FLOPs that -compute flops uses.
//
//go:embed profiles/*.json
var builtinProfiles embed.FS

// profileNames are the profiles -profile accepts by name.
var profileNames = []string{"resnet50", "gpt2"}

// profile is a real model's parameter list, in named_parameters order.
type profile struct {
	Name      string
	Model     string
	Params    []profileParam
	FlopsUnit string // what one sample of BackwardFlops is
}

// profileParam is one parameter tensor.
type profileParam struct {
	Name  string
	Shape []int
	// BackwardFlops is the backward work (per sample) that precedes this
	// parameter's gradient becoming ready; 0 when the profile has none.
	BackwardFlops float64
}

func (p profileParam) numel() int64 {
	n := int64(1)
	for _, d := range p.Shape {
		n *= int64(d)
	}
	return n
}

// numel is the profile's parameter count.
func (p *profile) numel() int64 {
	var n int64
	for _, q := range p.Params {
		n += q.numel()
	}
	return n
}

// gradBytes is the size of its float32 gradients.
func (p *profile) gradBytes() int64 { return 4 * p.numel() }

// hasFlops reports whether the profile carries backward FLOPs.
func (p *profile) hasFlops() bool {
	for _, q := range p.Params {
		if q.BackwardFlops > 0 {
			return true
		}
	}
	return false
}

// loadProfile returns a built-in profile by name, or reads a JSON file
// ({"params": [[name, [dims...]], ...]}, optionally "backward_flops").
func loadProfile(spec string) (*profile, error) {
	for _, n := range profileNames {
		if spec == n {
			b, err := builtinProfiles.ReadFile("profiles/" + n + ".json")
			if err != nil {
				return nil, fmt.Errorf("profile %s: %w", n, err)
			}
			return parseProfile(n, b)
		}
	}
	if !strings.HasSuffix(spec, ".json") {
		return nil, fmt.Errorf("-profile %q: want %s or a .json file", spec, strings.Join(profileNames, ", "))
	}
	b, err := os.ReadFile(spec)
	if err != nil {
		return nil, fmt.Errorf("-profile: %w", err)
	}
	name := spec[strings.LastIndexAny(spec, `/\`)+1:]
	return parseProfile(strings.TrimSuffix(name, ".json"), b)
}

func parseProfile(name string, b []byte) (*profile, error) {
	var raw struct {
		Model         string              `json:"model"`
		Params        [][]json.RawMessage `json:"params"`
		FlopsUnit     string              `json:"flops_unit"`
		BackwardFlops []float64           `json:"backward_flops"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("profile %s: %w", name, err)
	}
	if len(raw.Params) == 0 {
		return nil, fmt.Errorf("profile %s: no params", name)
	}
	if raw.BackwardFlops != nil && len(raw.BackwardFlops) != len(raw.Params) {
		return nil, fmt.Errorf("profile %s: %d backward_flops for %d params", name, len(raw.BackwardFlops), len(raw.Params))
	}
	p := &profile{Name: name, Model: raw.Model, FlopsUnit: raw.FlopsUnit}
	for i, e := range raw.Params {
		var q profileParam
		if len(e) != 2 {
			return nil, fmt.Errorf("profile %s: param %d: want [name, shape]", name, i)
		}
		if err := json.Unmarshal(e[0], &q.Name); err != nil {
			return nil, fmt.Errorf("profile %s: param %d name: %w", name, i, err)
		}
		if err := json.Unmarshal(e[1], &q.Shape); err != nil {
			return nil, fmt.Errorf("profile %s: param %d (%s) shape: %w", name, i, q.Name, err)
		}
		for _, d := range q.Shape {
			if d <= 0 {
				return nil, fmt.Errorf("profile %s: param %d (%s) has shape %v", name, i, q.Name, q.Shape)
			}
		}
		if raw.BackwardFlops != nil {
			if q.BackwardFlops = raw.BackwardFlops[i]; q.BackwardFlops < 0 {
				return nil, fmt.Errorf("profile %s: param %d (%s) has negative backward_flops", name, i, q.Name)
			}
		}
		p.Params = append(p.Params, q)
	}
	return p, nil
}
