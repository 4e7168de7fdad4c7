package tensor

import "fmt"

// Triu returns a copy of a with the elements below the diagonal-th diagonal
// of its last two dimensions set to zero, as torch.triu: element (i, j) is
// kept when j-i >= diagonal. With a = Ones(dt, T, T) and diagonal 1 it is the
// causal attention mask (1 where a query must not see a key).
func Triu(a *Tensor, diagonal int) *Tensor { return triangle("Triu", a, diagonal, true) }

// Tril returns a copy of a with the elements above the diagonal-th diagonal
// of its last two dimensions set to zero, as torch.tril: element (i, j) is
// kept when j-i <= diagonal.
func Tril(a *Tensor, diagonal int) *Tensor { return triangle("Tril", a, diagonal, false) }

func triangle(op string, a *Tensor, diagonal int, upper bool) *Tensor {
	if a.Dim() < 2 {
		panic(fmt.Sprintf("tensor: %s: want at least 2 dimensions, got shape %s", op, sh(a.shape)))
	}
	out := a.Clone()
	rows, cols := a.shape[a.Dim()-2], a.shape[a.Dim()-1]
	if out.dtype == Float64 {
		triangleZero(out.F64(), rows, cols, diagonal, upper)
	} else {
		triangleZero(out.F32(), rows, cols, diagonal, upper)
	}
	return out
}

// triangleZero zeroes, in every rows×cols matrix of x, the elements outside
// the kept triangle.
func triangleZero[T float](x []T, rows, cols, diagonal int, upper bool) {
	if rows*cols == 0 {
		return
	}
	for m := 0; m < len(x); m += rows * cols {
		for i := 0; i < rows; i++ {
			row := x[m+i*cols : m+(i+1)*cols]
			for j := range row {
				if d := j - i; (upper && d < diagonal) || (!upper && d > diagonal) {
					row[j] = 0
				}
			}
		}
	}
}
