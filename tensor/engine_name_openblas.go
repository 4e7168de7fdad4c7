//go:build cgo && !noblas && nodnnl

package tensor

const engineName = "openblas"
const engineHasDNNL = false
