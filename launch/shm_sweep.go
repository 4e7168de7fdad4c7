package launch

import "github.com/goddp/goddp/internal/shmfile"

// sweepWorkerShm removes the shared-memory files (/dev/shm/goddp-shm-*) of
// workers that died before unlinking them: a rank 0 killed while the other
// ranks were still mapping its segment leaves it behind, and no rank of
// that job is left to remove it. The launcher calls it when it starts and
// whenever a round ends (after its workers have exited or been stopped);
// shmfile.SweepDead touches only files whose creator is gone, so jobs running
// beside this one keep theirs.
func (a *agent) sweepWorkerShm() {
	removed, err := shmfile.SweepDead()
	if err != nil {
		a.logf("sweeping dead workers' shared memory: %v", err)
	}
	for _, p := range removed {
		a.logf("removed %s, left by a worker that died", p)
	}
}
