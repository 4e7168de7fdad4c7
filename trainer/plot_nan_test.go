package trainer

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A loss that turns NaN or infinite leaves a gap in the curve instead of
// failing the run at its end ("plotter: NaN data point"); a loss that was
// never finite is a clear error.
func TestWritePlotNonFinite(t *testing.T) {
	dir := t.TempDir()
	recs := []Record{
		{Kind: KindTrain, Step: 1, Loss: 2.3, SamplesPerS: 100},
		{Kind: KindTrain, Step: 2, Loss: math.NaN(), SamplesPerS: 100},
		{Kind: KindTrain, Step: 3, Loss: math.Inf(1), SamplesPerS: 100},
		{Kind: KindEval, Step: 3, Eval: map[string]float64{"loss": math.NaN()}},
	}
	require.NoError(t, WritePlot(filepath.Join(dir, "gap.png"), recs))
	require.FileExists(t, filepath.Join(dir, "gap.png"))
	err := WritePlot(filepath.Join(dir, "nan.png"), recs[1:])
	require.ErrorContains(t, err, "no finite training loss in 2 records")
}
