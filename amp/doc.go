// Package amp is goddp's mixed-precision training support, after torch.amp:
// a GradScaler for float16 training with dynamic loss scaling.
//
// # GradScaler
//
// float16 has 5 exponent bits: gradients below about 6e-8 flush to zero.
// GradScaler multiplies the loss by a large scale (2^16 at first) before
// backward, so gradients are computed scaled, and divides them again before
// the optimizer step. When a scaled gradient overflows to inf or NaN the step
// is skipped and the scale halved; after 2000 clean steps in a row it is
// doubled. The rule and its float32 arithmetic are torch's, checked against
// fixtures from scripts/gen_fixtures_gradscaler.py over 3000 steps with
// overflows injected.
//
// Under DDP the gradients are all-reduced before Step, so an overflow on one
// rank reaches every rank's gradients anyway; WithGroup all-reduces the
// overflow flag too, so that every rank skips the same steps even for
// gradients that are not all-reduced. The scaler's State goes into the
// checkpoint beside the optimizer's, so a resumed run continues with the
// scale it had.
//
// The parameters and their gradients stay float32 ("master weights"); DDP
// and the optimizers are unchanged.
package amp
