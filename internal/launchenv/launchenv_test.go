package launchenv

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func lookupIn(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want Env
	}{
		{"nothing set: one process", nil, Env{WorldSize: 1}},
		{"blank counts as unset", map[string]string{"RANK": " ", "WORLD_SIZE": ""}, Env{WorldSize: 1}},
		{"torchrun", map[string]string{"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"},
			Env{Rank: 3, WorldSize: 8, LocalRank: 1, LocalWorldSize: 2, HasLocal: true, Launcher: "torchrun", RankKey: "RANK", WorldSizeKey: "WORLD_SIZE"}},
		{"PyTorchJob: no local pair", map[string]string{"RANK": "1", "WORLD_SIZE": "2"},
			Env{Rank: 1, WorldSize: 2, Launcher: "torchrun", RankKey: "RANK", WorldSizeKey: "WORLD_SIZE"}},
		{"mpirun", map[string]string{"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4",
			"OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"},
			Env{Rank: 2, WorldSize: 4, LocalWorldSize: 2, HasLocal: true, Launcher: "OpenMPI", RankKey: "OMPI_COMM_WORLD_RANK", WorldSizeKey: "OMPI_COMM_WORLD_SIZE"}},
		{"MPICH", map[string]string{"PMI_RANK": "5", "PMI_SIZE": "6", "MPI_LOCALRANKID": "2", "MPI_LOCALNRANKS": "3"},
			Env{Rank: 5, WorldSize: 6, LocalRank: 2, LocalWorldSize: 3, HasLocal: true, Launcher: "MPICH", RankKey: "PMI_RANK", WorldSizeKey: "PMI_SIZE"}},
		{"srun with --ntasks-per-node", map[string]string{"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "SLURM_NTASKS_PER_NODE": "4"},
			Env{Rank: 5, WorldSize: 8, LocalRank: 1, LocalWorldSize: 4, HasLocal: true, Launcher: "Slurm", RankKey: "SLURM_PROCID", WorldSizeKey: "SLURM_NTASKS"}},
		{"srun, uneven nodes", map[string]string{"SLURM_PROCID": "6", "SLURM_NTASKS": "7", "SLURM_LOCALID": "0",
			"SLURM_NODEID": "3", "SLURM_STEP_TASKS_PER_NODE": "2(x3),1", "SLURM_TASKS_PER_NODE": "9"},
			Env{Rank: 6, WorldSize: 7, LocalWorldSize: 1, HasLocal: true, Launcher: "Slurm", RankKey: "SLURM_PROCID", WorldSizeKey: "SLURM_NTASKS"}},
		{"srun, job list", map[string]string{"SLURM_PROCID": "3", "SLURM_NTASKS": "6", "SLURM_LOCALID": "1",
			"SLURM_NODEID": "1", "SLURM_TASKS_PER_NODE": "2(x3)"},
			Env{Rank: 3, WorldSize: 6, LocalRank: 1, LocalWorldSize: 2, HasLocal: true, Launcher: "Slurm", RankKey: "SLURM_PROCID", WorldSizeKey: "SLURM_NTASKS"}},
		{"srun, local rank only", map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_LOCALID": "1"},
			Env{Rank: 1, WorldSize: 2, Launcher: "Slurm", RankKey: "SLURM_PROCID", WorldSizeKey: "SLURM_NTASKS"}},
		{"torchrun inside an srun step wins", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "SLURM_PROCID": "5", "SLURM_NTASKS": "8"},
			Env{Rank: 0, WorldSize: 2, Launcher: "torchrun", RankKey: "RANK", WorldSizeKey: "WORLD_SIZE"}},
		{"spaces", map[string]string{"RANK": " 1 ", "WORLD_SIZE": "2\n"},
			Env{Rank: 1, WorldSize: 2, Launcher: "torchrun", RankKey: "RANK", WorldSizeKey: "WORLD_SIZE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(lookupIn(tc.env))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"rank not a number", map[string]string{"RANK": "x", "WORLD_SIZE": "2"}, `RANK="x" is not an integer`},
		{"world not a number", map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4.0"}, `OMPI_COMM_WORLD_SIZE="4.0" is not an integer`},
		{"rank without world", map[string]string{"RANK": "1"}, "RANK is set but WORLD_SIZE is not"},
		{"world without rank", map[string]string{"WORLD_SIZE": "2", "SLURM_PROCID": "1", "SLURM_NTASKS": "2"}, "WORLD_SIZE is set but RANK is not"},
		{"PMI half", map[string]string{"PMI_SIZE": "2"}, "PMI_SIZE is set but PMI_RANK is not (MPICH sets both"},
		{"rank out of range", map[string]string{"RANK": "2", "WORLD_SIZE": "2"}, "RANK=2 is outside [0, 2)"},
		{"negative rank", map[string]string{"SLURM_PROCID": "-1", "SLURM_NTASKS": "2"}, "SLURM_PROCID=-1 is outside"},
		{"zero world", map[string]string{"RANK": "0", "WORLD_SIZE": "0"}, "WORLD_SIZE=0: the world size must be at least 1"},
		{"local not a number", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "a", "LOCAL_WORLD_SIZE": "2"}, `LOCAL_RANK="a"`},
		{"local out of range", map[string]string{"RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "2"}, "LOCAL_RANK=2 is outside [0, 2)"},
		{"local world past world", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "3"}, "LOCAL_WORLD_SIZE=3"},
		{"slurm list", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0", "SLURM_NODEID": "0", "SLURM_TASKS_PER_NODE": "2(x"}, `SLURM_TASKS_PER_NODE="2(x": bad item`},
		{"slurm node past list", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_NODEID": "2", "SLURM_TASKS_PER_NODE": "1(x2)"}, "SLURM_NODEID=2 but SLURM_TASKS_PER_NODE=\"1(x2)\" lists 2 nodes"},
		{"slurm node id", map[string]string{"SLURM_NODEID": "n1", "SLURM_TASKS_PER_NODE": "1"}, `SLURM_NODEID="n1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(lookupIn(tc.env))
			require.ErrorIs(t, err, ErrMalformed)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv("RANK", "1")
	t.Setenv("WORLD_SIZE", "3")
	e, err := FromEnv()
	require.NoError(t, err)
	assert.Equal(t, 1, e.Rank)
	assert.Equal(t, 3, e.WorldSize)
}
