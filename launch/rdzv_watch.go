package launch

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// During a round every launcher polls the rendezvous store: it bumps its
// heartbeat, looks for a published failure, for a node whose heartbeat
// stopped, for nodes waiting to join (elastic), and for a job shutdown.

func (r *storeRdzv) watch(ctx context.Context, asg *assignment) (*remoteEvent, error) {
	return r.check(ctx, asg, true)
}

func (r *storeRdzv) check(ctx context.Context, asg *assignment, membership bool) (*remoteEvent, error) {
	poll := max(r.a.cfg.MonitorInterval, minPollEvery)
	if time.Since(r.lastPoll) < poll {
		return nil, nil
	}
	r.lastPoll = time.Now()
	if _, err := r.add(ctx, r.key(asg.Round, "hb", asg.GroupRank), 1); err != nil {
		return nil, err
	}
	if err := r.checkClosed(ctx); err != nil {
		return nil, err
	}
	if n, err := r.add(ctx, r.key(asg.Round, "failed"), 0); err != nil {
		return nil, err
	} else if n > 0 {
		var data []byte
		if err := r.do(ctx, func(c context.Context) (err error) { data, err = r.st.Get(c, r.key(asg.Round, "failure")); return }); err != nil {
			return nil, err
		}
		f := WorkerFailure{}
		_ = json.Unmarshal(data, &f)
		return &remoteEvent{failure: &f}, nil
	}
	if r.hbRound != asg.Round {
		r.hbRound, r.hb = asg.Round, map[int]*hbSeen{}
	}
	for _, pn := range asg.Nodes {
		if pn.GroupRank == asg.GroupRank {
			continue
		}
		c, err := r.add(ctx, r.key(asg.Round, "hb", pn.GroupRank), 0)
		if err != nil {
			return nil, err
		}
		s := r.hb[pn.GroupRank]
		if s == nil || s.count != c {
			r.hb[pn.GroupRank] = &hbSeen{count: c, at: time.Now()}
			continue
		}
		if time.Since(s.at) > r.a.cfg.HeartbeatTimeout {
			f := WorkerFailure{
				Rank: pn.RankOffset, LocalRank: -1, GroupRank: pn.GroupRank, Host: pn.Host, PID: pn.PID,
				ExitCode: -1, Time: time.Now(), Attempt: asg.RestartCount, NodeLost: true,
				Record: &ErrorRecord{Message: fmt.Sprintf("the launcher of node %d (%s) sent no heartbeat for %s: it died, or the network to it failed",
					pn.GroupRank, pn.Host, r.a.cfg.HeartbeatTimeout)},
			}
			r.peers-- // it will not acknowledge the end of the job
			root := r.fail(ctx, asg, f)
			return &remoteEvent{failure: &root}, nil
		}
	}
	if membership && asg.GroupWorldSize < r.a.cfg.MaxNodes {
		if n, err := r.add(ctx, r.key(asg.Round+1, "joined"), 0); err != nil {
			return nil, err
		} else if n > 0 {
			return &remoteEvent{membership: true}, nil
		}
	}
	return nil, nil
}

func (r *storeRdzv) fail(ctx context.Context, asg *assignment, f WorkerFailure) WorkerFailure {
	data, _ := json.Marshal(f)
	var cur []byte
	err := r.do(ctx, func(c context.Context) (err error) {
		cur, err = r.st.CompareSet(c, r.key(asg.Round, "failure"), nil, data)
		return
	})
	_, _ = r.add(ctx, r.key(asg.Round, "failed"), 1)
	if err != nil {
		return f
	}
	root := WorkerFailure{}
	if json.Unmarshal(cur, &root) != nil {
		return f
	}
	return root
}

func (r *storeRdzv) done(ctx context.Context, asg *assignment) (*remoteEvent, error) {
	if _, err := r.add(ctx, r.key(asg.Round, "done"), 1); err != nil {
		return nil, err
	}
	for {
		n, err := r.add(ctx, r.key(asg.Round, "done"), 0)
		if err != nil {
			return nil, err
		}
		if int(n) >= asg.GroupWorldSize {
			return nil, nil
		}
		if ev, err := r.check(ctx, asg, false); err != nil || ev != nil {
			return ev, err
		}
		if err := sleepCtx(ctx, max(r.a.cfg.MonitorInterval, minPollEvery)); err != nil {
			return nil, err
		}
	}
}

// checkClosed returns an error once some node shut the job down.
func (r *storeRdzv) checkClosed(ctx context.Context) error {
	n, err := r.add(ctx, r.jobKey("closedn"), 0)
	if err != nil || n == 0 {
		return err
	}
	var reason []byte
	_ = r.do(ctx, func(c context.Context) (err error) { reason, err = r.st.Get(c, r.jobKey("closed")); return })
	return fmt.Errorf("%w: the job was shut down: %s", ErrRendezvous, reason)
}

func (r *storeRdzv) shutdown(reason string) {
	if r.st == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if r.st.Set(ctx, r.jobKey("closed"), []byte(reason)) == nil {
		_, _ = r.st.Add(ctx, r.jobKey("closedn"), 1)
	}
	if r.isHost {
		// Nodes blocked waiting for this round's plan learn it at once.
		data, _ := json.Marshal(rdzvPlan{Error: "the job was shut down: " + reason})
		_, _ = r.st.CompareSet(ctx, r.key(r.round, "plan"), nil, data)
	}
}

func (r *storeRdzv) endRound(*assignment) {
	if r.wsrv != nil {
		_ = r.wsrv.Close()
		r.wsrv = nil
	}
}

// close acknowledges the end of the job; the host waits (briefly) for
// every node's acknowledgement before it takes the store down.
func (r *storeRdzv) close() {
	r.endRound(nil)
	if r.st != nil {
		ctx, cancel := context.WithTimeout(context.Background(), r.a.cfg.StopGrace+5*time.Second)
		key := r.key(r.round, "left")
		if r.isHost {
			for r.peers > 0 {
				n, err := r.st.Add(ctx, key, 0)
				if err != nil || int(n) >= r.peers {
					break
				}
				if sleepCtx(ctx, 50*time.Millisecond) != nil {
					break
				}
			}
		} else {
			_, _ = r.st.Add(ctx, key, 1)
		}
		cancel()
		_ = r.st.Close()
	}
	if r.srv != nil {
		_ = r.srv.Close()
	}
}

// add is Store.Add with the operation timeout and a rendezvous error.
func (r *storeRdzv) add(ctx context.Context, key string, delta int64) (int64, error) {
	var n int64
	err := r.do(ctx, func(c context.Context) (err error) { n, err = r.st.Add(c, key, delta); return })
	return n, err
}

func (r *storeRdzv) do(ctx context.Context, op func(context.Context) error) error {
	c, cancel := context.WithTimeout(ctx, storeOpTimeout)
	defer cancel()
	if err := op(c); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: lost the rendezvous store at %s: %w", ErrRendezvous, r.endpoint, err)
	}
	return nil
}
