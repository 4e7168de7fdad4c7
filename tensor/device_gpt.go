package tensor

// The transformer ops (examples/gpt) are on the one-table seam: LayerNorm
// (layernorm.go), attention (attention.go), GELU and Softmax
// (elementwise_grad.go, softmax.go) run their entries of the operands'
// device table, the CPU's included.

// contiguousOrNil is t.Contiguous(), nil for nil.
func contiguousOrNil(t *Tensor) *Tensor {
	if t == nil {
		return nil
	}
	return t.Contiguous()
}
