package comm

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/goddp/goddp/comm/store"
	"github.com/goddp/goddp/comm/store/c10d"
)

// torchrun's agent hosts a torch TCPStore at MASTER_ADDR:MASTER_PORT and
// tells its workers to use it instead of hosting their own (rank 0's
// would find the port taken): with static rendezvous in torch 1.x, with
// c10d rendezvous too in 2.x.
const (
	envUseAgentStore = "TORCHELASTIC_USE_AGENT_STORE"
	envRestartCount  = "TORCHELASTIC_RESTART_COUNT"
)

// openAgentStore joins the agent's store when torchrun says there is one,
// under the prefix torch's workers use in it, and reports whether it did
// (or tried). As torch's env:// rendezvous does, it reads the variables
// where env:// is resolved, whatever Config says otherwise; a launcher
// hosting goddp's own store (ddprun, GODDP_STORE_HOSTED=1, which sets
// TORCHELASTIC_USE_AGENT_STORE for torch's programs too) is not torchrun.
func openAgentStore(ctx context.Context, cfg Config, scheme, target string) (Store, bool, error) {
	if scheme != "env" || cfg.StoreHosted || os.Getenv(envUseAgentStore) != "True" {
		return nil, false, nil
	}
	rc := os.Getenv(envRestartCount)
	n, err := strconv.Atoi(rc)
	if err != nil || n < 0 {
		return nil, true, fmt.Errorf("%w: rank %d: %s=True but %s=%q is not a restart count", ErrBadArgument, cfg.Rank, envUseAgentStore, envRestartCount, rc)
	}
	s, err := c10d.Dial(ctx, target, c10d.WithTimeout(cfg.Timeout))
	if err != nil {
		return nil, true, fmt.Errorf("comm: rank %d: torchrun's agent store at %s (%s=True): %w", cfg.Rank, target, envUseAgentStore, err)
	}
	return store.NewPrefix(c10d.AgentPrefix(n), s), true, nil
}
