package cluster

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// epochs is how long every job here trains examples/mlp: 2 epochs of 32
// steps at world 4 take about 9 s on 2 cores.
const epochs = "2"

var epochLoss = regexp.MustCompile(`(?m)^epoch=\d+ loss=\S+$`)

// losses are the per-epoch loss lines rank 0 printed.
func losses(out string) []string { return epochLoss.FindAllString(out, -1) }

var reference struct {
	once   sync.Once
	losses []string
	err    string
}

// referenceLosses are the losses of `ddprun --standalone --nproc-per-node 4
// mlp -epochs 2` on this host: what every launcher must reproduce.
func referenceLosses(t *testing.T) []string {
	t.Helper()
	reference.once.Do(func() {
		cmd := exec.Command(filepath.Join(binDir, "ddprun"), "--standalone", "--nproc-per-node", "4", "mlp", "-epochs", epochs)
		cmd.Env = jobEnv()
		r := run(t, cmd, 2*time.Minute)
		reference.losses = losses(r.stdout)
		if r.code != 0 || len(reference.losses) != 2 {
			reference.err = fmt.Sprintf("ddprun --nproc-per-node 4 mlp: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
	require.Empty(t, reference.err)
	return reference.losses
}
