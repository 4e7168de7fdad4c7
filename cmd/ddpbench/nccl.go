package main

// The nccl backend is compiled into the default build: libnccl.so.2 is loaded
// only when a group is created, so `ddpbench allreduce -backend nccl` runs on
// a GPU machine and fails with a clear error elsewhere.
import _ "goddp/comm/nccl"
