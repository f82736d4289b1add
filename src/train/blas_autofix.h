/* OpenBLAS kernels for CPUs that OpenBLAS does not recognise (docs/performance.md, "Kernels:
 * OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE"). OpenBLAS picks its kernels when it is loaded, before main, and
 * falls back to its SSE3 Prescott kernels on x86 models newer than it (Debian's 0.3.21 on many
 * "Intel(R) Xeon(R) Processor" nodes): GEMMs 3-4× slower. hetseq then re-executes itself once, before
 * MPI starts, with OPENBLAS_CORETYPE naming the kernels the CPU's features allow, after checking in
 * child processes that those kernels run here and are faster. */
#ifndef HS_TRAIN_BLAS_AUTOFIX_H
#define HS_TRAIN_BLAS_AUTOFIX_H

/* First thing in main, before MPI_Init and before OpenBLAS computes anything. With argv[1] the hidden
 * probe mode ("--openblas-probe") it times an SGEMM, prints its rate and exits. Otherwise it may
 * execv /proc/self/exe with the same argv and OPENBLAS_CORETYPE set; returns when it does not.
 * Environment: OPENBLAS_CORETYPE set by the user is kept; HETSEQ_OPENBLAS_AUTOFIX=0 turns it off;
 * HETSEQ_OPENBLAS_AUTOFIX_TEST (tests only) is a comma list of: "detected" (treat the environment's
 * OPENBLAS_CORETYPE as OpenBLAS's own choice, to force the misdetected case on any CPU), "sigill" (the
 * candidate kernels' probe dies of SIGILL, as on a CPU without their instructions), "slower" (the
 * candidate's probe reports a tenth of its rate). */
void hs_blas_autofix(int argc, char **argv);

/* After MPI has started (the node's first rank known): says once per node what the autofix did, or why
 * the kernels in use are slower than the CPU allows. */
void hs_blas_autofix_report(void);

/* The OPENBLAS_CORETYPE that would use the CPU's AVX2/FMA or AVX-512 units when `core` (OpenBLAS's
 * name of the kernels in use) does not, else NULL. */
const char *hs_blas_better_coretype(const char *core);

#endif
