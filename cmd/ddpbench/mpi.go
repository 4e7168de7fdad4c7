//go:build mpi

package main

// With -tags mpi, ddpbench can drive the "mpi" backend under mpirun:
//
//	go build -tags mpi -o ddpbench ./cmd/ddpbench
//	mpirun -np 2 sh -c 'RANK=$OMPI_COMM_WORLD_RANK exec ./ddpbench allreduce -backend mpi'
//
// (RANK tells ddpbench it was started by a launcher; comm.ConfigFromEnv
// takes the world size from OMPI_COMM_WORLD_SIZE.)
import _ "goddp/comm/mpi"
