// C side of the mpi backend (built only with the mpi tag, see shim.c).
#ifndef GODDP_MPI_SHIM_H
#define GODDP_MPI_SHIM_H

#include <mpi.h>
#include <stdint.h>

// Codes shared with Go: dtype codes are comm.DType's values, op codes
// comm.ReduceOp's.
enum { GD_F32 = 0, GD_F64, GD_I32, GD_I64, GD_F16, GD_BF16 };
enum { GO_SUM = 0, GO_AVG, GO_MAX, GO_MIN, GO_PROD };

// gdm_ops holds the user-defined MPI_Ops of one initialisation of MPI.
typedef struct {
	MPI_Op half[2][5]; // [f16, bf16][op code]; GO_AVG reuses the sum
} gdm_ops;

int gdm_ops_create(gdm_ops *o);
void gdm_ops_free(gdm_ops *o);
void gdm_divide(void *buf, long count, int dt, int n);
int gdm_init(int want, int *provided, int *owner);
int gdm_world(int *rank, int *size);
int gdm_idup_world(MPI_Comm *out, MPI_Request *req);
int gdm_comm_setup(MPI_Comm c);
int gdm_comm_free(MPI_Comm *c);
MPI_Comm gdm_comm_null(void);
int gdm_finalize(void);
void gdm_error_string(int code, char *buf, int cap);
int gdm_iallreduce(gdm_ops *o, MPI_Comm c, void *buf, int n, int dt, int op, MPI_Request *r);
int gdm_ibcast(MPI_Comm c, void *buf, int n, int dt, int root, MPI_Request *r);
int gdm_iallgather(MPI_Comm c, void *out, void *in, int n, int dt, MPI_Request *r);
int gdm_ireduce_scatter(gdm_ops *o, MPI_Comm c, void *out, void *in, int n, int dt, int op, MPI_Request *r);
int gdm_ireduce(gdm_ops *o, MPI_Comm c, void *buf, int n, int dt, int op, int root, int me, MPI_Request *r);
int gdm_igather(MPI_Comm c, void *out, void *in, int n, int dt, int root, MPI_Request *r);
int gdm_iscatter(MPI_Comm c, void *out, void *in, int n, int dt, int root, MPI_Request *r);
int gdm_ialltoall(MPI_Comm c, void *out, void *in, int n, int dt, MPI_Request *r);
int gdm_isend(MPI_Comm c, void *buf, int n, int dt, int dst, int tag, MPI_Request *r);
int gdm_irecv(MPI_Comm c, void *buf, int n, int dt, int src, int tag, MPI_Request *r);
int gdm_ibarrier(MPI_Comm c, MPI_Request *r);
int gdm_testsome(MPI_Request *reqs, int n, double slice, int *idx, int *errs, int *done);

#endif
