// Package cluster runs goddp under the launchers that clusters already have,
// with real daemons and real processes on one machine. It has no library code.
//
// A "node" is a network namespace with its own address, joined to the other
// node by a veth pair, and its own UTS host name (node0, node1), which
// /etc/netns/<ns>/hosts resolves on both nodes. That gives each rank what it
// would see on a real machine: its own host name, an address that is not
// loopback, and TCP that crosses a link.
//
//   - Slurm (slurm_test.go): munged, slurmctld on node0 and one slurmd per
//     node, from a slurm.conf written into a temporary directory.
//     `srun --nodes 2 --ntasks-per-node 2` starts examples/mlp directly
//     (ranks from SLURM_*), an sbatch script runs `srun ddprun ...` once per
//     node, and both train with the same losses as
//     `ddprun --nproc-per-node 4`. A rank killed with SIGKILL mid-training
//     fails the job and is named: by srun (`task 3: Killed`), by every
//     surviving rank's own error when srun does not stop them first, and,
//     under sbatch, by ddprun's root-cause report.
//   - OpenMPI (mpirun_test.go): mpirun on node0 starts its daemon on node1
//     through --mca plm_rsh_agent, a script that enters the node's namespace
//     where ssh would log in. The ranks build the tcp backend from OMPI_*
//     and MASTER_ADDR, or, built with -tags mpi, use the mpi backend over
//     OpenMPI's TCP transport; both train with the same losses as ddprun.
//     A rank killed mid-training fails the job, and mpirun names it.
//
// The tests need root (namespaces, the daemons slurmd and orted). They install what is
// missing with apt-get (scripts/setup-test.sh lists the same packages) and skip,
// saying why, only when not root or when the packages cannot be installed.
package cluster
