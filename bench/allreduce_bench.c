/* All-reduce time against message size (not a test): MPI_Allreduce of floats with MPI_SUM, as hetseq
 * sums its gradients once per update, for sizes from 4 KiB to 256 MiB (x4 each step by default).
 * Each size: warm-up, then REPS repetitions (fewer for the largest sizes), each timed between barriers
 * as the slowest rank's time; small sizes repeat the all-reduce within a repetition so that one lasts
 * at least ~1 ms. Prints the median and the minimum per all-reduce, the algorithm bandwidth
 * (bytes / time) and the bus bandwidth (x 2(n-1)/n, what each link carries in a ring all-reduce, as
 * nccl-tests reports it), then fits the ring model
 *     t(bytes) = 2(n-1) * latency + 2(n-1)/n * bytes / bandwidth
 * (bandwidth: least squares over the sizes >= 1 MiB; latency: the whole time of the smallest size
 * divided by its 2(n-1) steps, an upper bound).
 *
 *   make bench/allreduce_bench     (or by hand: mpicc -O2 -o allreduce_bench bench/allreduce_bench.c)
 *   mpirun -np 4 bench/allreduce_bench [--min BYTES] [--max BYTES] [--factor F] [--reps N] [--label TEXT]
 * bench/run_allreduce_bench.sh runs it over shared memory and over TCP between network namespaces. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static long long parse_bytes(const char *s) {
  char *end;
  double v = strtod(s, &end);
  if (*end == 'k' || *end == 'K') v *= 1024.0;
  else if (*end == 'm' || *end == 'M') v *= 1024.0 * 1024.0;
  else if (*end == 'g' || *end == 'G') v *= 1024.0 * 1024.0 * 1024.0;
  return (long long)v;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  long long min_bytes = 4096, max_bytes = 256LL << 20;
  int factor = 4, reps = 11;
  const char *label = "";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--min") && i + 1 < argc) min_bytes = parse_bytes(argv[++i]);
    else if (!strcmp(argv[i], "--max") && i + 1 < argc) max_bytes = parse_bytes(argv[++i]);
    else if (!strcmp(argv[i], "--factor") && i + 1 < argc) factor = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--label") && i + 1 < argc) label = argv[++i];
    else {
      if (rank == 0)
        fprintf(stderr, "usage: allreduce_bench [--min BYTES] [--max BYTES] [--factor F] [--reps N] "
                        "[--label TEXT]   (BYTES may end in K, M or G)\n");
      MPI_Finalize();
      return 2;
    }
  }
  if (min_bytes < 4 || max_bytes < min_bytes || factor < 2 || reps < 1) {
    if (rank == 0) fprintf(stderr, "allreduce_bench: bad sizes, factor or repetitions\n");
    MPI_Finalize();
    return 2;
  }
  size_t max_count = (size_t)(max_bytes / 4);
  float *send = malloc(max_count * sizeof(float)), *recv = malloc(max_count * sizeof(float));
  if (!send || !recv) {
    fprintf(stderr, "allreduce_bench: rank %d: cannot allocate 2 x %lld bytes\n", rank, max_bytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (size_t i = 0; i < max_count; i++) send[i] = (float)(rank + 1), recv[i] = 0.0f;
  const float want = (float)n * (float)(n + 1) / 2.0f;

  if (rank == 0) {
    printf("# MPI_Allreduce(MPI_FLOAT, MPI_SUM) on %d ranks%s%s\n", n, *label ? ": " : "", label);
    printf("# %12s %11s %5s %12s %12s %11s %11s\n", "bytes", "floats", "reps", "median_us", "min_us",
           "algbw_GB/s", "busbw_GB/s");
  }
  double xs[64], ts[64], *times = malloc((size_t)reps * sizeof(double));
  int npoints = 0;
  for (long long bytes = min_bytes; bytes <= max_bytes && npoints < 64; bytes *= factor) {
    int count = (int)(bytes / 4);
    /* at least ~1 MiB moved per repetition; the largest sizes get fewer repetitions (at least 3) */
    int inner = (int)((1LL << 20) / bytes);
    inner = inner < 1 ? 1 : inner > 100 ? 100 : inner;
    int r = reps;
    if (bytes > (16LL << 20)) {
      r = (int)((reps * (16LL << 20)) / bytes);
      if (r < 3) r = 3;
      if (r > reps) r = reps;
    }
    for (int w = 0; w < (bytes > (16LL << 20) ? 1 : 3); w++)
      MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (recv[0] != want || recv[count - 1] != want) {
      fprintf(stderr, "allreduce_bench: rank %d: wrong sum %g (want %g)\n", rank, recv[count - 1], want);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int k = 0; k < r; k++) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      for (int j = 0; j < inner; j++) MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double t = (MPI_Wtime() - t0) / inner, tmax;
      MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      times[k] = tmax;
    }
    qsort(times, (size_t)r, sizeof(double), cmp_double);
    double med = r % 2 ? times[r / 2] : 0.5 * (times[r / 2 - 1] + times[r / 2]);
    double algbw = (double)bytes / med / 1e9, busbw = algbw * 2.0 * (n - 1) / n;
    if (rank == 0)
      printf("  %12lld %11d %5d %12.1f %12.1f %11.3f %11.3f\n", bytes, count, r, med * 1e6, times[0] * 1e6,
             algbw, busbw);
    xs[npoints] = 2.0 * (n - 1) / n * (double)bytes;
    ts[npoints] = med;
    npoints++;
  }
  if (rank == 0 && n > 1) {
    /* bandwidth: least squares of t against 2(n-1)/n * bytes over the sizes >= 1 MiB */
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    int m = 0;
    for (int i = 0; i < npoints; i++) {
      if (xs[i] * n / (2.0 * (n - 1)) < (double)(1 << 20)) continue;
      sx += xs[i], sy += ts[i], sxx += xs[i] * xs[i], sxy += xs[i] * ts[i], m++;
    }
    if (m >= 2 && m * sxx - sx * sx > 0) {
      double slope = (m * sxy - sx * sy) / (m * sxx - sx * sx);
      double alpha = ts[0] / (2.0 * (n - 1));
      printf("# fit (ring model t = 2(n-1)*latency + 2(n-1)/n*bytes/bandwidth): latency %.1f us, "
             "bandwidth %.3f GB/s\n", alpha * 1e6, 1.0 / slope / 1e9);
    } else {
      printf("# fit: needs at least two sizes >= 1 MiB\n");
    }
  }
  free(times);
  free(send);
  free(recv);
  MPI_Finalize();
  return 0;
}
