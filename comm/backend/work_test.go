package backend

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFuture(t *testing.T) {
	boom := errors.New("boom")
	f := FailedFuture(boom)
	assert.True(t, f.IsCompleted())
	assert.ErrorIs(t, f.Wait(context.Background()), boom)

	g := NewFuture()
	assert.False(t, g.IsCompleted())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, g.Wait(ctx), context.Canceled, "a pending future honours ctx")
	assert.True(t, g.Complete(nil))
	assert.False(t, g.Complete(boom), "completes once")
	assert.NoError(t, g.Wait(context.Background()))
}
