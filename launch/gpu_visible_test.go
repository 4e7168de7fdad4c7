package launch

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// ddprun's --nproc-per-node gpu counts the GPUs CUDA_VISIBLE_DEVICES
// leaves visible, as the CUDA driver applies it (it used to count every GPU
// NVML lists).
func TestVisibleGPUs(t *testing.T) {
	uuids := []string{"GPU-8f3c1a", "GPU-8f77b2", "GPU-12ab00", "GPU-99ee11"}
	for _, tc := range []struct {
		name  string
		value string
		set   bool
		want  int
	}{
		{"unset", "", false, 4},
		{"empty hides all", "", true, 0},
		{"indices", "0,2", true, 2},
		{"spaces", " 1 , 3 ", true, 2},
		{"stops at an invalid index", "0,7,1", true, 1},
		{"negative hides all", "-1", true, 0},
		{"NoDevFiles", "NoDevFiles", true, 0},
		{"repeat stops", "1,1,2", true, 1},
		{"uuid prefixes", "GPU-12,GPU-99ee", true, 2},
		{"ambiguous prefix stops", "GPU-8f", true, 0},
		{"mixed", "3,GPU-8f3c1a", true, 2},
		{"mig", "MIG-5c5e2a31-0b0a-5d2f-a2a5-9c2d7e1c5a01", true, 1},
		{"more than present", "0,1,2,3,4", true, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, visibleGPUs(tc.value, tc.set, uuids))
		})
	}
}
