package metrics

import (
	"context"
	"fmt"

	"github.com/goddp/goddp/comm/backend"
)

// AllReduceSum sums values elementwise across every rank of pg, in place,
// and returns them. Every rank must call it with the same number of values.
func AllReduceSum(ctx context.Context, pg backend.ProcessGroup, values ...float64) ([]float64, error) {
	if len(values) == 0 || pg.Size() == 1 {
		return values, nil
	}
	if err := pg.AllReduce(backend.Float64s(values), backend.Sum).Wait(ctx); err != nil {
		return nil, fmt.Errorf("metrics: all-reduce of %d values on rank %d of %d: %w", len(values), pg.Rank(), pg.Size(), err)
	}
	return values, nil
}

// Mean accumulates a weighted mean: Add(value, weight) for each batch, such
// as a batch's mean loss weighted by its size. The zero value is empty.
type Mean struct {
	Sum, Weight float64
}

// Add adds value with the given weight.
func (m *Mean) Add(value, weight float64) {
	m.Sum += value * weight
	m.Weight += weight
}

// Value returns this rank's mean (NaN when empty).
func (m *Mean) Value() float64 { return m.Sum / m.Weight }

// Reduce returns the mean over every rank's additions (NaN when all are empty).
func (m *Mean) Reduce(ctx context.Context, pg backend.ProcessGroup) (float64, error) {
	v, err := AllReduceSum(ctx, pg, m.Sum, m.Weight)
	if err != nil {
		return 0, err
	}
	return v[0] / v[1], nil
}

// Accuracy counts correct predictions. The zero value is empty.
type Accuracy struct {
	Correct, Total int64
}

// Add counts the predictions of one batch against its labels.
func (a *Accuracy) Add(pred, labels []int) {
	for i, p := range pred {
		if i < len(labels) && p == labels[i] {
			a.Correct++
		}
	}
	a.Total += int64(min(len(pred), len(labels)))
}

// Value returns this rank's accuracy in [0, 1] (NaN when empty).
func (a *Accuracy) Value() float64 { return float64(a.Correct) / float64(a.Total) }

// Reduce returns the accuracy over every rank's predictions. Counts travel
// as float64, exact up to 2^53.
func (a *Accuracy) Reduce(ctx context.Context, pg backend.ProcessGroup) (float64, error) {
	v, err := AllReduceSum(ctx, pg, float64(a.Correct), float64(a.Total))
	if err != nil {
		return 0, err
	}
	return v[0] / v[1], nil
}
