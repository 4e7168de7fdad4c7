// Command elastic walks one epoch of a DistributedSampler in lockstep, as
// a data-parallel job does, and logs every index it takes, so that a test
// can kill it mid-epoch at one world size, restart it at another and check
// that the epoch saw each sample exactly once.
//
// Each step every rank takes its next batch, logs "step=S idx=i,j,..." to
// -log/rank<R>.world<W>, and all-reduces its count (the lockstep a
// gradient all-reduce imposes); then rank 0 saves the sampler's state to
// -state (written aside and renamed, as a checkpoint is). A run finding a
// state resumes from it with LoadStateElastic. With -hold-after K rank 0
// stops after saving step K and waits to be killed.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/goddp/goddp/comm"
	"github.com/goddp/goddp/data"
)

type sized int

func (s sized) Len() int { return int(s) }

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "elastic: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	n := flag.Int("n", 1000, "dataset length")
	batch := flag.Int("batch", 8, "batch size per rank")
	epoch := flag.Int("epoch", 3, "the epoch")
	statePath := flag.String("state", "", "sampler state file")
	logDir := flag.String("log", "", "directory of the index logs")
	holdAfter := flag.Int("hold-after", 0, "rank 0 waits to be killed after saving this many steps (0: never)")
	flag.Parse()
	ctx := context.Background()
	pg, err := comm.InitFromEnv(ctx)
	if err != nil {
		return err
	}
	defer pg.Close()
	r, w := pg.Rank(), pg.Size()
	fmt.Printf("rank=%d pid=%d world=%d\n", r, os.Getpid(), w)
	s, err := data.NewDistributedSampler(sized(*n), data.SamplerGroup(pg), data.SamplerSeed(1))
	if err != nil {
		return err
	}
	if b, err := os.ReadFile(*statePath); err == nil {
		var st data.SamplerState
		if err := json.Unmarshal(b, &st); err != nil {
			return err
		}
		if err := s.LoadStateElastic(st); err != nil {
			return err
		}
		fmt.Printf("rank=%d resumed from %+v\n", r, st)
	}
	s.SetEpoch(*epoch)
	log, err := os.OpenFile(filepath.Join(*logDir, fmt.Sprintf("rank%d.world%d", r, w)), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	idx := s.Indices()
	// The ranks' lists may differ by one after a re-shard: they agree on
	// the number of steps (the longest), as ddp's join does.
	left := []int64{int64(len(idx) - s.Position())}
	if err := pg.AllReduce(comm.Int64s(left), comm.Max).Wait(ctx); err != nil {
		return err
	}
	steps := (int(left[0]) + *batch - 1) / *batch
	for step := range steps {
		pos := s.Position()
		b := idx[min(pos, len(idx)):min(pos+*batch, len(idx))]
		strs := make([]string, len(b))
		for i, v := range b {
			strs[i] = strconv.Itoa(v)
		}
		fmt.Fprintf(log, "step=%d idx=%s\n", step, strings.Join(strs, ","))
		count := []int64{int64(len(b))}
		if err := pg.AllReduce(comm.Int64s(count), comm.Sum).Wait(ctx); err != nil {
			return err
		}
		s.SetPosition(pos + len(b))
		if r == 0 {
			st, _ := json.Marshal(s.State())
			if err := os.WriteFile(*statePath+".tmp", st, 0o644); err != nil {
				return err
			}
			if err := os.Rename(*statePath+".tmp", *statePath); err != nil {
				return err
			}
			if *holdAfter > 0 && step+1 == *holdAfter {
				fmt.Printf("holding after step %d\n", step)
				time.Sleep(2 * time.Minute) // the test kills the job long before
				return fmt.Errorf("rank 0 was not killed")
			}
		}
	}
	fmt.Printf("rank=%d done\n", r)
	return nil
}
