//go:build !cgo

// Without cgo the package has no C files, so the compiler insists on bodies
// for declared functions unless an assembly file exists: this empty one lets
// alloc.go declare the runtime's mallocgc by linkname.
