// Package devices links every goddp device driver, so that a program can
// open any device by torch's name: tensor.OpenDevice("cuda:0"),
// tensor.OpenDevice("sim:1"), and the trainer's -device flag. PyTorch has
// all its devices built in; in goddp each driver registers its kind with
// goddp/tensor's registry from its init function, as database/sql's
// drivers do, so a program chooses the drivers it links:
//
//	import _ "github.com/goddp/goddp/devices"
//
// links goddp/cuda ("cuda": a GPU under the cuda build tag; without the
// tag opening it returns cuda.ErrNotCompiled) and goddp/cuda/sim ("sim":
// the simulated GPU, which runs the GPU kernels on the host). Both need
// cgo: without it this package links neither, and opening "cuda" or "sim"
// fails naming the kinds that are registered. A program that wants one
// driver imports that package instead.
package devices
