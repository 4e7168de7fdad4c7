package trainer

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/data"
)

func TestMidEpoch(t *testing.T) {
	now := func(replicas int, dropLast bool) *data.DistributedSampler {
		s, err := data.NewDistributedSampler(data.NewSequentialSampler(10), data.SamplerReplicas(replicas), data.SamplerRank(0), data.SamplerDropLast(dropLast))
		require.NoError(t, err)
		return s
	}
	for _, tc := range []struct {
		name string
		st   data.SamplerState
		now  *data.DistributedSampler
		want bool
	}{
		{"same world, inside", data.SamplerState{Position: 2, NumReplicas: 3, DatasetLen: 10}, now(3, false), true},
		{"same world, at the end", data.SamplerState{Position: 4, NumReplicas: 3, DatasetLen: 10}, now(3, false), false},
		{"3 to 2, inside", data.SamplerState{Position: 2, NumReplicas: 3, DatasetLen: 10}, now(2, false), true},
		{"3 to 2, at the end", data.SamplerState{Position: 4, NumReplicas: 3, DatasetLen: 10}, now(2, false), false},
		{"3 to 2 with drop_last, at the end", data.SamplerState{Position: 3, NumReplicas: 3, DatasetLen: 10, DropLast: true}, now(2, true), false},
		{"3 to 2 with drop_last, inside", data.SamplerState{Position: 2, NumReplicas: 3, DatasetLen: 10, DropLast: true}, now(2, true), true},
	} {
		require.Equal(t, tc.want, midEpoch(tc.st, tc.now), tc.name)
	}
}
