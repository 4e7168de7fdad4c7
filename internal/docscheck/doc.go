// Package docscheck holds tests that keep the repository's scripts and
// guides honest: the training setup (scripts/setup.sh) installs none of the
// test suite's tools, and every command in docs/gpu-training.md runs, on the
// simulated GPU where the guide says cuda. It has no non-test code.
package docscheck
