package c10d

import "strconv"

// AgentPrefix is the prefix under which torch's workers keep their keys in
// the store of their torchrun agent: torch's env:// rendezvous wraps the
// agent's store in PrefixStore("/worker/attempt_<TORCHELASTIC_RESTART_COUNT>"),
// so each restart of the workers starts from fresh keys. Put it before
// every key with store.NewPrefix, which joins with "/" as PrefixStore does.
func AgentPrefix(restartCount int) string {
	return "/worker/attempt_" + strconv.Itoa(restartCount)
}
