package ddp

import (
	"context"
	"fmt"
	"testing"

	"github.com/goddp/goddp/comm"
)

// Wrap builds the reducer from the two strategies the configuration
// selects, and RegisterCommHook chooses the reduction again.
func TestStrategiesChosenAtWrap(t *testing.T) {
	cases := []struct {
		name      string
		opts      []Option
		home, red string
	}{
		{"default", nil, "ddp.hostCopies", "ddp.allReduceV"},
		{"no in place", []Option{ReduceInPlace(false)}, "ddp.hostCopies", "ddp.allReduce"},
		{"bucket view", []Option{GradientAsBucketView(true)}, "ddp.hostViews", "ddp.allReduce"},
		{"hook", []Option{WithCommHook(FP16CompressHook())}, "ddp.hostCopies", "ddp.hookReduce"},
		{"hook on views", []Option{GradientAsBucketView(true), WithCommHook(BF16CompressHook())}, "ddp.hostViews", "ddp.hookReduce"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
				d, err := Wrap(context.Background(), dotNet([][]int{{4}}), pg, c.opts...)
				if err != nil {
					return err
				}
				defer d.Close()
				if h, r := fmt.Sprintf("%T", d.r.home), fmt.Sprintf("%T", d.r.red); h != c.home || r != c.red {
					return fmt.Errorf("strategies %s + %s, want %s + %s", h, r, c.home, c.red)
				}
				return nil
			})
			requireNoErrs(t, errs)
		})
	}
	t.Run("hook after Wrap", func(t *testing.T) {
		errs := runRanks(t, 2, func(rank int, pg comm.ProcessGroup) error {
			d, err := Wrap(context.Background(), dotNet([][]int{{4}}), pg)
			if err != nil {
				return err
			}
			defer d.Close()
			d.RegisterCommHook(FP16CompressHook())
			if r := fmt.Sprintf("%T", d.r.red); r != "ddp.hookReduce" {
				return fmt.Errorf("after RegisterCommHook the buckets are reduced by %s", r)
			}
			if got := d.Stats().Reduction; got != "copies" {
				return fmt.Errorf("Reduction %q after RegisterCommHook, want copies", got)
			}
			return nil
		})
		requireNoErrs(t, errs)
	})
}
