package tensor

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// DeviceDriver opens the device of a kind by ordinal: "sim" opens sim:N,
// "cuda" opens cuda:N.
type DeviceDriver func(ordinal int) (Device, error)

// The registry of device drivers by kind, filled by the drivers' init
// functions as database/sql's drivers are: a program selects a device by
// name (OpenDevice("cuda:0")) with a blank import of the driver package,
// and the default build links only the drivers it imports. It is the one
// piece of mutable package state, written only at init.
var (
	driversMu sync.RWMutex
	drivers   = map[string]DeviceDriver{}
)

// RegisterDevice makes a device kind available to OpenDevice. It panics
// when kind is registered twice, is empty, contains ':' or is "cpu".
func RegisterDevice(kind string, open DeviceDriver) {
	if kind == "" || kind == "cpu" || strings.Contains(kind, ":") || open == nil {
		panic(fmt.Sprintf("tensor: RegisterDevice(%q): invalid kind or nil driver", kind))
	}
	driversMu.Lock()
	defer driversMu.Unlock()
	if _, dup := drivers[kind]; dup {
		panic(fmt.Sprintf("tensor: RegisterDevice called twice for %q", kind))
	}
	drivers[kind] = open
}

// DeviceKinds lists the registered kinds, "cpu" first, then sorted.
func DeviceKinds() []string {
	driversMu.RLock()
	defer driversMu.RUnlock()
	ks := make([]string, 0, len(drivers))
	for k := range drivers {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return append([]string{"cpu"}, ks...)
}

// OpenDevice opens a device by torch's name: "cpu", or "kind:N" ("sim:0",
// "cuda:1") of a registered kind ("kind" alone is "kind:0"). Each call
// opens the device anew: open it once and keep it, since tensors are on
// the same device when their Device is the same value.
func OpenDevice(name string) (Device, error) {
	if name == "cpu" {
		return CPU(), nil
	}
	kind, ord, ok := strings.Cut(name, ":")
	n := 0
	if ok {
		var err error
		if n, err = strconv.Atoi(ord); err != nil || n < 0 {
			return nil, fmt.Errorf("%w: device %q: the ordinal must be a number >= 0", ErrDevice, name)
		}
	}
	driversMu.RLock()
	open, found := drivers[kind]
	driversMu.RUnlock()
	if !found {
		return nil, fmt.Errorf("%w: no driver for device %q (registered: %s; import the driver package, e.g. _ \"goddp/cuda/sim\")",
			ErrDevice, name, strings.Join(DeviceKinds(), ", "))
	}
	d, err := open(n)
	if err != nil {
		return nil, fmt.Errorf("%w: opening %s: %w", ErrDevice, name, err)
	}
	return d, nil
}
