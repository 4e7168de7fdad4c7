#!/usr/bin/env bash
# All-reduce bus bandwidth on a simulated 4-node cluster (network namespaces,
# 2 ranks per node, each node's link shaped with tc): goddp's hier and tcp
# backends, and OpenMPI's MPI_Allreduce on the same namespaces and shaping.
# Needs root, iproute2 and (for the OpenMPI row) mpirun and mpicc.
#
#   scripts/cluster_bench.sh                      # 1 Gbit/s, 50 us
#   RATE=10gbit DELAY=1ms scripts/cluster_bench.sh
#   BACKENDS=hier MIN=64M MAX=64M ITERS=3 scripts/cluster_bench.sh
#
# SRC=DIR builds the binaries from another checkout (e.g. a `git archive`
# of HEAD when the working tree does not build). When the simulated nodes'
# ranks outnumber this host's cores, goddp's ranks are told not to spin
# while they wait (GODDP_SHM_SPIN=0s GODDP_SHM_YIELD=0s GODDP_TCP_SPIN_US=0),
# as OpenMPI's are with mpi_yield_when_idle: each simulated node believes
# it has the host's cores to itself. SPIN=1 keeps the backends' defaults.
#
# docs/scaleout.md records the figures.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
RATE=${RATE:-1gbit} DELAY=${DELAY:-50us} BACKENDS=${BACKENDS:-hier,tcp}
MIN=${MIN:-1M} MAX=${MAX:-64M} ITERS=${ITERS:-5} NODES=${NODES:-4} NPROC=${NPROC:-2}
SRC=${SRC:-.}
if [ "${SPIN:-0}" != 1 ] && [ $((NODES * NPROC)) -gt "$(nproc)" ]; then
	export GODDP_SHM_SPIN=${GODDP_SHM_SPIN:-0s} GODDP_SHM_YIELD=${GODDP_SHM_YIELD:-0s} GODDP_TCP_SPIN_US=${GODDP_TCP_SPIN_US:-0}
	echo "# $((NODES * NPROC)) ranks on $(nproc) cores: GODDP_SHM_SPIN=$GODDP_SHM_SPIN GODDP_SHM_YIELD=$GODDP_SHM_YIELD GODDP_TCP_SPIN_US=$GODDP_TCP_SPIN_US"
fi
bin=$(mktemp -d /tmp/goddp-clusterbench.XXXXXX)
trap 'rm -rf "$bin"' EXIT
chmod 755 "$bin"
(cd "$SRC" && go build -o "$bin/ddprun" ./cmd/ddprun && go build -o "$bin/ddpbench" ./cmd/ddpbench &&
	go build -o "$bin/clusterbench" ./internal/netcluster/clusterbench)
mpi=()
if command -v mpirun >/dev/null && command -v mpicc >/dev/null && [ "${OPENMPI:-1}" = 1 ]; then
	mpicc -O2 -o "$bin/mpi_allreduce" "$SRC/scripts/mpi_allreduce.c"
	mpi=(-mpi "$bin/mpi_allreduce")
else
	echo "# no OpenMPI row: mpirun or mpicc missing (apt-get install openmpi-bin libopenmpi-dev)"
fi
"$bin/clusterbench" -bindir "$bin" "${mpi[@]}" -nodes "$NODES" -nproc "$NPROC" -rate "$RATE" -delay "$DELAY" \
	-backends "$BACKENDS" -min "$MIN" -max "$MAX" -iters "$ITERS"
