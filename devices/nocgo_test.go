//go:build !cgo

package devices_test

const cgoEnabled = false
