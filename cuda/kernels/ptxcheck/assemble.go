//go:build cuda

package ptxcheck

/*
#cgo LDFLAGS: -lnvptxcompiler_static -lpthread -lm -lstdc++
#include <nvPTXCompiler.h>
#include <stdio.h>
#include <stdlib.h>

// assemble compiles ptx for the GPU option arch ("--gpu-name=sm_80"). On
// failure it returns the compiler's log (to free), else NULL and the size
// of the machine code.
static char *assemble(const char *ptx, size_t n, const char *arch, size_t *sass) {
	nvPTXCompilerHandle h;
	*sass = 0;
	if (nvPTXCompilerCreate(&h, n, ptx) != NVPTXCOMPILE_SUCCESS) {
		char *e = malloc(64);
		snprintf(e, 64, "nvPTXCompilerCreate failed");
		return e;
	}
	const char *opts[] = {arch};
	char *log = NULL;
	nvPTXCompileResult rc = nvPTXCompilerCompile(h, 1, opts);
	if (rc != NVPTXCOMPILE_SUCCESS) {
		size_t m = 0;
		nvPTXCompilerGetErrorLogSize(h, &m);
		log = malloc(m + 64);
		int k = snprintf(log, 64, "nvPTXCompilerCompile error %d: ", (int)rc);
		nvPTXCompilerGetErrorLog(h, log + k);
		log[k + m] = 0;
	} else {
		nvPTXCompilerGetCompiledProgramSize(h, sass);
	}
	nvPTXCompilerDestroy(&h);
	return log;
}
*/
import "C"

import (
	"errors"
	"unsafe"
)

// Assemble compiles ptx for arch (e.g. "sm_80") and returns the size of
// the machine code, or the compiler's error log.
func Assemble(ptx, arch string) (int, error) {
	cptx := C.CString(ptx)
	defer C.free(unsafe.Pointer(cptx))
	carch := C.CString("--gpu-name=" + arch)
	defer C.free(unsafe.Pointer(carch))
	var sass C.size_t
	if log := C.assemble(cptx, C.size_t(len(ptx)), carch, &sass); log != nil {
		defer C.free(unsafe.Pointer(log))
		return 0, errors.New("ptxcheck: " + arch + ": " + C.GoString(log))
	}
	return int(sass), nil
}
