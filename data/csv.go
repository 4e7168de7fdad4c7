package data

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/goddp/goddp/tensor"
)

// CSVOptions says how to read a numeric CSV file.
type CSVOptions struct {
	// Header: the first row names the columns.
	Header bool
	// Target selects the target column: a column name (with Header), or a
	// 0-based column number, negative counting from the end ("-1" is the
	// last column). Empty means no target: every column is an input.
	Target string
	// Labels parses the target as an integer class index (Batch.Labels)
	// instead of a float (Batch.Targets, shape [N, 1]).
	Labels bool
	// Comma is the field delimiter (default ',').
	Comma rune
	// DType of the input and target tensors (default Float32).
	DType tensor.DType
}

// ReadCSV reads a CSV file of numbers into a dataset: one sample per row,
// the target column (if any) split off, the other columns forming the input
// vector. Malformed input gets an error naming the file, line and column.
func ReadCSV(path string, opts CSVOptions) (*TensorDataset, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("data: read CSV: %w", err)
	}
	defer f.Close()
	return DecodeCSV(f, path, opts)
}

// DecodeCSV is ReadCSV on a reader; name labels errors.
func DecodeCSV(r io.Reader, name string, opts CSVOptions) (*TensorDataset, error) {
	cr := csv.NewReader(r)
	if opts.Comma != 0 {
		cr.Comma = opts.Comma
	}
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = true
	cr.FieldsPerRecord = 0 // every row must have as many fields as the first
	readRow := func() ([]string, error) {
		rec, err := cr.Read()
		if err != nil && !errors.Is(err, io.EOF) {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, fmt.Errorf("%w: %s: line %d, column %d: %w", ErrFormat, name, pe.Line, pe.Column, pe.Err)
			}
			return nil, fmt.Errorf("data: read CSV %s: %w", name, err)
		}
		return rec, err
	}

	var header []string
	if opts.Header {
		rec, err := readRow()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: %s: empty file, expected a header row", ErrFormat, name)
		}
		if err != nil {
			return nil, err
		}
		header = append([]string(nil), rec...)
	}
	var cols []float64
	var labels []int
	var targets []float64
	ncol, target := -1, -1
	rows := 0
	for {
		rec, err := readRow()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if ncol < 0 {
			ncol = len(rec)
			if target, err = resolveTarget(opts.Target, header, ncol, name); err != nil {
				return nil, err
			}
		}
		line, _ := cr.FieldPos(0)
		for c, field := range rec {
			field = strings.TrimSpace(field)
			if c == target && opts.Labels {
				v, err := strconv.Atoi(field)
				if err != nil {
					return nil, fmt.Errorf("%w: %s: line %d, column %d: class label %q is not an integer", ErrFormat, name, line, c+1, field)
				}
				labels = append(labels, v)
				continue
			}
			v, err := strconv.ParseFloat(field, 64)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: line %d, column %d: %q is not a number", ErrFormat, name, line, c+1, field)
			}
			if c == target {
				targets = append(targets, v)
			} else {
				cols = append(cols, v)
			}
		}
		rows++
	}
	if rows == 0 {
		return nil, fmt.Errorf("%w: %s: no data rows", ErrFormat, name)
	}
	width := ncol
	if target >= 0 {
		width--
	}
	if width == 0 {
		return nil, fmt.Errorf("%w: %s: no input columns besides the target", ErrFormat, name)
	}
	inputs := floatTensor(cols, opts.DType, rows, width)
	switch {
	case target < 0:
		return NewTensorDataset(inputs, nil)
	case opts.Labels:
		return NewLabeledDataset(inputs, labels)
	default:
		return NewTensorDataset(inputs, floatTensor(targets, opts.DType, rows, 1))
	}
}

func resolveTarget(spec string, header []string, ncol int, name string) (int, error) {
	if spec == "" {
		return -1, nil
	}
	for i, h := range header {
		if strings.TrimSpace(h) == spec {
			return i, nil
		}
	}
	c, err := strconv.Atoi(spec)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: no column named %q in header %q", ErrConfig, name, spec, header)
	}
	if c < 0 {
		c += ncol
	}
	if c < 0 || c >= ncol {
		return 0, fmt.Errorf("%w: %s: target column %s out of range for %d columns", ErrConfig, name, spec, ncol)
	}
	return c, nil
}

func floatTensor(v []float64, dt tensor.DType, shape ...int) *tensor.Tensor {
	if dt == tensor.Float64 {
		return tensor.FromF64(v, shape...)
	}
	f := make([]float32, len(v))
	for i, x := range v {
		f[i] = float32(x) // IEEE rounding: out-of-range values become ±Inf
	}
	return tensor.FromF32(f, shape...)
}
