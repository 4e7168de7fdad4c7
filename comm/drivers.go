package comm

// comm imports every backend it ships, so that comm.Init finds "tcp", "shm",
// "hier", "nccl" and "mpi" with no blank import in the user's program (the
// packages register themselves in init). nccl loads libnccl with dlopen
// when a group is created, so linking it costs no CUDA dependency; mpi is a
// stub that says how to build it unless the mpi build tag is set.
import (
	_ "github.com/goddp/goddp/comm/hier"
	_ "github.com/goddp/goddp/comm/mpi"
	_ "github.com/goddp/goddp/comm/nccl"
	_ "github.com/goddp/goddp/comm/shm"
	_ "github.com/goddp/goddp/comm/tcp"
)
