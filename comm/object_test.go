package comm

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm/commtest"
)

type testMeta struct {
	Name   string
	Shapes [][]int
	Seed   uint64
}

func TestObjectCollectives(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errs := commtest.Run(commtest.NewGroups(3), func(g ProcessGroup) error {
		m := testMeta{Name: fmt.Sprintf("rank-%d", g.Rank()), Shapes: make([][]int, g.Rank()), Seed: uint64(g.Rank()) * 7}
		all, err := AllGatherObject(ctx, g, m)
		if err != nil {
			return err
		}
		for r, got := range all {
			want := testMeta{Name: fmt.Sprintf("rank-%d", r), Shapes: make([][]int, r), Seed: uint64(r) * 7}
			if len(want.Shapes) == 0 {
				want.Shapes = nil // gob drops empty slices
			}
			if !reflect.DeepEqual(got, want) {
				return fmt.Errorf("object of rank %d: %+v, want %+v", r, got, want)
			}
		}
		v := m
		if err := BroadcastObject(ctx, g, &v, 1); err != nil {
			return err
		}
		if v.Name != "rank-1" || v.Seed != 7 {
			return fmt.Errorf("broadcast object: %+v", v)
		}
		return nil
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}
