package sim

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/goddp/goddp/comm/backend"
)

// A Wait whose ctx ends first is a timeout; once the op completes, Wait
// gives its result whatever the ctx.
func TestWorkWait(t *testing.T) {
	w := work{backend.NewFuture()}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := w.Wait(ctx)
	assert.ErrorIs(t, err, backend.ErrTimeout)
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, w.IsCompleted())

	boom := errors.New("boom")
	w.Complete(boom)
	assert.True(t, w.IsCompleted())
	assert.Equal(t, boom, w.Wait(ctx))
	assert.Equal(t, boom, w.Wait(context.Background()))
}
