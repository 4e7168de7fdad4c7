package launch

import (
	"strconv"
	"strings"
)

// visibleGPUs is how many of the GPUs NVML lists (their UUIDs, in any
// order) a CUDA program sees under CUDA_VISIBLE_DEVICES, applying the
// variable as the CUDA driver does: unset, every GPU; set (even to ""),
// the comma-separated entries up to the first invalid one, each a device
// index (below the count, not repeated), a UUID or a unique prefix of one
// ("GPU-8f3c..."), or a MIG instance ("MIG-...", counted as one device:
// NVML's GPU list does not name them). NVML itself ignores the variable,
// which is why ddprun's --nproc-per-node gpu applies it here.
func visibleGPUs(value string, set bool, uuids []string) int {
	if !set {
		return len(uuids)
	}
	seen := map[int]bool{}
	n := 0
	for _, e := range strings.Split(value, ",") {
		e = strings.TrimSpace(e)
		idx := -1
		switch {
		case e == "":
		case e[0] >= '0' && e[0] <= '9':
			if i, err := strconv.Atoi(e); err == nil && i < len(uuids) {
				idx = i
			}
		case strings.HasPrefix(e, "MIG-"):
			n++
			continue
		default:
			for i, u := range uuids {
				if strings.HasPrefix(u, e) {
					if idx >= 0 { // ambiguous prefix: invalid
						idx = -1
						break
					}
					idx = i
				}
			}
		}
		if idx < 0 || seen[idx] {
			break
		}
		seen[idx] = true
		n++
	}
	return n
}
