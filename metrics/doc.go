// Package metrics reduces scalar training and evaluation metrics (a mean
// loss, an accuracy) across the ranks of a process group, as one would with
// dist.all_reduce on a tensor of sums and counts in torch.
//
// Each rank accumulates its own sums and counts locally (Mean, Accuracy),
// then every rank calls Reduce with the same group, in the same order, and
// gets the metric over all ranks' samples: sums and counts are all-reduced
// together in one float64 collective, so ranks with different sample counts
// (an evaluation set sharded without padding) are weighted correctly.
// AllReduceSum is the primitive underneath, for any other scalars.
package metrics
