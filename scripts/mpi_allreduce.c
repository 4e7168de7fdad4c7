/* MPI_Allreduce timing in ddpbench's conventions: for each size from min to
   max (doubling), float32 sum; time = slowest rank's mean per call;
   algbw = bytes/time; busbw = algbw * 2(n-1)/n. Rank 0 prints CSV. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  long minb = argc > 1 ? atol(argv[1]) : 1 << 20;
  long maxb = argc > 2 ? atol(argv[2]) : 64 << 20;
  int iters = argc > 3 ? atoi(argv[3]) : 5;
  float *buf = malloc(maxb);
  for (long i = 0; i < maxb / 4; i++) buf[i] = (float)((rank * 7 + i * 3) % 5 - 2);
  if (rank == 0) printf("bytes,count,dtype,time_us,algbw_gbps,busbw_gbps,iters,op,backend,nproc,collective\n");
  for (long b = minb; b <= maxb; b *= 2) {
    int count = (int)(b / 4);
    MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++)
      MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double el = (MPI_Wtime() - t0) / iters, slowest;
    MPI_Reduce(&el, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      double alg = (double)b / slowest / 1e9;
      printf("%ld,%d,float32,%.3f,%.4f,%.4f,%d,sum,openmpi,%d,allreduce\n", b, count, slowest * 1e6, alg,
             alg * 2.0 * (n - 1) / n, iters, n);
      fflush(stdout);
    }
  }
  free(buf);
  MPI_Finalize();
  return 0;
}
