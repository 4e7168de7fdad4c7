//go:build cgo && !noblas && !nodnnl

package tensor

const engineName = "onednn+openblas"
const engineHasDNNL = true
