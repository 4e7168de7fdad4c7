package comm

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/goddp/goddp/comm/store"
)

// How the ranks of one job meet in the store, and refuse everyone else.
//
// A store may be reached by processes that are not of this job: a rank of
// another job started on the same default port, a rank started with another
// WORLD_SIZE, or, with a reused file:// store, the keys of an earlier run.
// Rendezvous therefore goes in three steps, each failing at once with a
// message that names what differs:
//
//  1. Rank 0 publishes the job record (run id, world size, backend and the
//     job's fingerprint: program and arguments, see fingerprint.go) at
//     <root>/job with compare-and-set, where root is StorePrefix's first
//     element ("goddp"), so that jobs with different run ids, whose keys
//     live under different prefixes, still meet there. The record carries a
//     random generation that scopes every other key of the run, so a
//     reused store never serves an earlier run's peer addresses. Every
//     other rank reads the record and is refused if its run id, world size,
//     backend or fingerprint differs. A rank of another job (another run id
//     or fingerprint) leaves a note and goes, before it has claimed
//     anything, so the job keeps waiting for its own rank; a rank of this
//     job with other settings fails the job, which cannot start without it.
//  2. Each rank claims its slot, <prefix>/<gen>/rank/<r>, with
//     compare-and-set, once. A second claimant is refused naming the
//     holder, and aborts the run: it writes the abort into every slot not
//     yet claimed, which wakes the ranks waiting on them, and into
//     <prefix>/<gen>/abort, which Init checks once the backend is up and
//     which the rank hosting the store watches for the rest of the job.
//  3. Each rank reads every slot: the claims carry the ranks' hosts, from
//     which Init derives local ranks and checks those the environment gave.
//
// A record whose rank 0 has exited (same host and pid namespace, pid gone),
// or an empty one (a file store whose last run ended cleanly), belongs to
// no live run: rank 0 replaces it and the other ranks wait for that.

// member is what a rank puts in its slot: enough to tell two processes
// apart in an error message, and the settings every rank must share.
type member struct {
	Host    string `json:"host"` // hostIdentity()
	PidNS   string `json:"pidns,omitempty"`
	Pid     int    `json:"pid"`
	Nonce   string `json:"nonce"` // tells two Inits of one process apart
	Run     string `json:"run,omitempty"`
	World   int    `json:"world"`
	Backend string `json:"backend"`
	// LocalRankFrom names the variable LocalRank came from when no local
	// world size came with it; every rank checks it against the hosts.
	LocalRank     int    `json:"local_rank,omitempty"`
	LocalRankFrom string `json:"local_rank_from,omitempty"`
	// Job is the fingerprint of rank 0's job in its record (fingerprint.go);
	// nil in the other ranks' claims, and from a goddp older than issue 43,
	// which is not checked.
	Job *jobPrint `json:"job,omitempty"`
}

// jobRecord is rank 0's announcement of the run.
type jobRecord struct {
	member
	Auto   bool   `json:"auto,omitempty"` // Run was made up: rank 0 had none
	Prefix string `json:"prefix"`         // the run's StorePrefix (run id and attempt)
	Gen    string `json:"gen"`
}

// abortMark starts a slot's value when the run was aborted instead of
// the slot claimed.
const abortMark = "abort: "

// readOnly is the expected value of a compare-and-set used to read a key
// without blocking or writing: it never matches, so the store only returns
// what the key holds. Store has no such read itself.
const readOnly = "\x00goddp: read only\x00"

// peek reads key without blocking; nil when it is absent. goddp's stores
// answer an absent key with nothing, torch's TCPStore (torchrun's agent
// store) with the expected value.
func peek(ctx context.Context, s Store, key string) ([]byte, error) {
	v, err := s.CompareSet(ctx, key, []byte(readOnly), []byte(readOnly))
	if string(v) == readOnly {
		v = nil
	}
	return v, err
}

func newMember(cfg Config) member {
	ns, _ := os.Readlink("/proc/self/ns/pid")
	m := member{Host: hostIdentity(), PidNS: ns, Pid: os.Getpid(), Nonce: randomHex(8), Run: cfg.RunID,
		World: cfg.WorldSize, Backend: backendName(cfg.Backend)}
	if cfg.LocalWorldSize == 0 && cfg.localRankFrom != "" {
		m.LocalRank, m.LocalRankFrom = cfg.LocalRank, cfg.localRankFrom
	}
	return m
}

