package ddp

import (
	"context"
	"encoding/json"
	"github.com/goddp/goddp/comm/commtest"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBucketLayoutMatchesTorch compares the initial bucket layout with the
// layout torch 1.13's DDP settles on after its rebuild, for sequential
// Linear/ReLU models (testdata/ddp/torch_buckets.py wrote the fixture).
// torch's rebuild uses the observed ready order, bias then weight per
// layer from the last, which is goddp's reverse registration order.
func TestBucketLayoutMatchesTorch(t *testing.T) {
	b, err := os.ReadFile("../testdata/ddp/torch_buckets.json")
	require.NoError(t, err)
	var cases []struct {
		Name         string  `json:"name"`
		Sizes        []int   `json:"sizes"`
		BucketCapMB  float64 `json:"bucket_cap_mb"`
		BucketBytes  []int   `json:"bucket_bytes"`
		ParamIndices [][]int `json:"param_indices"`
	}
	require.NoError(t, json.Unmarshal(b, &cases))
	require.NotEmpty(t, cases)
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			d, err := Wrap(context.Background(), mlpNet(tc.Sizes, 1), commtest.NewGroups(1)[0], BucketCapMB(tc.BucketCapMB))
			require.NoError(t, err)
			assert.Equal(t, tc.ParamIndices, d.r.assignment())
			assert.Equal(t, tc.BucketBytes, d.Stats().BucketBytes)
		})
	}
}
