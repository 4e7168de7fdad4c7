// Package ptxcheck assembles PTX to GPU machine code with NVIDIA's PTX
// compiler library (libnvptxcompiler_static, from Debian's
// nvidia-cuda-dev), without a GPU: the check that goddp/cuda's kernels
// would load. It has code only with -tags cuda; its test checks
// goddp/cuda/kernels.PTX for sm_70, sm_80 and sm_90.
package ptxcheck