func backendName(b string) string {
	if b == "" {
		return "auto"
	}
	return b
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// String names the process for error messages.
func (m member) String() string {
	host, _, _ := strings.Cut(m.Host, "/")
	return fmt.Sprintf("pid %d on host %s", m.Pid, host)
}

// exited reports whether m's process is known to be gone: it ran on this
// host, in this pid namespace, and its pid no longer exists.
func (m member) exited() bool {
	me := newMember(Config{})
	if m.Host != me.Host || m.PidNS != me.PidNS || m.Pid <= 0 {
		return false
	}
	return errors.Is(syscall.Kill(m.Pid, 0), syscall.ESRCH)
}

// joined is what rendezvous found.
type joined struct {
	rec     jobRecord
	recRaw  []byte // the record as stored, for the clean-up of a file store
	ns      string // <prefix>/<gen>: every key of this run lives under it
	members []member
}

// rendezvous runs the three steps above for cfg.Rank.
// published, when set, is called on rank 0 with the run's namespace once
// its record is in the store, before it waits for the others.
func rendezvous(ctx context.Context, s Store, cfg Config, prefix, where string, published func(ns string)) (*joined, error) {
	me := newMember(cfg)
	job := thisJob(cfg)
	me.Job = &job
	recKey := rootOf(prefix) + "/job"
	var j joined
	var err error
	if cfg.Rank == 0 {
		j.rec, j.recRaw, err = publishRecord(ctx, s, recKey, jobRecord{member: me, Prefix: prefix, Gen: randomHex(8)}, where)
		if err == nil && published != nil {
			published(j.rec.Prefix + "/" + j.rec.Gen)
		}
	} else {
		j.rec, j.recRaw, err = readRecord(ctx, s, recKey, me, cfg.Rank, prefix, where)
	}
	if err != nil {
		return nil, err
	}
	// The job's namespace, which a rank of another run (whose prefix
	// differs) writes its refusal note into.
	j.ns = j.rec.Prefix + "/" + j.rec.Gen
	if err := checkAgainst(ctx, s, &j, me, cfg.Rank, where); err != nil {
		return nil, err
	}
	// Only rank 0's fingerprint is compared, and every rank reads every
	// claim: the claims go without one (up to a KiB each, of a command line).
	me.Job = nil
	if err := claimSlot(ctx, s, &j, me, cfg.Rank, where); err != nil {
		return nil, err
	}
	j.members = make([]member, cfg.WorldSize)
	for r := range cfg.WorldSize {
		if r == cfg.Rank {
			j.members[r] = me
			continue
		}
		v, err := s.Get(ctx, slotKey(j.ns, r))
		if err != nil {
			return nil, fmt.Errorf("comm: rank %d: waiting for rank %d to join: %w%s", cfg.Rank, r, err, refusedNote(s, j.ns, r))
		}
		if msg, ok := strings.CutPrefix(string(v), abortMark); ok {
			return nil, fmt.Errorf("%w: rank %d: the job's rendezvous at %s failed: %s", ErrBadArgument, cfg.Rank, where, msg)
		}
		if err := json.Unmarshal(v, &j.members[r]); err != nil {
			return nil, fmt.Errorf("comm: rank %d: the store at %s holds %q for rank %d, not a goddp rank: %w", cfg.Rank, where, trim(v), r, err)
		}
	}
	if _, err := s.Add(ctx, j.ns+"/read", 1); err != nil {
		return nil, fmt.Errorf("comm: rank %d: join the job at %s: %w", cfg.Rank, where, err)
	}
	return &j, nil
}

// lingerForReaders keeps the store of a hosting rank that failed after
// rendezvous up until every rank has read the claims (or a few seconds
// passed), so that they all reach the same verdict from them (a local rank
// that disagrees with the hosts) instead of losing the store mid-read.
func lingerForReaders(s Store, ns string, world int, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), min(timeout, 5*time.Second))
	defer cancel()
	for {
		n, err := s.Add(ctx, ns+"/read", 0)
		if err != nil || n >= int64(world) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// lingerForClients keeps the store of a hosting rank whose rendezvous
// failed up until its other clients have gone, or for at most limit. The
// ranks still waiting on it read the abort that rendezvous wrote into
// their slots and fail naming its reason; closing the store under them
// would tell them only that the connection was lost.
func lingerForClients(srv *store.Server, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for srv.Clients() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

// rootOf is the first element of a store prefix.
func rootOf(prefix string) string {
	root, _, _ := strings.Cut(prefix, "/")
	return root
}

func slotKey(ns string, r int) string { return ns + "/rank/" + strconv.Itoa(r) }

// publishRecord puts rank 0's record at key, replacing one that belongs to
// no live run.
func publishRecord(ctx context.Context, s Store, key string, rec jobRecord, where string) (jobRecord, []byte, error) {
	if rec.Run == "" {
		rec.Run, rec.Auto = "auto-"+randomHex(4), true
	}
	want, err := json.Marshal(rec)
	if err != nil {
		return rec, nil, fmt.Errorf("comm: rank 0: %w", err)
	}
	var expected []byte
	for {
		got, err := s.CompareSet(ctx, key, expected, want)
		if err != nil {
			return rec, nil, fmt.Errorf("comm: rank 0: publish the job at %s: %w", where, err)
		}
		if bytes.Equal(got, want) {
			return rec, want, nil
		}
		var old jobRecord
		if len(got) == 0 || json.Unmarshal(got, &old) != nil {
			if len(got) == 0 {
				expected = got
				continue
			}
			return rec, nil, fmt.Errorf("%w: rank 0: the store at %s holds %q at %s, not a goddp job", ErrBadArgument, where, trim(got), key)
		}
		if old.exited() || (old.Run == rec.Run && !old.Auto && old.Prefix != rec.Prefix) {
			// Its rank 0 is gone, or it is an earlier attempt of this run.
			expected = got
			continue
		}
		msg := fmt.Sprintf("rank 0 was claimed twice: first by %s, then by %s", old.member, rec.member)
		abortRun(s, old.Prefix, old.Gen, old.World, msg)
		return rec, nil, fmt.Errorf("%w: rank 0: the store at %s already serves a job whose rank 0 is %s%s; refusing to join it (%s)",
			ErrBadArgument, where, old.member, runIDs(old, rec), sharedStoreHint(where))
	}
}

// runIDs names the run ids of two records that were given (not made up).
func runIDs(theirs, mine jobRecord) string {
	switch {
	case theirs.Auto || theirs.Run == mine.Run:
		return ""
	case mine.Auto:
		return fmt.Sprintf(" (its run id is %q)", theirs.Run)
	}
	return fmt.Sprintf(" (its run id is %q, this rank's %q)", theirs.Run, mine.Run)
}

// sharedStoreHint says how to give a job a store of its own.
func sharedStoreHint(where string) string {
	if strings.HasPrefix(where, "file://") {
		return "give each job its own file:// path; a run that did not end cleanly leaves the file in use too: delete it"
	}
	return "give each job its own MASTER_PORT or GODDP_TOKEN"
}

// readRecord waits for rank 0's record of this run.
func readRecord(ctx context.Context, s Store, key string, me member, rank int, prefix, where string) (jobRecord, []byte, error) {
	backoff := 20 * time.Millisecond
	for {
		v, err := s.Get(ctx, key)
		if err != nil {
			return jobRecord{}, nil, fmt.Errorf("comm: rank %d: waiting for rank 0 to join: %w", rank, err)
		}
		var rec jobRecord
		if len(v) > 0 {
			if err := json.Unmarshal(v, &rec); err != nil {
				return rec, nil, fmt.Errorf("%w: rank %d: the store at %s holds %q at %s, not a goddp job", ErrBadArgument, rank, where, trim(v), key)
			}
			// An earlier attempt of this run, or a run whose rank 0 has
			// exited, is replaced by this run's rank 0: wait for it.
			earlier := rec.Run == me.Run && me.Run != "" && rec.Prefix != prefix
			if !earlier && !rec.exited() {
				return rec, v, nil
			}
		}
		select {
		case <-ctx.Done():
			return rec, nil, fmt.Errorf("%w: rank %d: waiting for rank 0 to join: the store at %s holds only an earlier run's record",
				ErrTimeout, rank, where)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// checkAgainst refuses a rank whose run id, fingerprint, world size or
// backend is not the job's. A rank of another run, or another job by its
// fingerprint, leaves a note for the job and goes; a rank of this job
// with other settings aborts it, as the job cannot start without it.
func checkAgainst(ctx context.Context, s Store, j *joined, me member, rank int, where string) error {
	rec := j.rec
	if rank == 0 {
		return nil
	}
	if me.Run != "" && me.Run != rec.Run {
		theirs := fmt.Sprintf("%q", rec.Run)
		if rec.Auto {
			theirs += " (its rank 0 had no run id)"
		}
		leaveNote(ctx, s, j.ns, rank, fmt.Sprintf("%s, of run %q, was refused", me, me.Run))
		return fmt.Errorf("%w: rank %d: this rank's run id is %q but the job at %s is run %s, whose rank 0 is %s; "+
			"refusing to join another job (GODDP_RUN_ID, TORCHELASTIC_RUN_ID)", ErrBadArgument, rank, me.Run, where, theirs, rec.member)
	}
	if me.Job != nil && rec.Job != nil {
		if d := me.Job.differs(*rec.Job, me.Host == rec.Host); len(d) > 0 && !startedBy(rec.member) {
			what := strings.Join(d, ", ")
			leaveNote(ctx, s, j.ns, rank, fmt.Sprintf("%s, of another job (%s; it differs in %s), was refused", me, me.Job, what))
			return fmt.Errorf("%w: rank %d: this rank was started for another job than the one at %s, whose rank 0 is %s: "+
				"they differ in %s; refusing to join it. This rank: %s. Rank 0: %s. Two jobs on one store? %s; "+
				"ranks of one job that differ in these on purpose: set the same GODDP_RUN_ID on every rank",
				ErrBadArgument, rank, where, rec.member, what, me.Job, rec.Job, sharedStoreHint(where))
		}
	}
	var what string
	switch {
	case me.World != rec.World:
		what = fmt.Sprintf("WORLD_SIZE=%d but rank 0 (%s) has WORLD_SIZE=%d", me.World, rec.member, rec.World)
	case me.Backend != rec.Backend:
		what = fmt.Sprintf("GODDP_BACKEND=%s but rank 0 (%s) has GODDP_BACKEND=%s", me.Backend, rec.member, rec.Backend)
	default:
		return nil
	}
	msg := fmt.Sprintf("rank %d (%s) was started with %s", rank, me, what)
	abortRun(s, rec.Prefix, rec.Gen, rec.World, msg)
	return fmt.Errorf("%w: rank %d: %s; start every rank with the same values", ErrBadArgument, rank, what)
}

// leaveNote tells the job that a rank of another job was refused: the
// note at <ns>/refused/<rank> completes the job's timeout message should
// its own rank never come, and <ns>/stranger/<n> is what the rank hosting
// the store logs (watchStrangers). Best effort: the notes only inform.
func leaveNote(ctx context.Context, s Store, ns string, rank int, note string) {
	_ = s.Set(ctx, ns+"/refused/"+strconv.Itoa(rank), []byte(note))
	if n, err := s.Add(ctx, ns+"/strangers", 1); err == nil {
		_ = s.Set(ctx, strangerKey(ns, n), []byte(fmt.Sprintf("a process started as rank %d: %s", rank, note)))
	}
}

func strangerKey(ns string, n int64) string { return ns + "/stranger/" + strconv.FormatInt(n, 10) }

// strangerWatch logs, on the rank that hosts the store, each rank of
// another job that was refused: the job goes on (or waits for its own
// rank), but whoever runs it should know that another job shares its
// store. The watch is a blocking get on the in-process store, so it costs
// no round trips.
type strangerWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func watchStrangers(s Store, ns string, rank int, logf func(format string, args ...any)) *strangerWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &strangerWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for n := int64(1); ; {
			v, err := s.Get(ctx, strangerKey(ns, n))
			switch {
			case err == nil:
				logf("comm: rank %d: WARNING: %s; this job goes on without it", rank, v)
				n++
			case !errors.Is(err, ErrTimeout):
				return // stopped, or the store closed
			}
		}
	}()
	return w
}

// stop ends the watch; nil is a watch that never started.
func (w *strangerWatch) stop() {
	if w != nil {
		w.cancel()
		<-w.done
	}
}

// claimSlot takes rank's slot, once.
func claimSlot(ctx context.Context, s Store, j *joined, me member, rank int, where string) error {
	mine, err := json.Marshal(me)
	if err != nil {
		return fmt.Errorf("comm: rank %d: %w", rank, err)
	}
	got, err := s.CompareSet(ctx, slotKey(j.ns, rank), nil, mine)
	if err != nil {
		return fmt.Errorf("comm: rank %d: join the job at %s: %w", rank, where, err)
	}
	if bytes.Equal(got, mine) {
		return nil
	}
	if msg, ok := strings.CutPrefix(string(got), abortMark); ok {
		return fmt.Errorf("%w: rank %d: the job's rendezvous at %s failed: %s", ErrBadArgument, rank, where, msg)
	}
	var holder member
	_ = json.Unmarshal(got, &holder)
	abortRun(s, j.rec.Prefix, j.rec.Gen, j.rec.World, fmt.Sprintf("rank %d was claimed twice: first by %s, then by %s", rank, holder, me))
	return fmt.Errorf("%w: rank %d: rank %d of the job at %s is already taken by %s; refusing to join "+
		"(another job using the same store? %s; or two processes were started with RANK=%d)",
		ErrBadArgument, rank, rank, where, holder, sharedStoreHint(where), rank)
}

// abortRun fails the rendezvous of the run gen for every rank: those
// waiting for a slot find the abort in it, later ones cannot claim theirs,
// and ranks already past rendezvous see it at abortKey. It is best effort
// (the rank that calls it fails anyway), so it has its own short timeout.
func abortRun(s Store, prefix, gen string, world int, msg string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ns := prefix + "/" + gen
	if _, err := s.CompareSet(ctx, abortKey(ns), nil, []byte(msg)); err != nil {
		return
	}
	mark := []byte(abortMark + msg)
	for r := range world {
		if _, err := s.CompareSet(ctx, slotKey(ns, r), nil, mark); err != nil {
			return
		}
	}
}

func abortKey(ns string) string { return ns + "/abort" }

// aborted reads the run's abort message without blocking ("" when none).
func aborted(ctx context.Context, s Store, ns string) (string, error) {
	v, err := peek(ctx, s, abortKey(ns))
	return string(v), err
}

// refusedNote explains, for a timeout waiting on rank r, that a process
// started as rank r was refused as being of another run. The store call
// gets its own timeout: the rendezvous's has passed.
func refusedNote(s Store, ns string, r int) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v, err := peek(ctx, s, ns+"/refused/"+strconv.Itoa(r))
	if err != nil || len(v) == 0 {
		return ""
	}
	return fmt.Sprintf(" (%s)", v)
}

// localPlacement derives each rank's local rank and local world size from
// the hosts in the claims, and checks the local ranks that the environment
// gave without a local world size: self's first, so that a rank names its
// own mistake, then the others', so that every rank fails together.
func localPlacement(members []member, self int) (localRank, localSize []int, err error) {
	n := len(members)
	localRank, localSize = make([]int, n), make([]int, n)
	perHost := map[string]int{}
	for r, m := range members {
		localRank[r] = perHost[m.Host]
		perHost[m.Host]++
	}
	for r, m := range members {
		localSize[r] = perHost[m.Host]
	}
	order := make([]int, 1, n)
	order[0] = self
	for r := range members {
		if r != self {
			order = append(order, r)
		}
	}
	for _, r := range order {
		if m := members[r]; m.LocalRankFrom != "" && m.LocalRank != localRank[r] {
			return nil, nil, fmt.Errorf("rank %d was started with %s=%d but is local rank %d of the %d ranks on its host "+
				"(no local world size was set, so comm counts the ranks per host); set LOCAL_WORLD_SIZE with it, or fix %s",
				r, m.LocalRankFrom, m.LocalRank, localRank[r], localSize[r], m.LocalRankFrom)
		}
	}
	return localRank, localSize, nil
}

func trim(v []byte) string {
	if len(v) > 64 {
		return string(v[:64]) + "..."
	}
	return string(v)
}
