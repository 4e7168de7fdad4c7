// Package launchenv decides where a process sits in a distributed job (its
// rank, the world size, and its rank and rank count on its node) from the
// variables its launcher set. Every goddp package that needs the topology
// before a process group exists reads it here, so that comm and the data
// sampler can never disagree: before it, the sampler read only RANK and
// WORLD_SIZE, and under mpirun or srun it silently became a single replica
// while comm found the real world in OMPI_* or SLURM_*.
//
// Launchers are tried in this order, and the first whose rank or world-size
// variable is set decides both (it must set both):
//
//	torchrun, ddprun, PyTorchJob  RANK, WORLD_SIZE
//	OpenMPI mpirun                OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE
//	MPICH (Hydra PMI)             PMI_RANK, PMI_SIZE
//	Slurm srun                    SLURM_PROCID, SLURM_NTASKS
//
// The local rank and local world size are taken, each, from the first of
// LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID and
// of LOCAL_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS,
// SLURM_NTASKS_PER_NODE, then Slurm's per-node task list
// (SLURM_STEP_TASKS_PER_NODE or SLURM_TASKS_PER_NODE, "2(x3),1") at
// SLURM_NODEID; they are used only when both are found.
//
// A value that is set but blank counts as unset. A value that is not an
// integer, a rank outside the world, or a launcher that sets only one of its
// pair is an error naming the variables, never a silent single process.
package launchenv
