// Package simd holds the vector kernels of package tensor, written in Go
// assembly over plain slices. They live apart because tensor uses cgo (for
// OpenBLAS), and a cgo package's .s files go to the C assembler.
//
// Each kernel processes the longest prefix it can (a multiple of its
// vector block) and returns its length; the caller finishes the tail with
// its scalar loop, which is also the reference the tests compare against.
// Off amd64 every kernel returns 0.
package simd
