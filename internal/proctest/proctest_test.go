package proctest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goddp/goddp/comm/store"
)

func TestMain(m *testing.M) {
	Main(m, map[string]func() error{
		// meet: every rank adds to a counter in the hosted store and waits
		// for the others.
		"meet": func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := store.Dial(ctx, os.Getenv("MASTER_ADDR")+":"+os.Getenv("MASTER_PORT"), store.WithToken(os.Getenv("GODDP_TOKEN")))
			if err != nil {
				return err
			}
			defer s.Close()
			if _, err := s.Add(ctx, "arrived", 1); err != nil {
				return err
			}
			if err := s.Set(ctx, "rank/"+os.Getenv("RANK"), []byte("x")); err != nil {
				return err
			}
			world, _ := strconv.Atoi(os.Getenv("WORLD_SIZE"))
			for r := range world {
				if err := s.Wait(ctx, "rank/"+strconv.Itoa(r)); err != nil {
					return err
				}
			}
			fmt.Println("met", os.Getenv("RANK"))
			return nil
		},
		// failone: rank 1 fails at once, the others would hang forever.
		"failone": func() error {
			if os.Getenv("RANK") == "1" {
				return errors.New("deliberate failure")
			}
			select {}
		},
		"hang": func() error { select {} },
	})
}

func TestWorldMeetsThroughTheStore(t *testing.T) {
	res := Run(t, Options{Worker: "meet", World: 3, Timeout: time.Minute})
	RequireSuccess(t, res)
	for _, r := range res {
		assert.Contains(t, r.Stdout, fmt.Sprintf("met %d", r.Rank))
	}
}

func TestFirstFailureStopsAll(t *testing.T) {
	start := time.Now()
	res := Run(t, Options{Worker: "failone", World: 3, Timeout: time.Minute})
	assert.Less(t, time.Since(start), 30*time.Second, "the hanging ranks were stopped, not waited for")
	assert.Equal(t, 3, res[1].Code)
	assert.Contains(t, res[1].Stderr, "deliberate failure")
	for _, r := range []int{0, 2} {
		assert.Equal(t, -int(syscall.SIGKILL), res[r].Code)
		assert.True(t, res[r].Stopped)
	}
}

// A hang fails the test: run it in a sub-test whose failure is expected.
func TestTimeoutKillsAndFails(t *testing.T) {
	ft := &fakeT{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { recover() }()
		Run(ft, Options{Worker: "hang", World: 2, Timeout: time.Second})
	}()
	<-done
	assert.True(t, ft.failed)
	assert.Contains(t, ft.msg, "a hang")
}

// fakeT records Fatalf instead of failing the real test.
type fakeT struct {
	testing.TB
	failed bool
	msg    string
}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = true
	f.msg = fmt.Sprintf(format, args...)
	panic("fatal")
}

func (f *fakeT) Helper() {}

func TestUnknownWorker(t *testing.T) {
	res := Run(t, Options{Worker: "nope", World: 1, Timeout: time.Minute})
	require.Equal(t, 2, res[0].Code)
}
