//go:build !cgo

package trainer

import (
	"fmt"

	"github.com/goddp/goddp/tensor"
)

func openSim(localRank int) (tensor.Device, func(), error) {
	return nil, nil, fmt.Errorf("trainer: -device sim (sim:%d): this binary was built without cgo, which goddp/cuda/sim needs", localRank)
}

func openCUDA(localRank int) (tensor.Device, func(), error) {
	return nil, nil, fmt.Errorf("trainer: -device cuda (cuda:%d): this binary was built without cgo, which goddp/cuda needs", localRank)
}
