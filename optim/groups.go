package optim

import "github.com/goddp/goddp/autograd"

// DecayGroups splits params into the two groups of nanoGPT's
// configure_optimizers: group 0 holds the parameters of two or more
// dimensions (the weights of Linear layers and embeddings) with
// weightDecay, group 1 the rest (biases, LayerNorm's weight and bias) with
// none. Both groups start at lr and keep the parameters' order; either may
// be empty, so that the optimizer's state dict has the same two groups
// whatever the model.
func DecayGroups(params []*autograd.Variable, lr, weightDecay float64) []ParamGroup {
	decay := ParamGroup{LR: lr, WeightDecay: weightDecay}
	rest := ParamGroup{LR: lr}
	for _, p := range params {
		if p != nil && p.Value != nil && p.Value.Dim() >= 2 {
			decay.Params = append(decay.Params, p)
		} else {
			rest.Params = append(rest.Params, p)
		}
	}
	return []ParamGroup{decay, rest}
}

// NewAdamWGroups returns torch's AdamW over the given groups
// (torch.optim.AdamW(param_groups, lr=..., betas=..., eps=...)): each
// group's LR and WeightDecay are its own, cfg gives the betas, eps and the
// rest. With DecayGroups it is nanoGPT's optimizer.
func NewAdamWGroups(groups []ParamGroup, cfg AdamConfig) (*Adam, error) {
	o, err := NewAdamW(nil, cfg)
	if err != nil {
		return nil, err
	}
	for _, g := range groups {
		if err := o.AddParamGroup(g); err != nil {
			return nil, err
		}
	}
	return o, nil
}
