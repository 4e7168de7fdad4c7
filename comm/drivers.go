package comm

// comm imports every backend it ships, so that comm.Init finds "tcp", "shm",
// "hier", "nccl" and "mpi" with no blank import in the user's program (the
// packages register themselves in init). nccl loads libnccl with dlopen
// when a group is created, so linking it costs no CUDA dependency; mpi is a
// stub that says how to build it unless the mpi build tag is set.
import (
	_ "goddp/comm/hier"
	_ "goddp/comm/mpi"
	_ "goddp/comm/nccl"
	_ "goddp/comm/shm"
	_ "goddp/comm/tcp"
)
