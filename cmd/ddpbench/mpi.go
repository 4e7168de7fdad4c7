//go:build mpi

package main

// With -tags mpi, ddpbench can drive the "mpi" backend under mpirun:
//
//	go build -tags mpi -o ddpbench ./cmd/ddpbench
//	mpirun -np 2 ./ddpbench allreduce -backend mpi
//
// (OMPI_COMM_WORLD_RANK tells ddpbench it was started by a launcher;
// comm.ConfigFromEnv takes the rank and world size from mpirun's variables.)
import _ "goddp/comm/mpi"
