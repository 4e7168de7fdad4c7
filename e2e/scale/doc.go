// Package scale holds the tests of goddp on a simulated multi-node cluster
// (goddp/internal/netcluster: 4 network namespaces of 2 ranks each, a
// bridge, every link shaped with tc): the hierarchical backend against the
// flat one, and examples/mlp at world 8 across the nodes against one node.
// They need root and iproute2 and skip without them. TestElasticResume
// (real processes on this host) kills a 3-rank job mid-epoch and resumes
// it at 2 ranks from the checkpoint it saved (model and sampler state):
// each sample of the epoch seen once, and a loss curve within the noise
// of uninterrupted runs.
package scale
