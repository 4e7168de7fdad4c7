// Package depcheck holds no code: its test checks what goddp's packages
// link (go list -deps), so that a library handed a process group does not
// pull in the comm drivers, the tensor core stays free of gorgonia, and a
// CPU example stays small (issue 44, 2026-11-29).
package depcheck
